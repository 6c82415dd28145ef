"""Rebasing a ticket's branch onto the base branch (tf_fsm.workspace.rebase), and `recover`
(tf_fsm.workspace.merge) undoing what a killed merge or rebase left: first each leftover made
by hand with plain git, then real processes SIGKILLed at random moments of a merge and of a
rebase, after which the ticket is merged exactly once and nothing is lost."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.gitrepo import commit_all, git, isolate, status
from tests.workspace.test_merge import (
    STATE_FILES,
    TK_CLOSED,
    TK_FILE,
    Strategy,
    add_ticket_worktree,
    changes,
    close_at_root,
    leftovers,
    make_repo,
    merge_ticket,
    parents,
    show,
    ticket,
    with_trailer,
    work,
)
from tf_fsm.errors import CorruptStateError, WorkspaceError
from tf_fsm.process.strays import end_orphans
from tf_fsm.workspace.locks import git_processes_in
from tf_fsm.workspace.merge import merged_commit
from tf_fsm.workspace.model import Workspace
from tf_fsm.workspace.rebase import Rebased, rebase_onto_base
from tf_fsm.workspace.recovery import recover


def move_main(root: Path, name: str = "lib.py", text: str = "X = 2\n") -> str:
    """A person's commit on main at the root, meanwhile."""
    (root / name).write_text(text, encoding="utf-8")
    return commit_all(root, f"a person's change to {name}")


def own_dir(ws: Workspace) -> Path:
    return ws.root / ".git" / "worktrees" / "pt-1"


def note(ws: Workspace, tip: str, strategy: str = "merge") -> Path:
    """The note merge() writes before it touches the checkout (what a kill leaves)."""
    path = ws.root / ".tf" / "ralph" / "merging" / "pt-1.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {
        "ticket": "pt-1",
        "tip": tip,
        "base": git(ws.root, "rev-parse", "main"),
        "checkout": str(ws.root),
        "strategy": strategy,
        "tkFile": TK_FILE,
    }
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# -- rebase_onto_base ----------------------------------------------------------------------


def test_a_branch_is_rebased_onto_a_moved_base_then_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    old = work(ws, {"feature.py": "A = 1\n", "app.py": "def app():\n    return 2\n"})
    base = move_main(ws.root)
    close_at_root(ws.root)

    rebased = rebase_onto_base(ws)

    new = git(ws.root, "rev-parse", "tf/pt-1")
    assert rebased == Rebased(True, [], base, old, new)
    assert parents(ws.root, new) == [base]
    assert (ws.tree / "lib.py").read_text() == "X = 2\n" and status(ws.tree) == ""
    assert rebase_onto_base(ws) == Rebased(False, [], base, new, new)
    merged = merge_ticket(ws)
    assert parents(ws.root, merged.commit) == [base, new]
    assert show(ws.root, "main:lib.py") == "X = 2\n"
    assert show(ws.root, "main:app.py") == "def app():\n    return 2\n"
    assert with_trailer(ws.root, new) == [merged.commit]


def test_a_conflict_aborts_the_rebase_and_keeps_both_sides(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    old = work(ws, {"app.py": "def app():\n    return 'branch'\n", "feature.py": "A = 1\n"})
    base = move_main(ws.root, "app.py", "def app():\n    return 'main'\n")

    rebased = rebase_onto_base(ws)

    assert rebased == Rebased(False, ["app.py"], base, old, old)
    assert git(ws.root, "rev-parse", "tf/pt-1") == old
    assert git(ws.tree, "symbolic-ref", "--short", "HEAD") == "tf/pt-1"
    assert not any((own_dir(ws) / name).exists() for name in STATE_FILES)
    assert status(ws.tree) == ""
    assert (ws.tree / "app.py").read_text() == "def app():\n    return 'branch'\n"
    assert show(ws.root, "main:app.py") == "def app():\n    return 'main'\n"
    assert (ws.root / "app.py").read_text() == "def app():\n    return 'main'\n"


def test_uncommitted_changes_in_the_worktree_refuse_the_rebase(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    old = work(ws, {"feature.py": "A = 1\n"})
    move_main(ws.root)
    (ws.tree / "feature.py").write_text("A = 'a person is editing'\n")
    git(ws.tree, "mv", "app.py", "renamed.py")

    with pytest.raises(WorkspaceError, match="uncommitted changes") as caught:
        rebase_onto_base(ws)
    assert "feature.py" in str(caught.value) and "renamed.py" in str(caught.value)
    assert (ws.tree / "feature.py").read_text() == "A = 'a person is editing'\n"
    assert git(ws.root, "rev-parse", "tf/pt-1") == old


def test_a_worktree_on_another_branch_is_not_rebased(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    work(ws, {"feature.py": "A = 1\n"})
    move_main(ws.root)
    git(ws.tree, "checkout", "-q", "-b", "experiment")
    with pytest.raises(WorkspaceError, match="does not have tf/pt-1 checked out"):
        rebase_onto_base(ws)


# -- recover: each leftover made by hand ---------------------------------------------------


def test_recover_with_nothing_left_does_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    work(ws, {"feature.py": "A = 1\n"})
    close_at_root(ws.root)
    assert recover(ws).notes == []
    assert changes(ws.root) == [" M .tickets/pt-1.md"]


def test_recover_removes_the_locks_a_killed_git_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tip = work(ws, {"feature.py": "A = 1\n"})
    heads = ws.root / ".git" / "refs" / "heads"
    locks = [
        ws.root / ".git" / "index.lock",
        heads / "main.lock",
        own_dir(ws) / "HEAD.lock",
        heads / "tf" / "pt-1.lock",
        own_dir(ws) / "CHERRY_PICK_HEAD.lock",
        ws.root / ".git" / "AUTO_MERGE.lock",
    ]
    for lock in locks:
        lock.write_text("")

    notes = recover(ws).notes

    assert sorted(notes) == sorted(
        f"removed {lock}, left by a git process that is no longer running" for lock in locks
    )
    assert not any(lock.exists() for lock in locks)
    merged = merge_ticket(ws)
    assert with_trailer(ws.root, tip) == [merged.commit]


def test_recover_aborts_a_rebase_left_in_the_worktree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    old = work(ws, {"app.py": "def app():\n    return 'branch'\n"})
    move_main(ws.root, "app.py", "def app():\n    return 'main'\n")
    git(ws.tree, "rebase", "main", check=False)
    assert (own_dir(ws) / "rebase-merge").is_dir()

    notes = recover(ws).notes

    assert notes == [
        f"aborted an unfinished rebase in {ws.tree}: tf/pt-1 is back at its tip "
        "from before that rebase"
    ]
    assert git(ws.root, "rev-parse", "tf/pt-1") == old
    assert not (own_dir(ws) / "rebase-merge").exists() and status(ws.tree) == ""
    assert (ws.tree / "app.py").read_text() == "def app():\n    return 'branch'\n"


def test_recover_puts_a_worktree_left_detached_by_a_killed_rebase_back_on_its_branch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebase killed once it had detached HEAD at the base, with no state left for `git
    rebase --abort`: the worktree goes back on the ticket's branch, which still holds its
    commits, and the rebase then runs."""
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    old = work(ws, {"feature.py": "A = 1\n"})
    base = move_main(ws.root)
    git(ws.tree, "checkout", "--quiet", "--detach", base)

    notes = recover(ws).notes

    assert notes == [
        f"put {ws.tree} back on tf/pt-1: a killed rebase had left it on a "
        f"detached HEAD at {base[:12]}"
    ]
    assert git(ws.tree, "symbolic-ref", "--short", "HEAD") == "tf/pt-1"
    assert rebase_onto_base(ws).moved and git(ws.root, "rev-parse", "tf/pt-1") != old


def test_recover_leaves_a_detached_head_with_commits_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A person's commit on a detached HEAD is on neither branch: recover leaves it where it
    is, and the rebase refuses, naming why."""
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    work(ws, {"feature.py": "A = 1\n"})
    move_main(ws.root)
    git(ws.tree, "checkout", "--quiet", "--detach")
    mine = commit_all(ws.tree, "a person's commit on a detached HEAD")

    assert recover(ws).notes == []
    assert git(ws.tree, "rev-parse", "HEAD") == mine
    with pytest.raises(WorkspaceError, match="does not have tf/pt-1 checked out"):
        rebase_onto_base(ws)


def test_recover_keeps_files_in_the_way_of_the_abort_under_a_ref(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A rebase killed while it wrote a file, before its index: the file is untracked, and
    `git rebase --abort` refuses to overwrite it. It is kept under a ref, then removed."""
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    work(ws, {"app.py": "def app():\n    return 'branch'\n"}, "first")
    old = work(ws, {"part.txt": "the whole part\n"}, "second")
    move_main(ws.root, "app.py", "def app():\n    return 'main'\n")
    git(ws.tree, "rebase", "main", check=False)  # stops at the first commit
    (ws.tree / "part.txt").write_text("the wh")  # the second one's file, cut short

    recovered = recover(ws)
    notes = recovered.notes

    ref = "refs/tf/pt-1/interrupted-rebase"
    assert recovered.kept == ref
    assert notes == [
        f"kept what a killed rebase left in {ws.tree} under {ref}, then removed part.txt, in "
        "the way of aborting it",
        f"aborted an unfinished rebase in {ws.tree}: tf/pt-1 is back at its tip from before "
        "that rebase",
    ]
    assert show(ws.root, f"{ref}:part.txt") == "the wh"
    assert git(ws.root, "rev-parse", "tf/pt-1") == old and status(ws.tree) == ""
    assert (ws.tree / "part.txt").read_text() == "the whole part\n"


def test_recover_undoes_a_merge_of_the_ticket_left_in_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tip = work(ws, {"feature.py": "A = 1\n", "app.py": "def app():\n    return 2\n"})
    base = git(ws.root, "rev-parse", "main")
    (ws.root / "lib.py").write_text("X = 'unstaged'\n")
    git(ws.root, "merge", "-q", "--no-ff", "--no-commit", "tf/pt-1")
    close_at_root(ws.root)
    git(ws.root, "add", TK_FILE)

    notes = recover(ws).notes

    assert notes == [
        f"undid an unfinished merge of {tip[:12]} in {ws.root}: it is back at {base[:12]}"
    ]
    assert leftovers(ws.root) == [] and not (ws.root / "feature.py").exists()
    assert changes(ws.root) == [" M .tickets/pt-1.md", " M lib.py"]
    assert (ws.root / TK_FILE).read_text() == TK_CLOSED
    assert (ws.root / "lib.py").read_text() == "X = 'unstaged'\n"
    merged = merge_ticket(ws)
    assert with_trailer(ws.root, tip) == [merged.commit]


def test_recover_leaves_a_merge_of_another_branch_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tip = work(ws, {"feature.py": "A = 1\n"})
    git(ws.root, "checkout", "-q", "-b", "side")
    side = move_main(ws.root, "side.txt", "side\n")
    git(ws.root, "checkout", "-q", "main")
    git(ws.root, "merge", "-q", "--no-ff", "--no-commit", "side")

    notes = recover(ws).notes

    assert notes == [
        f"left the unfinished merge in {ws.root} as it is: it is not tf-fsm's "
        f"merge of tf/pt-1 ({tip[:12]})"
    ]
    assert (ws.root / ".git" / "MERGE_HEAD").read_text().strip() == side


def test_recover_leaves_a_merge_alone_when_the_index_holds_more_than_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tip = work(ws, {"feature.py": "A = 1\n"})
    git(ws.root, "merge", "-q", "--no-ff", "--no-commit", "tf/pt-1")
    (ws.root / "lib.py").write_text("X = 'staged by a person'\n")
    git(ws.root, "add", "lib.py")

    notes = recover(ws).notes

    assert len(notes) == 1 and notes[0].startswith(f"left {ws.root} as it is: its index holds")
    assert (ws.root / ".git" / "MERGE_HEAD").read_text().strip() == tip
    assert "lib.py" in git(ws.root, "diff", "--cached", "--name-only").split()


def test_recover_puts_back_the_files_a_killed_merge_half_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `git merge` killed while it wrote the files, before its index: some files already
    hold the tip's content (new, changed, deleted), the index is still the base's."""
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    (ws.tree / "lib.py").unlink()
    tip = work(
        ws,
        {"feature.py": "A = 1\n", "app.py": "def app():\n    return 2\n", "docs/new.md": "new\n"},
    )
    close_at_root(ws.root)
    note(ws, tip)
    (ws.root / "feature.py").write_text("A = 1\n")
    (ws.root / "app.py").write_text("def app():\n    return 2\n")
    (ws.root / "lib.py").unlink()
    (ws.root / "docs").mkdir()
    (ws.root / "docs" / "new.md").write_text("a person's own notes\n")  # not the tip's: kept

    notes = recover(ws).notes

    assert notes == [
        f"put back 3 file(s) a killed merge had half written in {ws.root} (they "
        f"held the content of {tip[:12]}): app.py, feature.py, lib.py"
    ]
    assert changes(ws.root) == [" M .tickets/pt-1.md", "?? docs/new.md"]
    assert (ws.root / "lib.py").read_text() == "X = 1\n"
    assert (ws.root / "docs" / "new.md").read_text() == "a person's own notes\n"
    assert leftovers(ws.root) == []


def test_recover_removes_the_temporary_files_of_interrupted_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tip = work(ws, {"feature.py": "A = 1\n"})
    written = note(ws, tip, "squash")
    temps = [
        ws.root / ".tickets" / ".pt-1.md.4242.0.tmp",
        written.with_name(".pt-1.json.4.2.tmp"),
        ws.root / ".git" / ".SQUASH_MSG.4242.1.tmp",
    ]
    for temp in temps:
        temp.write_text("cut short")
    assert recover(ws).notes == []
    assert not any(temp.exists() for temp in temps)
    assert changes(ws.root) == [] and leftovers(ws.root) == []


def test_recover_after_a_rebase_merge_killed_past_its_fast_forward(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tip = work(ws, {"feature.py": "A = 1\n"})
    note(ws, tip, "rebase")
    git(ws.root, "merge", "-q", "--ff-only", "tf/pt-1")
    close_at_root(ws.root)
    git(ws.root, "add", TK_FILE)

    assert recover(ws).notes == []
    assert changes(ws.root) == [" M .tickets/pt-1.md"] and leftovers(ws.root) == []
    merged = merge_ticket(ws, "rebase")
    assert parents(ws.root, merged.commit) == [tip]
    assert with_trailer(ws.root, tip) == [merged.commit]


def test_recover_removes_a_temporary_worktree_in_any_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tmp = ws.root / ".tf" / "ralph" / "merging" / "pt-1"
    expected = [f"removed {tmp}, the temporary worktree of a merge, left by a killed process"]
    git(ws.root, "worktree", "add", "-q", "--detach", str(tmp), "main")
    git(tmp, "merge", "-q", "--no-ff", "--no-commit", "tf/pt-1")
    assert recover(ws).notes == expected
    git(ws.root, "worktree", "add", "-q", "--detach", str(tmp), "main")
    (tmp / ".git").unlink()  # killed half way through its removal
    assert recover(ws).notes == expected
    git(ws.root, "worktree", "add", "-q", "--detach", str(tmp), "main")
    shutil.rmtree(tmp)
    assert recover(ws).notes == expected

    assert not tmp.exists() and len(git(ws.root, "worktree", "list").splitlines()) == 2
    assert list((ws.root / ".git" / "worktrees").iterdir()) == [own_dir(ws)]
    assert recover(ws).notes == []


def test_a_corrupt_merge_note_is_an_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    path = note(ws, "0" * 40)
    path.write_text('{"tip": ')
    with pytest.raises(CorruptStateError, match="is not the note of a merge") as caught:
        recover(ws)
    assert caught.value.path == path and path.exists()


def test_merge_refuses_while_a_killed_merge_is_not_recovered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tip = work(ws, {"feature.py": "A = 1\n"})
    note(ws, tip)
    with pytest.raises(WorkspaceError, match="did not finish and was not recovered"):
        merge_ticket(ws)
    assert recover(ws).notes == [] and merge_ticket(ws).commit == merged_commit(ws)


# -- real processes killed at random moments -----------------------------------------------

MERGER = """
import sys, time
from pathlib import Path
from tf_fsm.workspace.merge import merge, merge_lock
from tf_fsm.workspace.model import Workspace
root = Path(sys.argv[1])
ws = Workspace("pt-1", root, root / ".tf/ralph/worktrees/pt-1", "tf/pt-1", "main")
print("ready", flush=True)
started = time.monotonic()
with merge_lock(root):
    merge(ws, strategy=sys.argv[2], message="Merge pt-1", tk_file=".tickets/pt-1.md",
          tk_text=sys.argv[3])
print(time.monotonic() - started, flush=True)
"""

REBASER = """
import sys, time
from pathlib import Path
from tf_fsm.workspace.model import Workspace
from tf_fsm.workspace.rebase import rebase_onto_base
root = Path(sys.argv[1])
ws = Workspace("pt-1", root, root / ".tf/ralph/worktrees/pt-1", "tf/pt-1", "main")
print("ready", flush=True)
started = time.monotonic()
rebase_onto_base(ws)
print(time.monotonic() - started, flush=True)
"""


def run_and_kill(script: str, args: list[str], delay: float | None) -> tuple[bool, float]:
    """Run `script`, SIGKILL it `delay` seconds after it is ready (never when None); whether
    it was killed before it finished, and how long its work took when it did finish."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    if delay is not None:
        time.sleep(delay)
        proc.kill()
    out, err = proc.communicate(timeout=60)
    assert proc.returncode in (0, -9), err
    settle(Path(args[0]))
    return proc.returncode == -9, float(out) if proc.returncode == 0 else 0.0


def settle(root: Path) -> None:
    """End what the killed process left running, as the next run does when it starts (a git
    started in the instant before the kill may never get its parent-death signal), then wait
    for the git it ran to end (that signal is delivered asynchronously)."""
    end_orphans()
    deadline = time.monotonic() + 10
    while git_processes_in([root]) and time.monotonic() < deadline:
        time.sleep(0.01)


def merge_template(tmp_path: Path) -> tuple[Path, str]:
    """A project whose ticket branch has three commits (new, changed, deleted files)."""
    root = make_repo(tmp_path / "template")
    git(root, "checkout", "-q", "-b", "tf/pt-1")
    (root / "feature.py").write_text("A = 1\n")
    commit_all(root, "add a feature")
    (root / "app.py").write_text("def app():\n    return 2\n")
    commit_all(root, "change the app")
    (root / "lib.py").unlink()
    tip = commit_all(root, "drop lib")
    git(root, "checkout", "-q", "main")
    return root, tip


def merge_trial(template: Path, root: Path, nowhere: bool) -> Workspace:
    shutil.copytree(template, root, symlinks=True)
    ws = add_ticket_worktree(root)
    if nowhere:
        git(root, "checkout", "-q", "-b", "elsewhere")
    close_at_root(root)
    return ws


def assert_merged_once(ws: Workspace, strategy: Strategy, tip: str, nowhere: bool) -> None:
    root = ws.root
    (commit,) = with_trailer(root, tip)
    assert show(root, f"main:{TK_FILE}") == TK_CLOSED
    assert show(root, "main:feature.py") == "A = 1\n"
    assert git(root, "ls-tree", "--name-only", "main", "lib.py") == ""
    shape = {"merge": [git(root, "rev-parse", f"{tip}~3"), tip], "rebase": [tip]}
    assert parents(root, commit) == shape.get(strategy, [git(root, "rev-parse", f"{tip}~3")])
    assert leftovers(root) == []
    assert changes(root) == ([" M .tickets/pt-1.md"] if nowhere else [])
    assert len(git(root, "worktree", "list").splitlines()) == 2


def test_a_merge_killed_at_any_moment_is_recovered_and_made_exactly_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    template, tip = merge_template(tmp_path)
    variants: list[tuple[Strategy, bool]] = [
        (s, nowhere) for nowhere in (False, True) for s in ("merge", "squash", "rebase")
    ]
    spans = {}
    for strategy, nowhere in variants:  # how long each takes here, when not killed
        merge_trial(template, tmp_path / f"calibrate-{strategy}-{nowhere}", nowhere)
        args = [str(tmp_path / f"calibrate-{strategy}-{nowhere}"), strategy, TK_CLOSED]
        spans[strategy, nowhere] = run_and_kill(MERGER, args, None)[1]
    interrupted = 0
    for seed in range(24):
        strategy, nowhere = variants[seed % len(variants)]
        ws = merge_trial(template, tmp_path / f"trial-{seed}", nowhere)
        rng = random.Random(seed)  # noqa: S311 - a reproducible moment, not a secret
        delay = rng.uniform(0, spans[strategy, nowhere] * 1.2)
        killed, _ = run_and_kill(MERGER, [str(ws.root), strategy, TK_CLOSED], delay)

        recover(ws)
        found = merged_commit(ws)
        merged = merge_ticket(ws, strategy)

        interrupted += killed and found is None
        assert merged.already == (found is not None), seed
        assert found is None or merged.commit == found
        assert_merged_once(ws, strategy, tip, nowhere)
        assert recover(ws).notes == [] and merge_ticket(ws, strategy).already
    assert interrupted > 0  # some trials did stop a merge half way


def rebase_template(tmp_path: Path, commits: int) -> tuple[Path, str, str]:
    """A ticket branch of many commits (so that a kill lands inside the rebase) and a base
    that moved meanwhile."""
    root = make_repo(tmp_path / "template")
    git(root, "checkout", "-q", "-b", "tf/pt-1")
    for n in range(commits):
        (root / f"part-{n}.txt").write_text(f"part {n}\n")
        commit_all(root, f"part {n}")
    tip = git(root, "rev-parse", "HEAD")
    git(root, "checkout", "-q", "main")
    return root, tip, move_main(root)


def test_a_rebase_killed_at_any_moment_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    commits = 30
    template, old, base = rebase_template(tmp_path, commits)
    shutil.copytree(template, tmp_path / "calibrate", symlinks=True)
    add_ticket_worktree(tmp_path / "calibrate")
    span = run_and_kill(REBASER, [str(tmp_path / "calibrate")], None)[1]
    interrupted = 0
    for seed in range(12):
        root = tmp_path / f"trial-{seed}"
        shutil.copytree(template, root, symlinks=True)
        ws = add_ticket_worktree(root)
        rng = random.Random(seed)  # noqa: S311 - a reproducible moment, not a secret
        killed, _ = run_and_kill(REBASER, [str(root)], rng.uniform(0, span))

        notes = recover(ws).notes
        between = git(root, "rev-parse", "tf/pt-1")
        assert between == old or git(root, "merge-base", "--is-ancestor", base, between) == ""
        assert status(ws.tree) == "" and not (own_dir(ws) / "rebase-merge").exists()
        interrupted += killed and bool(notes)
        rebase_onto_base(ws)

        new = git(root, "rev-parse", "tf/pt-1")
        assert parents(root, git(root, "rev-list", "--reverse", f"{base}..{new}").split()[0]) == [
            base
        ]
        assert git(root, "rev-list", "--count", f"{base}..{new}") == str(commits)
        assert git(root, "diff", "--name-only", old, new).split() == ["lib.py"]
        assert status(ws.tree) == "" and git(ws.tree, "symbolic-ref", "--short", "HEAD") == (
            "tf/pt-1"
        )
    assert interrupted > 0  # some trials did stop a rebase half way
