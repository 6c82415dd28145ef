"""End-to-end: a ticket's worktree removed by hand while its run goes on (docs/workspaces.md,
"Recovery"): no agent ever runs in a directory that is not the worktree, a worktree gone
between two steps is made again from the ticket's branch, and a step it vanished under does
not count. Real `tf-fsm run` processes, the fake agent, a real git repository.
"""

from __future__ import annotations

import shutil
import time

from tests.e2e.workspace_project import Project, worktree_of

#: two reviewers in turn; the second appends to the file the worker wrote, so the merged file
#: shows whether it ran on the ticket's code
SETTINGS = {
    "workspace": {"mode": "worktree"},
    "workflow": {"enableReviewers": ["reviewer-general", "reviewer-spec-audit"]},
    "executor": {"restartBackoffSeconds": 6},
}
EDITS = [
    {"phase": "implement", "file": "a.txt", "text": "implemented"},
    {"phase": "review", "role": "reviewer-spec-audit", "file": "a.txt", "text": "reviewed"},
]


def _ready_notes(proj: Project) -> list[str]:
    return [n for e in proj.events("pt-1", "WorkspaceReady") for n in e["notes"]]


def _merged_as_reviewed(proj: Project) -> None:
    """Every reviewer ran in the worktree holding the worker's change, and the ticket merged."""
    assert proj.show("main:a.txt") == "implemented\nreviewed\n"
    assert proj.tk_status("pt-1", "main") == "closed"
    proj.assert_nothing_left()


def test_a_worktree_removed_while_a_reviewer_runs_stops_the_run_and_the_next_run_rebuilds_it(
    proj: Project,
) -> None:
    proj.create(["pt-1"], SETTINGS)
    proj.plan(
        edits=EDITS,
        pause=[
            {
                "phase": "review",
                "role": "reviewer-general",
                "touch": str(proj.sync / "in"),
                "until": str(proj.sync / "go"),
            }
        ],
    )
    proc = proj.start("run", "pt-1")
    proj.wait_for("in", proc)
    tree = worktree_of(proj, "pt-1")
    tip = proj.show("tf/pt-1").split()[1][:12]  # the implement checkpoint
    shutil.rmtree(tree)
    proj.go()
    out, err = proc.communicate(timeout=60)

    # the reviewer saw no code: its review does not count, the run stops and says what to do
    assert proc.returncode == 2, out + err
    assert (
        f"the worktree {tree} is gone: it was removed while reviewer-general ran in review" in err
    )
    assert f"makes the worktree again from the branch tf/pt-1 at {tip}" in err
    assert not tree.exists()  # nothing made a directory where the worktree stood
    assert [c["role"] for c in proj.calls(phase="review")] == ["reviewer-general"]

    done = proj.cli("run", "pt-1")
    assert done.returncode == 0, done.stdout + done.stderr
    note = f"made the worktree {tree} from the branch tf/pt-1 at {tip}, its last commit"
    assert note in done.stderr
    assert note in _ready_notes(proj)
    _merged_as_reviewed(proj)  # the review ran again


def test_a_worktree_removed_between_two_invocations_is_made_again_before_the_next(
    proj: Project,
) -> None:
    """Removed while a crashed reviewer waits to be restarted: the restart runs in the
    worktree made again from the branch, in the same run."""
    proj.create(["pt-1"], SETTINGS)
    proj.plan(
        edits=EDITS,
        crash=[{"phase": "review", "role": "reviewer-general", "exitCode": 3, "times": 1}],
    )
    proc = proj.start("run", "pt-1")
    deadline = time.monotonic() + 30
    journal = proj.root / ".tf" / "knowledge" / "tickets" / "pt-1" / "events.jsonl"
    while '"InvocationRestarted"' not in (journal.read_text() if journal.exists() else ""):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.02)
    tree = worktree_of(proj, "pt-1")
    tip = proj.show("tf/pt-1").split()[1][:12]
    shutil.rmtree(tree)
    out, err = proc.communicate(timeout=60)

    assert proc.returncode == 0, out + err
    lead = (
        f"the worktree {tree} was gone before review (reviewer-general) of attempt 1: made "
        f"again from the branch tf/pt-1 at {tip}, its last checkpoint"
    )
    assert lead in err
    assert lead in _ready_notes(proj)[-2]  # journaled with what ensure did
    reviews = proj.calls(phase="review")
    assert [c["role"] for c in reviews] == ["reviewer-general"] * 2 + ["reviewer-spec-audit"]
    _merged_as_reviewed(proj)


def test_a_directory_holding_only_copies_of_the_tickets_files_does_not_block_later_runs(
    proj: Project,
) -> None:
    """What an older tf_fsm left where a worktree was removed by hand: a plain directory with
    the ticket's files copied into it. It is removed (the store keeps those files) and the
    worktree made again; a directory holding anything else is still refused."""
    proj.create(["pt-1"], {**SETTINGS, "executor": {"maxRestarts": 0}})
    proj.plan(
        edits=EDITS,
        crash=[{"phase": "review", "role": "reviewer-general", "exitCode": 3, "times": 1}],
    )
    assert proj.cli("run", "pt-1").returncode == 5  # the attempt is in error at review
    tree = worktree_of(proj, "pt-1")
    shutil.rmtree(tree)
    copies = tree / ".tf" / "knowledge" / "tickets" / "pt-1"
    copies.mkdir(parents=True)
    (copies / "review-general.md").write_text("# Review: pt-1\n")
    (copies / "implementation.md").write_text("# Implementation: pt-1\n")

    (tree / "mine.txt").write_text("mine\n")  # a file of somebody's beside them: refused
    refused = proj.cli("run", "pt-1")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"{tree} is registered as a worktree but has no valid .git file" in refused.stderr
    assert (tree / "mine.txt").read_text() == "mine\n"

    (tree / "mine.txt").unlink()
    done = proj.cli("run", "pt-1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        f"removed {tree}: it was not a worktree, only tf-fsm's copies of the ticket's files "
        f"(.tf/knowledge/tickets/pt-1), which the ticket's store keeps"
    ) in done.stderr
    _merged_as_reviewed(proj)
