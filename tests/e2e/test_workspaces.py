"""End-to-end: tickets in git worktrees (docs/workspaces.md), with real `tf-fsm ralph`/`run`
processes, real agent processes (tests/fake_agent.py, which edits files and never runs git)
and real git repositories, judged from the outside by git (tests/e2e/workspace_project.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.workspace_project import (
    Project,
    changes,
    overlapping,
    patch_id,
    worktree_of,
)
from tests.gitrepo import git, status

# -- 1. independent tickets side by side ---------------------------------------------------

TICKETS = [f"pt-{n}" for n in range(1, 7)]


def test_six_independent_untagged_tickets_run_side_by_side_and_merge_once_each(
    proj: Project,
) -> None:
    proj.create(TICKETS, files={"README.md": "a project\n"})
    initial = git(proj.root, "rev-parse", "main")
    proj.plan(
        edits=[
            {
                "phase": "implement",
                "file": "src/{ticket}.py",
                "text": "X = '{ticket}'",
                "mode": "write",
            }
        ],
        pause=[{"phase": "implement", "seconds": 0.4}],
    )

    done = proj.cli("ralph", "--workers", "3")
    assert done.returncode == 0, done.stderr
    assert "no ticket left to run after 6 runs: 6 closed" in done.stdout, done.stdout

    # main: the initial commit, then exactly one merge per ticket, each with two parents,
    # its ticket's trailers and the branch tip it merged as its second parent
    line = proj.first_parent()
    assert [c["sha"] for c in line][-1] == initial
    merges = line[:-1]
    assert sorted(c["ticket"] for c in merges) == TICKETS
    for c in merges:
        assert c["subject"] == f"Merge {c['ticket']}: Ticket {c['ticket']}", c
        assert len(c["parents"]) == 2 and c["parents"][1] == c["tip"], c
    for tid in TICKETS:
        assert proj.show(f"main:src/{tid}.py") == f"X = '{tid}'\n"
        assert proj.tk_status(tid, "main") == "closed"
        assert proj.tk_status(tid) == "closed"
        assert not worktree_of(proj, tid).exists()
    proj.assert_nothing_left(pool=3)
    # the first three tickets made their worktrees; each after them took one a ticket before
    # had set down into the pool (a pool of as many worktrees as workers)
    took = [
        tid
        for tid in TICKETS
        for event in proj.events(tid, "WorkspaceReady")
        if any(note.startswith("took a worktree from the pool") for note in event["notes"])
    ]
    assert len(took) == 3 and len(proj.pooled()) == 3, took

    # Every commit besides the initial one is tf_fsm's: a merge, or a checkpoint it
    # journaled (the same change: a checkpoint rebased onto a moved main has another sha).
    # The agent, which edited the files, committed nothing.
    journaled = sorted(
        (tid, e["phase"], patch_id(proj.root, e["sha"]))
        for tid in TICKETS
        for e in proj.events(tid, "CheckpointCommitted")
    )
    others = [c for c in proj.log_of("main") if c["sha"] != initial and len(c["parents"]) == 1]
    on_main = sorted((c["ticket"], c["phase"], patch_id(proj.root, c["sha"])) for c in others)
    assert on_main == journaled
    assert [(tid, phase) for tid, phase, _ in journaled] == [(t, "implement") for t in TICKETS]
    for c in others:
        assert c["subject"] == f"tf-fsm: {c['ticket']} attempt 1 implement", c

    # every agent worked in its ticket's worktree, and tickets really ran at the same time
    calls = proj.calls()
    assert {c["ticket"] for c in calls} == set(TICKETS)
    for c in calls:
        assert c["cwd"] == str(worktree_of(proj, c["ticket"])), c
    assert len(overlapping(proj.spans())) >= 2, proj.spans()


# -- 2. two tickets edit the same lines -----------------------------------------------------


def test_two_tickets_on_the_same_lines_one_merges_the_other_waits_for_a_person(
    proj: Project,
) -> None:
    # workspace.conflicts.mode human: no agent resolves it (tests/e2e/test_conflict_resolution.py)
    human = {"workspace": {"conflicts": {"mode": "human"}}}
    proj.create(["pt-1", "pt-2"], human, files={"shared.txt": "original\n"})
    initial = git(proj.root, "rev-parse", "main")
    proj.plan(
        edits=[
            {
                "phase": "implement",
                "file": "shared.txt",
                "text": "{ticket} was here",
                "mode": "write",
            }
        ],
        pause=[{"phase": "implement", "seconds": 0.3}],
    )

    done = proj.cli("ralph", "--workers", "2")
    assert done.returncode == 0, done.stderr
    rows = proj.status_json()
    (winner,) = [t for t, row in rows.items() if row["state"] == "closed"]
    (loser,) = [t for t, row in rows.items() if row["state"] == "error"]
    row = rows[loser]
    assert row["failureClass"] == "merge_conflict", row
    assert row["phase"] == "merge", row
    assert "conflicts in shared.txt" in row["lastFailure"], row
    assert row["retryCount"] == 0, row  # a conflict spends no retry
    (refused,) = proj.events(loser, "MergeRefused")
    assert refused["failureClass"] == "merge_conflict" and refused["files"] == ["shared.txt"]

    # main holds exactly the winner's merge and content; nothing of the loser
    line = proj.first_parent()
    assert [(c["ticket"], c["sha"]) for c in line] == [(winner, line[0]["sha"]), ("", initial)]
    assert proj.show("main:shared.txt") == f"{winner} was here\n"
    assert proj.log_of("main", "--fixed-strings", f"--grep=Tf-Ticket: {loser}") == []
    assert proj.tk_status(loser) != "closed"
    assert proj.tk_status(loser, "main") == "open"
    assert proj.tk_status(winner, "main") == "closed"

    # the loser's worktree and branch are as they were: its checkpoint, its content
    tree = worktree_of(proj, loser)
    assert proj.worktrees() == [(str(proj.root), "main"), (str(tree), f"tf/{loser}")]
    assert proj.ticket_branches() == [f"tf/{loser}"]
    (checkpoint,) = proj.log_of(f"main..tf/{loser}")
    assert checkpoint["ticket"] == loser and checkpoint["phase"] == "implement"
    assert checkpoint["parents"] == [initial]  # the conflicting rebase was aborted
    assert proj.show(f"tf/{loser}:shared.txt") == f"{loser} was here\n"
    assert status(tree) == ""
    # the root: only the loser's tk file, which tf_fsm marked as being worked on
    assert changes(proj.root) == [f" M .tickets/{loser}.md"]

    # ralph again skips it, saying why, and changes nothing
    again = proj.cli("ralph", "--workers", "2")
    assert again.returncode == 0, again.stderr
    assert f"Skipping {loser}: merge conflict: " in again.stderr, again.stderr
    assert git(proj.root, "rev-parse", "main") == line[0]["sha"]
    assert len(proj.calls(ticket=loser)) == 2  # implement and review, once

    # a person resolves it in the worktree; `tf-fsm run` merges it
    rebase = subprocess.run(["git", "rebase", "main"], cwd=tree, capture_output=True, text=True)
    assert rebase.returncode != 0 and "CONFLICT" in rebase.stdout + rebase.stderr
    resolved = f"{winner} was here\n{loser} was here too\n"
    (tree / "shared.txt").write_text(resolved, encoding="utf-8")
    git(tree, "add", "shared.txt")
    git(tree, "rebase", "--continue")
    merged = proj.cli("run", loser)
    assert merged.returncode == 0, merged.stderr
    assert [c["ticket"] for c in proj.first_parent()] == [loser, winner, ""]
    assert proj.show("main:shared.txt") == resolved
    assert proj.tk_status(loser, "main") == "closed" == proj.tk_status(loser)
    proj.assert_nothing_left()
    assert len(proj.calls(ticket=loser)) == 2  # the merge ran no agent


# -- 3. rollback ---------------------------------------------------------------------------


@pytest.mark.parametrize("rollback", ["reset", "keep"])
def test_rollback_decides_what_the_next_attempt_starts_from(proj: Project, rollback: str) -> None:
    settings = {"workspace": {"mode": "worktree", "rollback": rollback}}
    proj.create(["pt-1"], settings)
    initial = git(proj.root, "rev-parse", "main")
    proj.plan_rollback()
    run = proj.start("run", "pt-1")
    proj.wait_for("attempt-2", run)
    # attempt 2 runs: what its worktree holds is what it started from
    tree = worktree_of(proj, "pt-1")
    first = "implement attempt 1\nfix attempt 1\n"
    if rollback == "reset":
        assert not (tree / "a.txt").exists()
    else:
        assert (tree / "a.txt").read_text() == first
    proj.go()
    _out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err

    checkpoints = [
        (e["attempt"], e["phase"], e["sha"]) for e in proj.events("pt-1", "CheckpointCommitted")
    ]
    assert [(a, p) for a, p, _ in checkpoints] == [(1, "implement"), (1, "fix"), (2, "fix")]
    attempt_1_tip, attempt_2_fix = checkpoints[1][2], checkpoints[2][2]
    assert proj.show(f"{attempt_1_tip}:a.txt") == first
    if rollback == "reset":
        assert proj.show(f"{attempt_2_fix}:a.txt") == "fix attempt 2\n"
        assert git(proj.root, "rev-parse", f"{attempt_2_fix}^") == initial
        assert proj.tf_refs() == ["refs/tf/pt-1/attempt-1"]
        assert git(proj.root, "rev-parse", "refs/tf/pt-1/attempt-1") == attempt_1_tip
        (aside,) = proj.events("pt-1", "WorkSetAside")
        assert aside["ref"] == "refs/tf/pt-1/attempt-1" and aside["head"] == initial
        assert proj.show("main:a.txt") == "fix attempt 2\n"
    else:
        assert proj.show(f"{attempt_2_fix}:a.txt") == first + "fix attempt 2\n"
        assert git(proj.root, "rev-parse", f"{attempt_2_fix}^") == attempt_1_tip
        assert proj.tf_refs() == []
        assert proj.events("pt-1", "WorkSetAside") == []
        assert proj.show("main:a.txt") == first + "fix attempt 2\n"
    assert [c["ticket"] for c in proj.first_parent()] == ["pt-1", ""]
    assert status(proj.root) == ""
    assert proj.ticket_branches() == []


# -- 4. the base moves under a running ticket ------------------------------------------------

#: a gate that fails only when the person's file and the ticket's file are both there
BOTH_FILES = (
    "import os, sys; both = os.path.exists('person.txt') and os.path.exists('src/pt-1.py'); "
    "print('both files' if both else 'fine'); sys.exit(3 if both else 0)"
)


def _commit_meanwhile(proj: Project, gate: str) -> subprocess.Popen[str]:
    """pt-1 runs in its worktree; while its reviewer works, a person commits person.txt on
    main at the root. The run, finished."""
    settings = {
        "workspace": {"mode": "worktree"},
        "workflow": {"qualityGates": [{"name": "check", "command": [sys.executable, "-c", gate]}]},
    }
    proj.create(["pt-1"], settings)
    proj.plan(
        edits=[{"phase": "implement", "file": "src/{ticket}.py", "text": "X = 1"}],
        pause=proj.review_pause(),
    )
    change = "a person's change\n"
    return proj.run_while_a_person_commits("pt-1", "person.txt", change, "a person's commit")


def test_base_moved_while_the_ticket_ran_rebases_runs_the_gates_again_and_merges(
    proj: Project,
) -> None:
    run = _commit_meanwhile(proj, "print('ok')")
    assert run.returncode == 0
    person = git(proj.root, "rev-parse", "main^1")
    line = proj.first_parent()
    assert [(c["ticket"], c["subject"]) for c in line] == [
        ("pt-1", "Merge pt-1: Ticket pt-1"),
        ("", "a person's commit"),
        ("", "initial"),
    ]
    merge = line[0]
    assert merge["parents"][0] == person
    assert git(proj.root, "rev-parse", f"{merge['tip']}^") == person  # rebased onto it
    assert proj.show("main:person.txt") == "a person's change\n"
    assert proj.show("main:src/pt-1.py") == "X = 1\n"

    names = [e["event"] for e in proj.events("pt-1")]
    rebased = names.index("MergeRebased")
    gates = proj.events("pt-1", "GateEvaluated")
    again = [g for g in gates if (g["reason"] or "").startswith("after the rebase: ")]
    assert len(again) == 1 and again[0]["name"] == "check" and again[0]["passed"], gates
    assert names.index("MergeCompleted") > rebased
    assert [g["name"] for g in gates].count("check") == 2  # verify's, and the rebase's
    assert proj.tk_status("pt-1", "main") == "closed"
    proj.assert_nothing_left()


def test_gate_failing_only_after_the_rebase_stops_the_merge(proj: Project) -> None:
    run = _commit_meanwhile(proj, BOTH_FILES)
    assert run.returncode == 5
    row = proj.status_json()["pt-1"]
    assert row["failureClass"] == "merge_conflict", row
    assert "gate check fails" in row["lastFailure"], row
    gates = proj.events("pt-1", "GateEvaluated")
    after = [g for g in gates if (g["reason"] or "").startswith("after the rebase: ")]
    assert [(g["name"], g["passed"]) for g in after] == [("check", False)]
    (refused,) = proj.events("pt-1", "MergeRefused")
    assert refused["failureClass"] == "merge_conflict"

    # not merged, not closed; the branch and worktree stay
    assert [c["subject"] for c in proj.first_parent()] == ["a person's commit", "initial"]
    assert proj.tk_status("pt-1") != "closed"
    assert proj.tk_status("pt-1", "main") == "open"
    assert proj.ticket_branches() == ["tf/pt-1"]
    assert proj.show("tf/pt-1:src/pt-1.py") == "X = 1\n"
    assert [path for path, _ in proj.worktrees()] == [
        str(proj.root),
        str(worktree_of(proj, "pt-1")),
    ]


# -- 5. not a git repository ----------------------------------------------------------------


def test_outside_git_tickets_run_one_at_a_time_in_the_projects_tree(proj: Project) -> None:
    proj.create(["pt-1", "pt-2", "pt-3"], repository=False)
    proj.plan(
        edits=[{"phase": "implement", "file": "work.txt", "text": "{ticket}"}],
        pause=[{"phase": "implement", "seconds": 0.3}],
    )
    done = proj.cli("ralph", "--workers", "2")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("not a git repository") == 1, done.stderr
    for tid in ("pt-1", "pt-2", "pt-3"):
        assert proj.tk_status(tid) == "closed"
    assert sorted((proj.root / "work.txt").read_text().split()) == ["pt-1", "pt-2", "pt-3"]
    assert {c["cwd"] for c in proj.calls()} == {str(proj.root)}
    assert overlapping(proj.spans()) == []  # untagged tickets in one tree: one at a time
    assert not (proj.root / ".git").exists()
    assert not (proj.root / ".tf" / "ralph" / "worktrees").exists()

    proj.ticket("pt-4")
    refused = proj.cli("run", "pt-4", "--worktree")
    assert refused.returncode == 2, refused.stderr
    assert "--worktree asks for a worktree, but not a git repository" in refused.stderr
    assert proj.calls(ticket="pt-4") == []
    assert proj.tk_status("pt-4") == "open"


# -- 6. pi-ticketflow's keys ----------------------------------------------------------------

EDIT_OWN_FILE = [{"phase": "implement", "file": "{ticket}.txt", "text": "{ticket}"}]


def test_serial_use_worktree_makes_run_use_a_worktree(proj: Project) -> None:
    proj.create(["pt-1"], {"ralph": {"serialUseWorktree": True}})
    proj.plan(edits=EDIT_OWN_FILE)
    done = proj.cli("run", "pt-1")
    assert done.returncode == 0, done.stderr
    assert {c["cwd"] for c in proj.calls()} == {str(worktree_of(proj, "pt-1"))}
    assert [c["ticket"] for c in proj.first_parent()] == ["pt-1", ""]
    assert proj.show("main:pt-1.txt") == "pt-1\n"
    proj.assert_nothing_left()


def test_serial_use_worktree_false_makes_run_use_the_projects_tree(proj: Project) -> None:
    proj.create(["pt-1"], {"ralph": {"serialUseWorktree": False}})  # set: not the default
    proj.plan(edits=EDIT_OWN_FILE)
    done = proj.cli("run", "pt-1")
    assert done.returncode == 0, done.stderr
    assert {c["cwd"] for c in proj.calls()} == {str(proj.root)}
    assert [c["subject"] for c in proj.first_parent()] == ["initial"]
    assert changes(proj.root) == [" M .tickets/pt-1.md", "?? pt-1.txt"]


def test_parallel_worktrees_dir_moves_the_worktrees(proj: Project) -> None:
    proj.create(["pt-1", "pt-2"], {"ralph": {"parallelWorktreesDir": "build/trees"}})
    proj.plan(
        edits=EDIT_OWN_FILE,
        pause=[
            {
                "phase": "implement",
                "touch": str(proj.sync / "{ticket}"),
                "until": str(proj.sync / "go"),
            }
        ],
    )
    loop = proj.start("ralph", "--workers", "2")
    seen = {tid: proj.wait_for(tid, loop) for tid in ("pt-1", "pt-2")}
    assert seen == {t: f"{proj.root}/build/trees/{t}\n" for t in ("pt-1", "pt-2")}
    assert sorted(path for path, _ in proj.worktrees())[1:] == [
        f"{proj.root}/build/trees/pt-1",
        f"{proj.root}/build/trees/pt-2",
    ]
    assert [line for line in changes(proj.root) if "build" in line] == []
    proj.go()
    loop.communicate(timeout=60)
    assert loop.returncode == 0
    assert not (proj.root / ".tf" / "ralph" / "worktrees").exists()
    exclude = (proj.root / ".git" / "info" / "exclude").read_text()
    assert "/build/trees/" in exclude.splitlines()
    assert sorted(c["ticket"] for c in proj.first_parent()) == ["", "pt-1", "pt-2"]
    proj.assert_nothing_left()


def test_parallel_keep_worktrees_keeps_worktree_and_branch_after_the_merge(
    proj: Project,
) -> None:
    proj.create(["pt-1", "pt-2"], {"ralph": {"parallelKeepWorktrees": True}})
    proj.plan(edits=EDIT_OWN_FILE)
    done = proj.cli("ralph", "--workers", "2")
    assert done.returncode == 0, done.stderr
    assert sorted(c["ticket"] for c in proj.first_parent()) == ["", "pt-1", "pt-2"]
    assert proj.worktrees() == [
        (str(proj.root), "main"),
        (str(worktree_of(proj, "pt-1")), "tf/pt-1"),
        (str(worktree_of(proj, "pt-2")), "tf/pt-2"),
    ]
    for tid in ("pt-1", "pt-2"):
        tip = git(proj.root, "rev-parse", f"tf/{tid}")
        (merge,) = proj.log_of("main", "--fixed-strings", f"--grep=Tf-Ticket: {tid}", "--merges")
        assert merge["tip"] == tip
        assert status(worktree_of(proj, tid)) == ""
    assert status(proj.root) == ""


def test_shared_mode_with_two_workers_runs_in_the_projects_tree(proj: Project) -> None:
    proj.create(["pt-1", "pt-2"], {"workspace": {"mode": "shared"}})
    proj.plan(edits=EDIT_OWN_FILE, pause=[{"phase": "implement", "seconds": 0.3}])
    done = proj.cli("ralph", "--workers", "2")
    assert done.returncode == 0, done.stderr
    assert {c["cwd"] for c in proj.calls()} == {str(proj.root)}
    assert overlapping(proj.spans()) == []  # untagged, one tree: one at a time
    assert [c["subject"] for c in proj.first_parent()] == ["initial"]
    assert proj.ticket_branches() == [] and proj.worktrees() == [(str(proj.root), "main")]
    assert changes(proj.root) == [
        " M .tickets/pt-1.md",
        " M .tickets/pt-2.md",
        "?? pt-1.txt",
        "?? pt-2.txt",
    ]


# -- worktrees made by several processes at once --------------------------------------------

RACERS, ROUNDS = 6, 20


def _race(root: Path, racer: int, barrier: Any, failures: Any) -> None:
    """One tf-fsm process's part: each round, at the same moment as the others, make a new
    ticket's worktree and remove the one it made the round before."""
    from tf_fsm.settings.load import load_settings
    from tf_fsm.workspace import worktree

    settings = load_settings(root)
    previous = None
    for n in range(ROUNDS):
        barrier.wait(timeout=60)
        try:
            ws, _notes = worktree.ensure(root, settings, f"pt-{n}-{racer}", "main")
            if previous is not None:
                worktree.remove(previous, delete_branch=True)
            previous = ws
        except Exception as exc:  # reported to the test, which fails with it
            failures.put(f"round {n}, racer {racer}: {exc}")


def test_worktrees_made_and_removed_by_several_processes_at_once_all_succeed(
    proj: Project,
) -> None:
    """Workers of a loop make their tickets' worktrees at the same moment (and remove those of
    tickets done): git's own `worktree add` reads every other entry of its registry, and
    `worktree prune` drops an entry another `add` is still writing, so each must succeed
    whatever the others do at that instant."""
    import multiprocessing

    proj.create([])
    fork = multiprocessing.get_context("fork")
    barrier, failures = fork.Barrier(RACERS), fork.Queue()
    racers = [
        fork.Process(target=_race, args=(proj.root, n, barrier, failures)) for n in range(RACERS)
    ]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=120)
    seen = []
    while not failures.empty():
        seen.append(failures.get())
    assert seen == [], "\n".join(seen)
    assert [r.exitcode for r in racers] == [0] * RACERS
    last = {f"tf/pt-{ROUNDS - 1}-{n}" for n in range(RACERS)}
    assert set(proj.ticket_branches()) == last
    assert len(proj.worktrees()) == RACERS + 1
