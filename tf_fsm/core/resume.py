"""Where an interrupted attempt picks up: the first phase that is not complete.

A phase is complete when the journal has its `PhaseCompleted` (or `PhaseSkipped`) for this
attempt, its artifact is still on disk, unchanged (same sha256) and not older than the
artifact of a phase before it, and so is every other file its completion recorded (`files`:
none of them was fsynced, so a power cut may have taken any). Without a journal (artifacts
from pi-ticketflow, a hand-made directory) the artifacts' timestamps decide: they must be in
phase order. Pure: the files are seen through a `look` callback.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tf_fsm.core import journal as ev
from tf_fsm.core.artifacts import PHASE_ARTIFACT
from tf_fsm.core.machine import MERGE_PHASE, PHASES
from tf_fsm.core.workspace_events import (
    MergeCompleted,
    MergeHeld,
    MergeRebased,
    MergeRefused,
    MergeStarted,
)

#: the journal's steps of an attempt's merge: any of them for an attempt means its merge
#: began (or, MergeHeld, waits for `tf-fsm merge`)
MERGE_STEPS = (MergeHeld, MergeStarted, MergeRebased, MergeCompleted, MergeRefused)


@dataclass(frozen=True)
class Seen:
    """An artifact as it is on disk."""

    sha256: str
    mtime_ns: int


Look = Callable[[str], Seen | None]


@dataclass(frozen=True)
class ResumePoint:
    phase: str
    reason: str
    finished: bool = False  # every phase completed: only the attempt's ending is missing
    #: where it picks up in words, when not at `phase`: a finished attempt runs no phase
    #: again, it resumes at its merge (`merge`) or only records its ending (`its ending`)
    ending: str | None = None

    @property
    def where(self) -> str:
        """Where the attempt picks up, as `run`, `run --plan`, `status` and the board say it."""
        return self.ending or self.phase


def resume_point(
    attempt: int, events: Sequence[ev.Event], look: Look, gate_decided: bool = True
) -> ResumePoint:
    """`gate_decided`: post-fix-verification.json holds this attempt's verdict. Close cannot run
    without it, so a resume that would start at close goes back to verify instead."""
    point = _first_incomplete(attempt, events, look)
    if point.phase == "close" and not gate_decided:
        return ResumePoint("verify", f"{point.reason}; the gate decision is missing")
    return point


def _first_incomplete(attempt: int, events: Sequence[ev.Event], look: Look) -> ResumePoint:
    mine = attempt_events(events, attempt)
    if not any(isinstance(e, ev.AttemptStarted) for e in mine):
        if events:  # tf_fsm's own journal, but this attempt died before its first event
            return ResumePoint(PHASES[0], f"attempt {attempt} stopped before its first phase")
        return _by_timestamps(look)
    done: dict[str, ev.PhaseCompleted | None] = {}  # None: skipped
    for event in mine:
        if isinstance(event, ev.AttemptResumed) and event.phase != PHASES[-1]:
            # what follows the phase it resumed at runs again; a resume at close ran close
            # again only if close was not complete (then it is not in `done` anyway): once
            # every phase completed it resumed at its ending (its merge), running none
            done = {p: s for p, s in done.items() if PHASES.index(p) < PHASES.index(event.phase)}
        elif isinstance(event, ev.PhaseCompleted | ev.PhaseSkipped):
            done[event.phase] = event if isinstance(event, ev.PhaseCompleted) else None
    newest = -1
    for phase in PHASES:
        if phase not in done:
            return ResumePoint(phase, f"{phase} has not completed in attempt {attempt}")
        completed = done[phase]
        if completed is None:
            continue
        name = PHASE_ARTIFACT[phase]
        seen = look(name)
        problem = _changed(name, completed.sha256, seen, phase)
        if problem is None and seen is not None and seen.mtime_ns < newest:
            problem = f"{name} is older than an earlier phase's artifact"
        for other, sha in (completed.files or {}).items():
            problem = problem or _changed(other, sha, look(other), phase)
        if problem is not None:
            return ResumePoint(phase, problem)
        newest = seen.mtime_ns if seen is not None else newest
    return _finished(mine)


def _finished(mine: Sequence[ev.Event]) -> ResumePoint:
    """Every phase of the attempt completed: no phase runs again. Its merge began (a refused
    merge, a run killed in the merge queue): it resumes at the merge; else only its ending is
    recorded (in a workspace, a passed attempt then merges)."""
    if any(isinstance(e, MERGE_STEPS) for e in mine):
        return ResumePoint(
            PHASES[-1],
            "every phase completed; only the merge is left, no phase runs again",
            True,
            MERGE_PHASE,
        )
    why = "every phase completed; only the attempt's ending is left, no phase runs again"
    return ResumePoint(PHASES[-1], why, True, "its ending")


def _changed(name: str, sha256: str, seen: Seen | None, phase: str) -> str | None:
    if seen is None:
        return f"{name} is missing"
    if seen.sha256 != sha256:
        return f"{name} changed after {phase} completed"
    return None


def _by_timestamps(look: Look) -> ResumePoint:
    newest = -1
    for phase in PHASES:
        seen = look(PHASE_ARTIFACT[phase])
        if seen is None:
            return ResumePoint(phase, f"no journal: {PHASE_ARTIFACT[phase]} is missing")
        if seen.mtime_ns < newest:
            return ResumePoint(
                phase, f"no journal: {PHASE_ARTIFACT[phase]} is older than the phase before"
            )
        newest = seen.mtime_ns
    return ResumePoint(PHASES[-1], "no journal: every artifact is present; close runs again")


def gate_decided(store: Any) -> bool:
    """Does post-fix-verification.json hold a verdict? (`store`: a tf_fsm.storage.protocol.Store;
    typed Any because the core imports nothing of storage.)"""
    return "verification_passed" in (store.read_artifact("post-fix-verification.json") or "")


def live_phase(
    attempt: int, status: str, saved: str | None, events: Sequence[ev.Event]
) -> str | None:
    """The phase an attempt is in. retry-state.json records it when the attempt stops (error,
    waiting, its end, Ctrl-C); a running attempt, or one killed outright, is where its last
    journaled phase start says (each start is written as the phase begins)."""
    if status != "in_progress":
        return saved
    started = [
        MERGE_PHASE if isinstance(e, MergeStarted | MergeHeld) else e.phase
        for e in events
        if e.attempt == attempt
        and isinstance(e, ev.PhaseStarted | ev.PhaseWaiting | MergeStarted | MergeHeld)
    ]
    return started[-1] if started else saved


def attempt_events(events: Sequence[ev.Event], number: int) -> list[ev.Event]:
    """The events of the latest attempt numbered `number` (numbers restart after a close and
    after a reset): from its last AttemptStarted on."""
    starts = [
        i for i, e in enumerate(events) if isinstance(e, ev.AttemptStarted) and e.attempt == number
    ]
    tail = events[starts[-1] :] if starts else events
    return [e for e in tail if e.attempt == number]


def merge_held(events: Sequence[ev.Event], number: int) -> bool:
    """Does attempt `number` wait for `tf-fsm merge`: its last merge step a MergeHeld?"""
    steps = [e for e in attempt_events(events, number) if isinstance(e, MERGE_STEPS)]
    return bool(steps) and isinstance(steps[-1], MergeHeld)


def merge_began(events: Sequence[ev.Event], number: int) -> bool:
    """Did attempt `number`'s merge begin (started, refused, or found done)?"""
    steps = (MergeStarted, MergeRebased, MergeCompleted, MergeRefused)
    return any(isinstance(e, steps) for e in attempt_events(events, number))
