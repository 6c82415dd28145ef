"""End-to-end: what the merge queue commits and leaves (docs/workspaces.md, "The merge
queue"), with real `tf-fsm` processes, real agent processes (tests/fake_agent.py) and real git
repositories, judged from the outside by git (tests/e2e/workspace_project.py).
"""

from __future__ import annotations

import subprocess
import sys
import time

from tests.e2e.workspace_project import Project, changes, worktree_of
from tests.gitrepo import git

# -- a close is always committed with the merge ----------------------------------------------


def test_a_ticket_with_no_commit_of_its_own_gets_its_close_committed_after_the_base_moved(
    proj: Project,
) -> None:
    """Its agents change nothing, and a person commits on main while it runs: its branch's
    tip (main's old tip) is in main's history, yet nothing has merged it. The merge commits
    its tk close on main; the root is left clean."""
    proj.create(["pt-1"], {"workspace": {"mode": "worktree"}})
    proj.plan(
        pause=[
            {"phase": "review", "touch": str(proj.sync / "review"), "until": str(proj.sync / "go")}
        ],
    )
    run = proj.start("run", "pt-1")
    proj.wait_for("review", run)
    person = proj.person_commits()
    proj.go()
    _out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err

    assert proj.tk_status("pt-1", "main") == "closed"
    assert proj.tk_status("pt-1") == "closed"
    line = proj.first_parent()
    assert [(c["ticket"], c["subject"]) for c in line] == [
        ("pt-1", "Merge pt-1: Ticket pt-1"),
        ("", "a person's commit"),
        ("", "initial"),
    ]
    assert line[0]["parents"] == [person]  # nothing to merge but the close
    assert proj.show("main:person.txt") == "a person's change\n"
    (completed,) = proj.events("pt-1", "MergeCompleted")
    assert completed["commit"] == line[0]["sha"] and completed["already"] is False
    assert changes(proj.root) == []
    proj.assert_nothing_left()


def test_parallel_tickets_with_no_commits_of_their_own_each_commit_their_close(
    proj: Project,
) -> None:
    """Three tickets whose agents change nothing, side by side: each branch starts at the
    same commit, which every later merge finds in main's history (and, once one of them
    merged, named in that one's trailer). Each still gets its own commit closing it."""
    tickets = ["pt-1", "pt-2", "pt-3"]
    proj.create(tickets)
    proj.plan(pause=[{"phase": "implement", "seconds": 0.3}])
    done = proj.cli("ralph", "--workers", "3")
    assert done.returncode == 0, done.stderr
    assert "3 closed" in done.stdout, done.stdout

    line = proj.first_parent()
    assert sorted(c["ticket"] for c in line[:-1]) == tickets
    for tid in tickets:
        assert proj.tk_status(tid, "main") == "closed", tid
        assert proj.tk_status(tid) == "closed", tid
    assert changes(proj.root) == []
    proj.assert_nothing_left()


# -- ralph.parallelAutoMerge false: merged on request ------------------------------------------

NO_AUTO_MERGE = {"workspace": {"mode": "worktree"}, "ralph": {"parallelAutoMerge": False}}


def _depends(proj: Project, tid: str, on: str) -> None:
    path = proj.root / ".tickets" / f"{tid}.md"
    path.write_text(path.read_text().replace("deps: []", f"deps: [{on}]"), encoding="utf-8")


def _ready(proj: Project) -> list[str]:
    done = proj.cli("tickets", "ready")
    assert done.returncode == 0, done.stderr
    return [line.split()[0] for line in done.stdout.splitlines() if line.strip()]


def test_without_auto_merge_a_passed_ticket_stays_open_until_tf_fsm_merge_merges_it(
    proj: Project,
) -> None:
    proj.create([], NO_AUTO_MERGE)
    proj.ticket("pt-1")
    proj.ticket("pt-2")
    _depends(proj, "pt-2", "pt-1")
    git(proj.root, "add", ".tickets")
    git(proj.root, "commit", "-q", "-m", "the tickets")
    initial = git(proj.root, "rev-parse", "main")
    proj.plan(edits=[{"phase": "implement", "file": "{ticket}.txt", "text": "{ticket}"}])

    done = proj.cli("run", "pt-1")
    assert done.returncode == 0, done.stderr
    assert "pt-1: PASSED, not merged after attempt 1" in done.stdout, done.stdout
    assert "waiting for `tf-fsm merge pt-1`" in done.stdout
    # nothing merged, nothing closed; the branch and worktree kept, the dependent not ready
    assert git(proj.root, "rev-parse", "main") == initial
    assert proj.tk_status("pt-1") == "in_progress"
    assert proj.tk_status("pt-1", "main") == "open"
    assert proj.ticket_branches() == ["tf/pt-1"]
    assert proj.worktrees() == [
        (str(proj.root), "main"),
        (str(worktree_of(proj, "pt-1")), "tf/pt-1"),
    ]
    assert proj.show("tf/pt-1:pt-1.txt") == "pt-1\n"
    assert [e["event"] for e in proj.events("pt-1") if e["event"].startswith("Merge")] == [
        "MergeHeld"
    ]
    assert _ready(proj) == ["pt-1"]
    row = proj.status_json()["pt-1"]
    assert row["state"] == "awaiting_merge" and row["skip"] is True, row
    assert row["next"].startswith("nothing: passed, waiting for `tf-fsm merge pt-1`"), row
    plan = proj.cli("run", "pt-1", "--plan", "--json")
    assert plan.returncode == 0 and '"action": "awaiting_merge"' in plan.stdout, plan.stdout
    calls = len(proj.calls())

    # run again: no attempt; the loop skips it and runs nothing
    again = proj.cli("run", "pt-1", "--json")
    assert again.returncode == 0, again.stderr
    assert '"status": "awaiting_merge"' in again.stdout, again.stdout
    loop = proj.cli("ralph")
    assert loop.returncode == 0, loop.stderr
    assert "Skipping pt-1: passed, waiting for `tf-fsm merge pt-1`" in loop.stderr, loop.stderr
    assert len(proj.calls()) == calls
    assert git(proj.root, "rev-parse", "main") == initial

    # tf-fsm merge: the merge queue, then closed; the dependent is ready
    merged = proj.cli("merge", "pt-1", "--json")
    assert merged.returncode == 0, merged.stderr
    assert '"status": "closed"' in merged.stdout, merged.stdout
    assert len(proj.calls()) == calls  # no agent ran
    line = proj.first_parent()
    assert [(c["ticket"], c["subject"]) for c in line] == [
        ("pt-1", "Merge pt-1: Ticket pt-1"),
        ("", "the tickets"),
        ("", "initial"),
    ]
    assert proj.show("main:pt-1.txt") == "pt-1\n"
    assert proj.tk_status("pt-1", "main") == "closed" == proj.tk_status("pt-1")
    assert proj.status_json()["pt-1"]["state"] == "closed"
    gates = [e for e in proj.events("pt-1") if e["event"].startswith("Merge")]
    assert [e["event"] for e in gates] == ["MergeHeld", "MergeStarted", "MergeCompleted"]
    proj.assert_nothing_left()
    assert _ready(proj) == ["pt-2"]

    nothing = proj.cli("merge", "pt-1")
    assert nothing.returncode == 2, nothing.stderr
    assert "pt-1: nothing to merge" in nothing.stderr, nothing.stderr


def test_tf_fsm_merge_refuses_a_ticket_not_waiting_for_its_merge(proj: Project) -> None:
    proj.create(["pt-1"], NO_AUTO_MERGE)
    never = proj.cli("merge", "pt-1")
    assert never.returncode == 2, never.stderr
    assert "pt-1: nothing to merge" in never.stderr and "first attempt" in never.stderr
    bad = proj.cli("merge", "../pt-1")
    assert bad.returncode == 2, bad.stderr
    missing = proj.cli("merge", "pt-9")
    assert missing.returncode == 2, missing.stderr
    assert proj.calls() == []
    assert not (proj.root / ".tf" / "knowledge" / "tickets" / "pt-1" / "events.jsonl").exists()
    assert proj.ticket_branches() == []


def test_tf_fsm_merge_of_a_conflict_fails_as_a_run_does_and_merges_once_resolved(
    proj: Project,
) -> None:
    proj.create(["pt-1", "pt-2"], NO_AUTO_MERGE, files={"shared.txt": "original\n"})
    proj.plan(
        edits=[
            {
                "phase": "implement",
                "file": "shared.txt",
                "text": "{ticket} was here",
                "mode": "write",
            }
        ],
    )
    for tid in ("pt-1", "pt-2"):
        done = proj.cli("run", tid)
        assert done.returncode == 0, done.stderr
    assert proj.cli("merge", "pt-1").returncode == 0

    refused = proj.cli("merge", "pt-2")
    assert refused.returncode == 5, refused.stderr
    assert "conflicts in shared.txt" in refused.stderr, refused.stderr
    # the same queue: an agent tried to resolve it (the fake agent leaves the markers)
    assert "Resolution 1 by an agent failed: conflict markers" in refused.stderr
    row = proj.status_json()["pt-2"]
    assert (row["state"], row["failureClass"]) == ("error", "merge_conflict"), row
    assert proj.tk_status("pt-2") != "closed" and proj.tk_status("pt-2", "main") == "open"
    assert [c["ticket"] for c in proj.first_parent()] == ["pt-1", ""]

    tree = worktree_of(proj, "pt-2")
    rebase = subprocess.run(["git", "rebase", "main"], cwd=tree, capture_output=True, text=True)
    assert rebase.returncode != 0 and "CONFLICT" in rebase.stdout + rebase.stderr
    (tree / "shared.txt").write_text("pt-1 was here\npt-2 was here too\n", encoding="utf-8")
    git(tree, "add", "shared.txt")
    git(tree, "rebase", "--continue")
    merged = proj.cli("merge", "pt-2")
    assert merged.returncode == 0, merged.stderr
    assert [c["ticket"] for c in proj.first_parent()] == ["pt-2", "pt-1", ""]
    assert proj.show("main:shared.txt") == "pt-1 was here\npt-2 was here too\n"
    assert proj.tk_status("pt-2", "main") == "closed" == proj.tk_status("pt-2")
    assert proj.tf_refs() == ["refs/tf/pt-2/resolution-1"]  # what the resolver made, kept
    git(proj.root, "update-ref", "-d", "refs/tf/pt-2/resolution-1")
    proj.assert_nothing_left()
    # implement and review of each ticket, once, and the one resolution that failed
    assert [c["phase"] for c in proj.calls(ticket="pt-2")] == ["implement", "review", "resolve"]
    assert len(proj.calls()) == 5


#: a gate that waits for a file (so a merge can be caught holding the ticket's lock)
WAIT_FOR = "import os, sys, time\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.02)\n"


def test_tf_fsm_merge_of_a_ticket_another_process_runs_is_exit_75(proj: Project) -> None:
    go = proj.sync / "go"
    gate = {"name": "slow", "command": [sys.executable, "-c", WAIT_FOR, str(go)]}
    proj.create(["pt-1"], {**NO_AUTO_MERGE, "workflow": {"qualityGates": [gate]}})
    go.write_text("go\n")
    assert proj.cli("run", "pt-1").returncode == 0
    go.unlink()
    first = proj.start("merge", "pt-1")
    deadline = time.monotonic() + 30
    while not any(e["event"] == "MergeStarted" for e in proj.events("pt-1")):
        assert first.poll() is None and time.monotonic() < deadline, first.communicate()
        time.sleep(0.02)
    second = proj.cli("merge", "pt-1")
    assert second.returncode == 75, second.stderr
    proj.go()
    _out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert [c["ticket"] for c in proj.first_parent()] == ["pt-1", ""]
    proj.assert_nothing_left()
