"""End-to-end: the merge queue's conflict resolution (docs/workspaces.md, "Conflicts"), with real
`tf-fsm` processes, the fake agent as a real process (its `resolve` edits are the resolver's
work, its `resolve-review` reviews the resolution) and real git repositories.

Every scenario is made deterministic the same way: pt-2 runs and pauses in its implement phase
until told to go; meanwhile pt-1 runs to its end and merges into main; then pt-2 goes on, passes
its gate, and its rebase onto the moved main conflicts.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tests.e2e.workspace_project import Project, wait_gone, worktree_of
from tests.gitrepo import git, status

RESOLVED = "pt-1 was here\npt-2 was here\n"
#: pt-2's resolver writes both sides' lines
RESOLVE = {"phase": "resolve", "file": "shared.txt", "text": RESOLVED, "mode": "write"}
REVIEWER = "reviewer-general"


def conflict_run(
    proj: Project,
    edits: list[dict[str, Any]],
    settings: dict[str, Any] | None = None,
    files: dict[str, str] | None = None,
    **plan: Any,
) -> subprocess.CompletedProcess[str]:
    """pt-1 merges while pt-2 is paused in implement; then pt-2 runs to its end: its run."""
    base = {"workspace": {"mode": "worktree"}}
    proj.create(
        ["pt-1", "pt-2"], {**base, **(settings or {})}, files=files or {"shared.txt": "original\n"}
    )
    pause = {
        "phase": "implement",
        "ticket": "pt-2",
        "touch": str(proj.sync / "pt-2"),
        "until": str(proj.sync / "go"),
    }
    proj.plan(edits=edits, pause=[pause], **plan)
    second = proj.start("run", "pt-2")
    proj.wait_for("pt-2", second)
    first = proj.cli("run", "pt-1")
    assert first.returncode == 0, first.stderr
    proj.go()
    out, err = second.communicate(timeout=120)
    return subprocess.CompletedProcess(second.args, second.returncode, out, err)


def same_hunk() -> list[dict[str, Any]]:
    return [
        {"phase": "implement", "file": "shared.txt", "text": "{ticket} was here", "mode": "write"}
    ]


def assert_left_for_a_person(proj: Project, done: subprocess.CompletedProcess[str]) -> str:
    """pt-2 ended merge_conflict, unmerged and unclosed, its branch back where it was; the
    reason it gives."""
    assert done.returncode == 5, done.stderr
    row = proj.status_json()["pt-2"]
    assert row["failureClass"] == "merge_conflict", row
    assert row["retryCount"] == 0, row  # a conflict spends no quality retry
    assert proj.tk_status("pt-2", "main") == "open"
    assert [c["ticket"] for c in proj.first_parent()] == ["pt-1", ""]
    (checkpoint,) = proj.log_of("main..tf/pt-2")
    assert checkpoint["parents"] == [git(proj.root, "rev-parse", "main^1")]  # the old tip
    assert status(worktree_of(proj, "pt-2")) == ""
    return str(row["lastFailure"])


def test_an_agent_resolves_a_same_hunk_conflict_and_the_ticket_merges(proj: Project) -> None:
    done = conflict_run(proj, [*same_hunk(), RESOLVE])

    assert done.returncode == 0, done.stderr
    assert proj.show("main:shared.txt") == RESOLVED
    assert [c["ticket"] for c in proj.first_parent()] == ["pt-2", "pt-1", ""]
    for tid in ("pt-1", "pt-2"):
        assert proj.tk_status(tid, "main") == "closed" == proj.tk_status(tid)
    proj.assert_nothing_left()  # no ref kept, no worktree, no branch, a clean root

    # the fixer resolved it once, on the attempt's tier; the reviewer reviewed it once
    (resolver,) = proj.calls(ticket="pt-2", phase="resolve")
    assert resolver["role"] == "fixer" and resolver["attempt"] == 1
    assert resolver["cwd"] == str(worktree_of(proj, "pt-2"))
    assert [c["role"] for c in proj.calls(ticket="pt-2", phase="resolve-review")] == [REVIEWER]
    (started,) = proj.events("pt-2", "ResolutionStarted")
    assert started["files"] == {"shared.txt": "content"} and started["number"] == 1
    assert started["model"] == resolver["model"]
    (finished,) = proj.events("pt-2", "ResolutionFinished")
    assert finished["passed"] is True and finished["ref"] is None
    (rebased,) = proj.events("pt-2", "MergeRebased")
    assert rebased["newTip"] == finished["newTip"]
    (merged,) = proj.events("pt-2", "MergeCompleted")
    assert git(proj.root, "rev-parse", "main") == merged["commit"]
    assert row_of(proj, "pt-2")["attempt"] == 1

    # the prompt named the file, the kind of conflict and the other side's ticket
    prompt = prompt_of(proj, "pt-2", "resolve-fixer-1-1")
    assert "| `shared.txt` | content |" in prompt
    assert "(ticket pt-1)" in prompt and "Merge pt-1: Ticket pt-1" in prompt
    assert "+pt-2 was here" in prompt  # the ticket's own change
    assert "+pt-1 was here" in prompt  # the base's change to the file

    # the ticket's path: the resolution's steps go with merging's edges
    merged = edge(proj, "pt-2", "merging --> closed: merged")
    assert "a1 resolution 1 by fixer" in merged and "shared.txt (content)" in merged
    assert "a1 resolve fixer" in merged and "a1 resolution 1 passed" in merged


def test_a_resolver_that_leaves_markers_is_kept_under_a_ref_and_a_person_takes_over(
    proj: Project,
) -> None:
    done = conflict_run(proj, same_hunk())  # no resolve edit: the markers stay

    reason = assert_left_for_a_person(proj, done)
    assert "conflict markers are left in shared.txt (line 1, 3, 5)" in reason, reason
    assert "refs/tf/pt-2/resolution-1" in reason, reason
    kept = proj.show("refs/tf/pt-2/resolution-1:shared.txt")
    assert kept.startswith("<<<<<<< ") and "pt-1 was here" in kept and "pt-2 was here" in kept
    assert proj.tf_refs() == ["refs/tf/pt-2/resolution-1"]
    (aside,) = proj.events("pt-2", "WorkSetAside")
    assert aside["ref"] == "refs/tf/pt-2/resolution-1"
    assert proj.calls(phase="resolve-review") == []  # nothing to review

    # a second run tries once more (workspace.conflicts.maxAttempts 2), then a person only
    again = proj.cli("run", "pt-2")
    assert "refs/tf/pt-2/resolution-2" in assert_left_for_a_person(proj, again)
    third = proj.cli("run", "pt-2")
    reason = assert_left_for_a_person(proj, third)
    assert "No agent resolves it: 2 resolution(s) by an agent were tried already" in reason
    assert len(proj.calls(ticket="pt-2", phase="resolve")) == 2
    assert proj.tf_refs() == ["refs/tf/pt-2/resolution-1", "refs/tf/pt-2/resolution-2"]

    # a person resolves it by hand and `tf-fsm run` merges it, as without resolution
    tree = worktree_of(proj, "pt-2")
    rebase = subprocess.run(["git", "rebase", "main"], cwd=tree, capture_output=True, text=True)
    assert rebase.returncode != 0
    (tree / "shared.txt").write_text(RESOLVED, encoding="utf-8")
    git(tree, "add", "shared.txt")
    git(tree, "rebase", "--continue")
    merged = proj.cli("run", "pt-2")
    assert merged.returncode == 0, merged.stderr
    assert proj.show("main:shared.txt") == RESOLVED


def test_human_mode_runs_no_resolver(proj: Project) -> None:
    human = {"workspace": {"mode": "worktree", "conflicts": {"mode": "human"}}}
    done = conflict_run(proj, [*same_hunk(), RESOLVE], human)
    reason = assert_left_for_a_person(proj, done)
    assert "No agent resolves it: workspace.conflicts.mode is human." in reason, reason
    assert proj.calls(phase="resolve") == [] and proj.tf_refs() == []


#: old.py's `A = 1`, moved into a function (unlike old.py, so git sees no rename)
MOVED = "def a():\n    return 1\n\n\n"


def test_a_modify_delete_conflict_is_named_and_resolved(proj: Project) -> None:
    """pt-1 moves old.py's content to new.py; pt-2 adds to old.py. The resolver keeps both:
    old.py stays deleted, pt-2's line goes where the content went."""
    edits = [
        {"phase": "implement", "ticket": "pt-1", "file": "old.py", "mode": "delete"},
        {"phase": "implement", "ticket": "pt-1", "file": "new.py", "text": MOVED},
        {"phase": "implement", "ticket": "pt-2", "file": "old.py", "text": "B = 2"},
        {"phase": "resolve", "file": "old.py", "mode": "delete"},
        {"phase": "resolve", "file": "new.py", "text": MOVED + "B = 2", "mode": "write"},
    ]
    done = conflict_run(proj, edits, files={"old.py": "A = 1\n"})

    assert done.returncode == 0, done.stderr
    (started,) = proj.events("pt-2", "ResolutionStarted")
    assert started["files"] == {"old.py": "modify/delete"}
    prompt = prompt_of(proj, "pt-2", "resolve-fixer-1-1")
    assert "| `old.py` | modify/delete | deleted it | changed it |" in prompt
    assert proj.show("main:new.py") == MOVED + "B = 2\n"
    assert "old.py" not in git(proj.root, "ls-tree", "--name-only", "main").split()
    proj.assert_nothing_left()


def test_a_modify_delete_left_as_git_left_it_is_not_resolved(proj: Project) -> None:
    edits = [
        {"phase": "implement", "ticket": "pt-1", "file": "old.py", "mode": "delete"},
        {"phase": "implement", "ticket": "pt-2", "file": "old.py", "text": "B = 2"},
    ]
    done = conflict_run(proj, edits, files={"old.py": "A = 1\n"})
    reason = assert_left_for_a_person(proj, done)
    assert "old.py (modify/delete) left as git left it at the conflict" in reason, reason


def test_a_resolution_that_fails_a_gate_is_not_merged(proj: Project) -> None:
    gate = {"name": "no-broken", "command": "! grep -q BROKEN shared.txt"}
    broken = {**RESOLVE, "text": "BROKEN"}
    done = conflict_run(proj, [*same_hunk(), broken], {"workflow": {"qualityGates": [gate]}})

    reason = assert_left_for_a_person(proj, done)
    assert "gate no-broken fails on the resolved tree" in reason, reason
    assert proj.show("refs/tf/pt-2/resolution-1:shared.txt") == "BROKEN\n"
    assert proj.calls(phase="resolve-review") == []  # the gates come before the review
    (finished,) = proj.events("pt-2", "ResolutionFinished")
    assert finished["passed"] is False and finished["ref"] == "refs/tf/pt-2/resolution-1"


def test_a_resolution_the_review_blocks_is_not_merged(proj: Project) -> None:
    finding = {"severity": "Major", "text": "`shared.txt:1` - pt-1's line was reordered"}
    done = conflict_run(proj, [*same_hunk(), RESOLVE], resolutionFindings=[finding])

    reason = assert_left_for_a_person(proj, done)
    assert "the review of the resolution: " in reason and "Major: 1" in reason, reason
    assert proj.show("refs/tf/pt-2/resolution-1:shared.txt") == RESOLVED
    review = (proj.root / ".tf/knowledge/tickets/pt-2/resolution-review.md").read_text()
    assert "pt-1's line was reordered" in review
    gates = [g for g in proj.events("pt-2", "GateEvaluated") if g["name"] == "resolution-review"]
    assert [g["passed"] for g in gates] == [False]


def test_a_commit_dropped_from_the_base_is_not_brought_back(proj: Project) -> None:
    """The base branch is force-moved mid-run (a person drops its last commit): the ticket is
    rebased onto the new base from where its branch began, so the dropped commit stays
    dropped."""
    proj.create(["pt-1"], {"workspace": {"mode": "worktree"}})
    (proj.root / "dropped.txt").write_text("a mistake\n", encoding="utf-8")
    git(proj.root, "add", "dropped.txt")
    git(proj.root, "commit", "-q", "-m", "a commit to drop")
    proj.plan(
        edits=[{"phase": "implement", "file": "src/{ticket}.py", "text": "X = 1"}],
        pause=[
            {"phase": "review", "touch": str(proj.sync / "review"), "until": str(proj.sync / "go")}
        ],
    )
    run = proj.start("run", "pt-1")
    proj.wait_for("review", run)
    git(proj.root, "reset", "-q", "--hard", "HEAD~1")  # the person drops it...
    (proj.root / "kept.txt").write_text("the right change\n", encoding="utf-8")
    git(proj.root, "add", "kept.txt")
    git(proj.root, "commit", "-q", "-m", "the right change")  # ...and commits another
    proj.go()
    _out, err = run.communicate(timeout=60)

    assert run.returncode == 0, err
    tree = git(proj.root, "ls-tree", "-r", "--name-only", "main").split()
    assert "dropped.txt" not in tree and "kept.txt" in tree and "src/pt-1.py" in tree
    assert "a commit to drop" not in git(proj.root, "log", "--format=%s", "main")
    proj.assert_nothing_left()


# -- helpers --------------------------------------------------------------------------------


def edge(proj: Project, tid: str, start: str) -> str:
    """The line of `tf-fsm diagram --ticket` (mermaid) for the edge `start`, with the notes of
    the ticket's path on it (`<br/>`-separated) when the ticket took it."""
    drawn = proj.cli("diagram", "--ticket", tid, "-o", "-")
    assert drawn.returncode == 0, drawn.stderr
    return next(ln for ln in drawn.stdout.splitlines() if ln.strip().startswith(start))


def row_of(proj: Project, tid: str) -> dict[str, Any]:
    return proj.status_json()[tid]


def prompt_of(proj: Project, tid: str, label: str, attempt: int = 1) -> str:
    path = proj.root / ".tf/knowledge/tickets" / tid / f"prompts/attempt-{attempt}/{label}.md"
    return Path(path).read_text(encoding="utf-8")


def test_rerun_mode_runs_the_attempt_again_from_the_base_tip(proj: Project) -> None:
    rerun = {"workspace": {"mode": "worktree", "conflicts": {"mode": "rerun"}}}
    done = conflict_run(proj, same_hunk(), rerun)  # the resolver leaves the markers

    assert done.returncode == 0, done.stderr
    state = (proj.root / ".tf/knowledge/tickets/pt-2/retry-state.json").read_text()
    attempts = __import__("json").loads(state)["attempts"]
    assert [a["status"] for a in attempts] == ["blocked", "closed"]
    assert "runs again from main's tip (workspace.conflicts.mode rerun)" in attempts[0]["reason"]
    assert "resolution 1 by an agent failed" in attempts[0]["reason"].lower()
    # attempt 2 started from main's tip as pt-1 left it, and merged without a conflict
    merge_of_pt1 = proj.first_parent()[1]
    assert merge_of_pt1["ticket"] == "pt-1"
    (second,) = [e for e in proj.events("pt-2", "AttemptStarted") if e["attempt"] == 2]
    assert second["head"] == merge_of_pt1["sha"]
    assert [c["ticket"] for c in proj.first_parent()] == ["pt-2", "pt-1", ""]
    assert proj.tk_status("pt-2", "main") == "closed"
    # attempt 1's work and its resolver's are kept, each under a journaled ref
    kept = sorted(e["ref"] for e in proj.events("pt-2", "WorkSetAside"))
    assert kept == ["refs/tf/pt-2/attempt-1", "refs/tf/pt-2/resolution-1"] == proj.tf_refs()
    assert proj.show("refs/tf/pt-2/attempt-1:shared.txt") == "pt-2 was here\n"
    assert len(proj.calls(ticket="pt-2", phase="resolve")) == 1
    rerun = edge(proj, "pt-2", "merging --> blocked: rerun")
    assert "a1 resolution 1 failed" in rerun and "a1 merge refused" in rerun, rerun
    assert "<br/>" not in edge(proj, "pt-2", "merging --> error: fail")  # not taken


def test_a_run_killed_during_the_resolution_is_finished_by_the_next(proj: Project) -> None:
    proj.create(
        ["pt-1", "pt-2"], {"workspace": {"mode": "worktree"}}, files={"shared.txt": "original\n"}
    )
    paused = {
        "phase": "implement",
        "ticket": "pt-2",
        "touch": str(proj.sync / "pt-2"),
        "until": str(proj.sync / "go"),
    }
    resolving = {
        "phase": "resolve",
        "touch": str(proj.sync / "resolving"),
        "until": str(proj.sync / "resolve"),
    }
    proj.plan(edits=[*same_hunk(), RESOLVE], pause=[paused, resolving])
    second = proj.start_alone("run", "pt-2")
    deadline = time.monotonic() + 60
    while not (proj.sync / "pt-2").exists():
        assert time.monotonic() < deadline and second.poll() is None
        time.sleep(0.02)
    assert proj.cli("run", "pt-1").returncode == 0
    proj.go()
    while not (proj.sync / "resolving").exists():
        assert time.monotonic() < deadline and second.poll() is None
        time.sleep(0.02)
    os.killpg(second.pid, signal.SIGKILL)  # the run, and the resolver it waits for
    second.wait()
    wait_gone(proj, second.pid)
    proj.go("resolve")

    again = proj.cli("run", "pt-2")

    assert again.returncode == 0, again.stderr
    # the same resolution ran again under its number: a kill is not a failed resolution
    assert [e["number"] for e in proj.events("pt-2", "ResolutionStarted")] == [1, 1]
    (finished,) = proj.events("pt-2", "ResolutionFinished")
    assert finished["number"] == 1 and finished["passed"] is True
    interrupted = "refs/tf/pt-2/resolution-1-interrupted"
    assert proj.show(f"{interrupted}:shared.txt").startswith("<<<<<<< ")
    assert proj.show("main:shared.txt") == RESOLVED
    assert proj.tk_status("pt-2", "main") == "closed"
    kept = [e["ref"] for e in proj.events("pt-2", "WorkSetAside")]
    assert kept == proj.tf_refs() == [interrupted]
    assert status(proj.root) == "" and proj.ticket_branches() == []
