"""The order of fsyncs in a real run: what the journal says is done is on disk before it is.

os.fsync and os.replace are wrapped to *record* the calls (the real calls still run, on real
files): a lifecycle through the orchestrator is then checked against the store's rule. Every
rename into a directory is followed by an fsync of that directory before the next journal
fsync, except the copies kept for people (prompts/, logs/, gates/), which are atomic but whose
directory entries may be lost in a crash (a resume writes them again).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.test_orchestrator import MAJOR_HARD, run, setup, state, store

PEOPLE_COPIES = ("prompts", "logs", "gates")


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """("fsync", path) and ("rename", destination), in the order the process made them."""
    seen: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        seen.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        real_fsync(fd)

    def replace(src: Any, dst: Any, **kw: Any) -> None:
        real_replace(src, dst, **kw)
        seen.append(("rename", os.path.realpath(dst)))

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return seen


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc to name an fd")
def test_a_journal_fsync_never_precedes_the_directory_fsync_of_a_rename(
    project: Path, calls: list[tuple[str, str]]
) -> None:
    setup(project, {"findings": [MAJOR_HARD]})
    outcome = run(project)
    assert (outcome.status, outcome.attempts_run) == ("closed", 2)
    ticket_dir = os.path.realpath(store(project).dir)
    journal = os.path.join(ticket_dir, "events.jsonl")
    unsynced: set[str] = set()
    checked = 0
    for kind, path in calls:
        if kind == "rename":
            rel = os.path.relpath(path, ticket_dir)
            if not rel.startswith("..") and rel.split(os.sep)[0] not in PEOPLE_COPIES:
                unsynced.add(os.path.dirname(path))
        elif os.path.isdir(path):
            unsynced.discard(path)
        elif path == journal:
            assert not unsynced, f"journal fsynced before the renames in {sorted(unsynced)}"
            checked += 1
    assert checked >= 8  # one per phase that completed, at least
    assert not unsynced  # and the run ended with everything durable
    # The run's final state is the one on disk.
    assert state(project).current is not None
    assert state(project).current.status == "closed"  # type: ignore[union-attr]


def test_a_phase_costs_about_one_journal_fsync(project: Path, calls: list[tuple[str, str]]) -> None:
    """Regression guard on the count, not on time: a 2-attempt lifecycle journals ~40 events
    and fsyncs the journal once per phase plus the attempt boundaries."""
    setup(project, {"findings": [MAJOR_HARD]})
    run(project)
    journal = os.path.realpath(store(project).journal_path)
    fsyncs = sum(1 for kind, path in calls if kind == "fsync" and path == journal)
    events = len(store(project).read_events().events)
    phases = sum(1 for e in store(project).read_events().events if e.event == "PhaseCompleted")
    assert events > 2 * fsyncs  # events are grouped ...
    assert fsyncs <= phases + 6  # ... to about one fsync per phase


def test_an_unflushed_event_is_visible_at_once_and_durable_by_the_end_of_the_batch(
    project: Path, calls: list[tuple[str, str]]
) -> None:
    from datetime import UTC, datetime

    from tf_fsm.core.journal import PhaseStarted, timestamp

    s = store(project)
    event = PhaseStarted(
        ts=timestamp(datetime.now(UTC)), ticket="pt-1", attempt=1, phase="review", roles=[]
    )
    with s.lock(), s.batch():
        s.append_event(event, durable=False)
        assert [e.event for e in s.read_events().events] == ["PhaseStarted"]  # status sees it
        journal = os.path.realpath(s.journal_path)
        assert ("fsync", journal) not in calls
    assert ("fsync", journal) in calls  # the batch's end made it durable
