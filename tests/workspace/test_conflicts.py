"""A rebase stopped at a conflict (tf_fsm.workspace.conflicts) on real repositories: each kind of
conflict named as git names it, a resolver's result checked (markers, unmerged paths, a
rebase it continued, finished or abandoned itself), a rebase that stops twice, a failed
resolution kept under a ref with the branch back where it was; the rebase from a recorded
fork point; and the pure rules of tf_fsm.core.conflicts."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepo import commit_all, git, isolate, status
from tests.workspace.test_merge import parents, show, ticket, work
from tf_fsm.core import workspace_events as wev
from tf_fsm.core.conflicts import (
    conflict_kind,
    marker_lines,
    overlap,
    resolution_refusal,
    resolutions_tried,
    said_conflicts,
)
from tf_fsm.core.journal import RetryStateReset
from tf_fsm.settings.workspace import Conflicts
from tf_fsm.workspace.conflicts import carry_on, keeps_the_ticket, set_aside
from tf_fsm.workspace.model import Workspace
from tf_fsm.workspace.rebase import rebase_onto_base


def on_main(ws: Workspace, files: dict[str, str | None], message: str = "main moved") -> str:
    """A commit on main at the root: `files` written, or removed when None."""
    for name, text in files.items():
        path = ws.root / name
        if text is None:
            path.unlink()
        else:
            path.write_text(text, encoding="utf-8")
    return commit_all(ws.root, message)


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    isolate(monkeypatch)
    monkeypatch.setenv("GIT_EDITOR", "true")
    return ticket(tmp_path)


# -- the stop ---------------------------------------------------------------------------------


def test_a_stop_names_each_conflict_and_what_each_side_did(ws: Workspace) -> None:
    old = work(ws, {"app.py": "def app():\n    return 'branch'\n", "lib.py": "X = 'branch'\n"})
    base = on_main(ws, {"app.py": "def app():\n    return 'main'\n", "lib.py": None})

    rebased = rebase_onto_base(ws, stop=True)

    assert rebased.moved is False and rebased.old_tip == old and rebased.base == base
    stop = rebased.stopped
    assert stop is not None and stop.commit == old and stop.subject == "ticket work"
    found = {c.path: (c.kind, c.base_side, c.ticket_side) for c in stop.conflicts}
    assert found == {
        "app.py": ("content", "changed it", "changed it"),
        "lib.py": ("modify/delete", "deleted it", "changed it"),
    }
    assert any(line.startswith("CONFLICT (modify/delete): lib.py") for line in stop.said)
    assert (ws.tree / "app.py").read_text().startswith("def app():\n<<<<<<< ")


def test_without_stop_a_conflict_still_aborts_the_rebase(ws: Workspace) -> None:
    old = work(ws, {"app.py": "A = 'branch'\n"})
    on_main(ws, {"app.py": "A = 'main'\n"})
    rebased = rebase_onto_base(ws)
    assert rebased.stopped is None and rebased.conflict == ["app.py"]
    assert git(ws.root, "rev-parse", "tf/pt-1") == old and status(ws.tree) == ""


# -- carrying on ------------------------------------------------------------------------------


def test_markers_left_are_refused_and_a_resolution_carries_the_rebase_on(ws: Workspace) -> None:
    work(ws, {"app.py": "A = 'branch'\n"})
    base = on_main(ws, {"app.py": "A = 'main'\n"})
    rebased = rebase_onto_base(ws, stop=True)

    left = carry_on(ws, rebased.stopped, base, ["app.py"])
    assert left.problem is not None and left.problem.startswith(
        "conflict markers are left in app.py (line 1, 3, 5)"
    )

    (ws.tree / "app.py").write_text("A = 'main and branch'\n", encoding="utf-8")
    done = carry_on(ws, rebased.stopped, base, ["app.py"])

    assert done.problem is None and done.stop is None and done.tip is not None
    assert git(ws.root, "rev-parse", "tf/pt-1") == done.tip
    assert parents(ws.root, done.tip) == [base]
    assert show(ws.root, "tf/pt-1:app.py") == "A = 'main and branch'\n"
    assert keeps_the_ticket(ws, base, rebased.old_tip + "^", rebased.old_tip)


def test_a_modify_delete_left_as_git_left_it_is_not_a_resolution(ws: Workspace) -> None:
    work(ws, {"lib.py": "X = 'branch'\n"})
    base = on_main(ws, {"lib.py": None})
    rebased = rebase_onto_base(ws, stop=True)
    assert rebased.stopped is not None

    untouched = carry_on(ws, rebased.stopped, base, ["lib.py"])
    assert untouched.problem == "lib.py (modify/delete) left as git left it at the conflict"

    git(ws.tree, "add", "lib.py")  # the resolver decided: the ticket's change stays
    kept = carry_on(ws, rebased.stopped, base, ["lib.py"])
    assert kept.tip is not None and show(ws.root, "tf/pt-1:lib.py") == "X = 'branch'\n"


def test_a_rebase_that_stops_twice_is_carried_on_twice(ws: Workspace) -> None:
    work(ws, {"app.py": "A = 'one'\n"}, "first")
    work(ws, {"lib.py": "X = 'two'\n"}, "second")
    base = on_main(ws, {"app.py": "A = 'main'\n", "lib.py": "X = 'main'\n"})
    rebased = rebase_onto_base(ws, stop=True)
    assert rebased.stopped is not None and rebased.stopped.paths == ["app.py"]

    (ws.tree / "app.py").write_text("A = 'main, one'\n", encoding="utf-8")
    again = carry_on(ws, rebased.stopped, base, ["app.py"])

    assert again.stop is not None and again.stop.paths == ["lib.py"]
    assert again.stop.subject == "second"
    (ws.tree / "lib.py").write_text("X = 'main, two'\n", encoding="utf-8")
    done = carry_on(ws, again.stop, base, ["app.py", "lib.py"])
    assert done.tip is not None
    assert git(ws.root, "log", "--format=%s", f"{base}..tf/pt-1").split("\n") == [
        "second",
        "first",
    ]


def test_a_resolver_that_ran_git_itself_is_judged_by_what_it_left(ws: Workspace) -> None:
    work(ws, {"app.py": "A = 'branch'\n"})
    base = on_main(ws, {"app.py": "A = 'main'\n"})
    rebased = rebase_onto_base(ws, stop=True)
    (ws.tree / "app.py").write_text("A = 'both'\n", encoding="utf-8")
    git(ws.tree, "add", "app.py")
    git(ws.tree, "rebase", "--continue")  # the resolver finished the rebase itself

    done = carry_on(ws, rebased.stopped, base, ["app.py"])

    assert done.tip == git(ws.root, "rev-parse", "tf/pt-1")
    assert show(ws.root, "tf/pt-1:app.py") == "A = 'both'\n"


def test_a_rebase_the_resolver_abandoned_is_a_failed_resolution(ws: Workspace) -> None:
    old = work(ws, {"app.py": "A = 'branch'\n"})
    base = on_main(ws, {"app.py": "A = 'main'\n"})
    rebased = rebase_onto_base(ws, stop=True)
    git(ws.tree, "rebase", "--abort")

    done = carry_on(ws, rebased.stopped, base, ["app.py"])

    assert done.problem is not None and "the rebase did not complete" in done.problem
    assert git(ws.root, "rev-parse", "tf/pt-1") == old


# -- a failed resolution kept -------------------------------------------------------------------


def test_a_resolution_given_up_mid_rebase_is_kept_and_the_branch_is_back(ws: Workspace) -> None:
    old = work(ws, {"app.py": "A = 'branch'\n"})
    on_main(ws, {"app.py": "A = 'main'\n"})
    rebase_onto_base(ws, stop=True)
    (ws.tree / "app.py").write_text("A = 'half'\n<<<<<<< left\n", encoding="utf-8")

    ref = set_aside(ws, "resolution-1", old)

    assert ref == "refs/tf/pt-1/resolution-1"
    assert show(ws.root, f"{ref}:app.py") == "A = 'half'\n<<<<<<< left\n"
    assert git(ws.root, "rev-parse", "tf/pt-1") == old
    assert git(ws.tree, "symbolic-ref", "--short", "HEAD") == "tf/pt-1"
    assert status(ws.tree) == "" and (ws.tree / "app.py").read_text() == "A = 'branch'\n"


def test_a_completed_resolution_given_up_keeps_its_tip_and_what_the_gates_left(
    ws: Workspace,
) -> None:
    old = work(ws, {"app.py": "A = 'branch'\n"})
    base = on_main(ws, {"app.py": "A = 'main'\n", "main.txt": "new on main\n"})
    rebased = rebase_onto_base(ws, stop=True)
    (ws.tree / "app.py").write_text("A = 'both'\n", encoding="utf-8")
    done = carry_on(ws, rebased.stopped, base, ["app.py"])
    (ws.tree / "coverage.out").write_text("what a gate wrote\n", encoding="utf-8")

    ref = set_aside(ws, "resolution-1", old)

    assert ref is not None and git(ws.root, "rev-parse", ref) == done.tip
    assert show(ws.root, f"{ref}-uncommitted:coverage.out") == "what a gate wrote\n"
    assert git(ws.root, "rev-parse", "tf/pt-1") == old
    assert status(ws.tree) == "" and not (ws.tree / "main.txt").exists()


def test_a_resolution_that_keeps_nothing_of_the_ticket_is_told_apart(ws: Workspace) -> None:
    old = work(ws, {"app.py": "A = 'branch'\n"})
    base = on_main(ws, {"app.py": "A = 'main'\n"})
    rebased = rebase_onto_base(ws, stop=True)
    (ws.tree / "app.py").write_text("A = 'main'\n", encoding="utf-8")  # the base's side whole
    done = carry_on(ws, rebased.stopped, base, ["app.py"])
    assert done.tip is not None
    assert not keeps_the_ticket(ws, base, f"{old}^", old)


# -- the recorded fork point ------------------------------------------------------------------


def test_a_commit_dropped_from_the_base_stays_dropped(ws: Workspace) -> None:
    dropped = on_main(ws, {"mistake.txt": "oops\n"}, "a mistake")
    fork = dropped
    git(ws.tree, "reset", "-q", "--hard", dropped)  # the branch was made after the mistake
    tip = work(ws, {"feature.py": "A = 1\n"})
    git(ws.root, "reset", "-q", "--hard", "HEAD~1")  # a person drops it from main...
    base = on_main(ws, {"fix.txt": "the right change\n"}, "the right change")

    rebased = rebase_onto_base(ws, fork)

    assert rebased.moved and rebased.old_tip == tip
    files = git(ws.root, "ls-tree", "-r", "--name-only", "tf/pt-1").split()
    assert "mistake.txt" not in files and "fix.txt" in files and "feature.py" in files
    assert parents(ws.root, rebased.new_tip) == [base]


def test_a_base_moved_back_behind_the_fork_point_drops_the_commit_too(ws: Workspace) -> None:
    dropped = on_main(ws, {"mistake.txt": "oops\n"}, "a mistake")
    git(ws.tree, "reset", "-q", "--hard", dropped)
    work(ws, {"feature.py": "A = 1\n"})
    git(ws.root, "reset", "-q", "--hard", "HEAD~1")  # main goes back, nothing new on it

    rebased = rebase_onto_base(ws, dropped)

    assert rebased.moved
    assert "mistake.txt" not in git(ws.root, "ls-tree", "-r", "--name-only", "tf/pt-1")


def test_a_branch_on_the_recorded_base_tip_is_not_rebased(ws: Workspace) -> None:
    tip = work(ws, {"feature.py": "A = 1\n"})
    base = git(ws.root, "rev-parse", "main")
    assert rebase_onto_base(ws, base).moved is False
    assert git(ws.root, "rev-parse", "tf/pt-1") == tip


# -- the pure rules ---------------------------------------------------------------------------


def test_marker_lines_find_git_markers_and_spare_a_heading_underline() -> None:
    text = "a\n<<<<<<< HEAD\nb\n||||||| base\nc\n=======\nd\n>>>>>>> 1234 (x)\n"
    assert marker_lines(text) == [2, 4, 6, 8]
    assert marker_lines("Title\n=======\n\ntext\n") == []
    assert marker_lines("<<<<<<<\n") == [1]
    assert marker_lines("a <<<<<<< b\n") == []


def test_conflict_kinds_come_from_gits_words_first() -> None:
    said = said_conflicts(
        "CONFLICT (rename/delete): new.py renamed from old.py in HEAD, deleted in 1234 (x).\n"
        "Auto-merging a.py\nCONFLICT (content): Merge conflict in a.py\n"
    )
    assert said[0][0] == "rename/delete"
    assert conflict_kind("new.py", "AU", said) == "rename/delete"
    assert conflict_kind("a.py", "UU", said) == "content"
    assert conflict_kind("b.py", "UD", said) == "modify/delete"


def test_the_resolution_policy() -> None:
    agent = Conflicts()
    assert resolution_refusal(agent, 0, None) is None
    assert resolution_refusal(agent, 0, "budget: spent") == "budget: spent"
    refused = resolution_refusal(agent, 2, None)
    assert refused is not None and "maxAttempts 2" in refused
    assert resolution_refusal(Conflicts(mode="human"), 0, None) == (
        "workspace.conflicts.mode is human"
    )
    stamp = {"ts": "2026-11-27T00:00:00Z", "ticket": "pt-1"}
    started = wev.ResolutionStarted(
        **stamp, number=1, role="fixer", model="m", baseSha="a", oldTip="b", files={}
    )
    failed = wev.ResolutionFinished(**stamp, number=1, passed=False, reason="markers")
    assert resolutions_tried([started, started]) == 0  # a kill cut the first one short
    assert resolutions_tried([started, failed, started, failed]) == 2
    reset = RetryStateReset(**stamp, backup="x")
    assert resolutions_tried([started, failed, reset, started, failed]) == 1


def test_overlap_is_the_first_running_ticket_sharing_a_file() -> None:
    running = {"pt-1": frozenset({"a.py"}), "pt-2": frozenset({"b.py", "c.py"})}
    assert overlap(frozenset({"c.py", "b.py"}), running) == ("pt-2", ["b.py", "c.py"])
    assert overlap(frozenset({"d.py"}), running) is None
    assert overlap(frozenset(), running) is None
