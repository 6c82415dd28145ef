"""After a crash the journal decides: views a power cut emptied, tore or took are rebuilt from
it, and a phase whose files no longer match what its completion journaled runs again.

A power cut is reproduced here by hand, deterministically: the files are damaged the way an
unsynced write can be left (empty, cut short, gone, an older version), and the journal's
closing ViewsSynced is taken away (it is the last line a crashed run never wrote).
tests/crash/ draws such states at random over a whole lifecycle.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_orchestrator import MAJOR_HARD, events, run, setup, state, store
from tf_fsm.core.journal import (
    AttemptResumed,
    PhaseCompleted,
    TicketBlocked,
    ViewSaved,
    ViewsChecked,
    ViewsSynced,
)


def cut_before_durable_point(project: Path) -> None:
    """The journal as a run that died before its durable point left it."""
    journal = store(project).journal_path
    lines = journal.read_bytes().splitlines(keepends=True)
    assert b'"ViewsSynced"' in lines[-1]
    journal.write_bytes(b"".join(lines[:-1]))


def failed_at_close(project: Path) -> None:
    """Attempt 1 ran every phase but close, whose agent crashed: an open attempt."""
    setup(project, {"failures": [{"phase": "close", "message": "closer crashed"}]}, CLOSER)
    assert run(project).status == "error"
    setup(project, {}, CLOSER)  # the agent works again


CLOSER = {"enableCloser": True}


def test_an_emptied_retry_state_is_rebuilt_and_the_run_goes_on(project: Path) -> None:
    failed_at_close(project)
    s = store(project)
    before = s.retry_state_path.read_bytes()
    cut_before_durable_point(project)
    s.retry_state_path.write_bytes(b"")  # renamed into place, its data never written
    (s.dir / "chain-context.json").write_bytes(before[:30])  # torn
    outcome = run(project)
    assert outcome.status == "closed" and outcome.attempt == 1
    checked = [e for e in s.read_events().events if isinstance(e, ViewsChecked)]
    assert [sorted(c.repaired) for c in checked] == [["chain-context.json", "retry-state.json"]]
    assert [(a.attemptNumber, a.status) for a in state(project).attempts] == [(1, "closed")]


def test_a_stale_retry_state_follows_the_journal(project: Path) -> None:
    """The view still says attempt 1 blocked (its newer version was lost); the journal had
    committed attempt 2's start: attempt 2 is resumed, not started a second time."""
    setup(project, {"findings": [MAJOR_HARD], "failures": [{"phase": "fix", "attempt": 2}]})
    assert run(project).status == "error"
    s = store(project)
    journal = s.read_events().events
    blocked = next(
        e.content
        for e in journal
        if e.event == "ViewSaved"
        and e.file == "retry-state.json"  # type: ignore[attr-defined]
        and e.content["attempts"][-1]["status"] == "blocked"  # type: ignore[attr-defined]
    )
    cut_before_durable_point(project)
    from tf_fsm.fs.atomic import json_text

    s.retry_state_path.write_text(json_text(blocked))
    setup(project, {"findings": [MAJOR_HARD]})
    assert run(project).status == "closed"
    assert [(a.attemptNumber, a.status) for a in state(project).attempts] == [
        (1, "blocked"),
        (2, "closed"),
    ]
    assert events(project, 2).count("AttemptStarted") == 1


def test_a_phase_whose_log_copy_was_lost_runs_again(project: Path) -> None:
    failed_at_close(project)
    s = store(project)
    review = next(
        e for e in s.read_events().events if isinstance(e, PhaseCompleted) and e.phase == "review"
    )
    lost = next(name for name in review.files or {} if name.startswith("logs/"))
    cut_before_durable_point(project)
    (s.dir / lost).unlink()
    assert run(project).status == "closed"
    resumed = [e for e in s.read_events().events if isinstance(e, AttemptResumed)]
    assert resumed[-1].phase == "review" and lost in (resumed[-1].reason or "")
    assert (s.dir / lost).is_file()  # written again by the phase that ran again


def test_after_a_clean_end_nothing_is_checked(project: Path) -> None:
    failed_at_close(project)
    s = store(project)
    assert isinstance(s.read_events().events[-1], ViewsSynced)
    assert run(project).status == "closed"
    assert not any(isinstance(e, ViewsChecked) for e in s.read_events().events)


def test_the_next_attempt_is_told_what_the_journal_kept_not_what_the_files_say_now(
    project: Path,
) -> None:
    """The blocked attempt's summary is journaled with its end: a review.md replaced since
    (by an attempt a crash cut short, here by hand) does not change what attempt 2 is told."""
    setup(project, {"findings": [MAJOR_HARD]})
    assert run(project, once=True).status == "blocked"
    s = store(project)
    [blocked] = [e for e in s.read_events().events if isinstance(e, TicketBlocked)]
    assert blocked.priorFailure is not None and "`a.py:1` - hard" in blocked.priorFailure["fenced"]
    (s.dir / "review.md").write_text("# Review\n\nNo issues found.\n")
    (s.dir / "post-fix-verification.json").write_text("{}")
    assert run(project).status == "closed"
    chain = [
        e.content
        for e in s.read_events().events
        if isinstance(e, ViewSaved) and e.file == "chain-context.json" and e.content["attempt"] == 2
    ]
    assert chain and chain[-1]["priorFailure"]["fenced"] == blocked.priorFailure["fenced"]
