"""A ticket's path through the lifecycle, replayed from its journal (`events.jsonl`).

`replay` is pure: journal events in, the table edges they took out. The diagrams draw it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from tf_fsm.core import journal as ev
from tf_fsm.core import machine as fsm
from tf_fsm.core import workspace_events as wev
from tf_fsm.core.artifacts import RESOLUTION_REVIEW_PHASE, RESOLVE_PHASE
from tf_fsm.core.reports import PREEXISTING
from tf_fsm.core.ticket_workspace import rebased_shas
from tf_fsm.errors import TicketError

if TYPE_CHECKING:
    from tf_fsm.storage.protocol import Store

Key = tuple[str, str, str]  # (source, trigger, dest): one edge of the table


@dataclass
class History:
    ticket_id: str
    current: str = fsm.INITIAL
    taken: dict[Key, list[str]] = field(default_factory=dict)  # each taken edge's notes
    visited: list[str] = field(default_factory=list)  # passed through, the current one aside
    unmapped: list[str] = field(default_factory=list)  # journal steps the table has no edge for
    title: str | None = None  # set for a backlog picture (no single current state)
    #: `aN: the models it escalated` per attempt, in journal order (the ticket's legend)
    attempts: list[str] = field(default_factory=list)

    def models_legend(self) -> list[str]:
        """The legend's paragraph on models for this ticket: what its attempts really ran."""
        return [
            "**Models per attempt**, from the journal's `AttemptStarted` events: the roles each",
            "attempt ran escalated and their models (`aN` is attempt N; the other roles ran",
            "their base models):",
            "",
            *(f"- {line}" for line in self.attempts),
        ]


def escalated_models(event: ev.AttemptStarted) -> list[tuple[str, str]]:
    """(role, model) of each role the attempt ran escalated, from its `models` record (a model
    from a template's frontmatter is not an escalation); a journal older than that record has
    the escalation record only, keyed by settings key."""
    from tf_fsm.settings.schema import ESCALATION_KEYS

    if event.models is not None:
        return [
            (role, chosen.get("model", "?"))
            for role, chosen in event.models.items()
            if chosen.get("source") == "escalated"
        ]
    return [
        (ESCALATION_KEYS.get(key, key), model) for key, model in event.escalation.items() if model
    ]


def _models_line(escalated: list[tuple[str, str]]) -> str:
    return ", ".join(f"{role} → {model}" for role, model in escalated)


def _after(phase: str) -> str:
    i = fsm.PHASES.index(phase) + 1 if phase in fsm.PHASES else len(fsm.PHASES)
    return fsm.phase_state(fsm.PHASES[i]) if i < len(fsm.PHASES) else "?"


def replay(ticket_id: str, events: Sequence[ev.Event], current: str) -> History:
    """Map journal events onto edges of the table; `current` comes from retry-state.json."""
    replayer = _Replayer(History(ticket_id, current), rebased=rebased_shas(events))
    for event in events:
        if not replayer.lifecycle(event):
            replayer.workspace(event)
    history = replayer.history
    if current in history.visited:
        history.visited.remove(current)  # styled as the current state instead
    return history


_CLOSE = fsm.phase_state(fsm.PHASES[-1])
#: the merge queue's conflict resolution's invocations: noted with the merge's edges
RESOLUTION = (RESOLVE_PHASE, RESOLUTION_REVIEW_PHASE)
#: the checkpoint of a person's fix for the merge (a resumed merge), not a phase's
_MERGE_FIX = "merge"


@dataclass
class _Replayer:
    """The replay's walk: where the ticket stands, and the notes gathered for the next edges."""

    history: History
    #: each checkpoint the merge queue rebased -> its commit now: the sha a checkpoint is
    #: noted by, on a branch (the one it was made as is on none after the rebase)
    rebased: dict[str, str] = field(default_factory=dict)
    state: str = fsm.INITIAL
    ran: dict[str, list[str]] = field(default_factory=dict)  # phase -> this attempt's notes
    gates: dict[str, str] = field(default_factory=dict)  # gate name -> its last verdict
    merging: list[str] = field(default_factory=list)  # notes of the merge under way
    aside: list[str] = field(default_factory=list)  # work set aside: noted on the next edge
    rerun: bool = False  # the merge refused next ends the attempt blocked (conflicts rerun)

    def take(self, source: str, trigger: str, dest: str, notes: list[str]) -> None:
        history = self.history
        notes, self.aside = [*notes, *self.aside], []
        if (source, trigger, dest) in _edges():
            history.taken.setdefault((source, trigger, dest), []).extend(notes)
        else:
            history.unmapped.append(f"{notes[0].split()[0]}: {source} --{trigger}--> {dest}")
        history.visited.extend(s for s in (source, dest) if s not in history.visited)
        self.state = dest

    def lifecycle(self, event: ev.Event) -> bool:
        """The lifecycle's own events; False for any other."""
        a = f"a{event.attempt}"
        match event:
            case ev.RetryStateReset():
                self.state = fsm.INITIAL
                self.history.attempts.append("--retry-reset: attempt numbers start again at 1")
            case ev.AttemptStarted(trigger=why):
                self.ran, self.gates, self.merging = {}, {}, []
                up = _models_line(escalated_models(event))
                self.history.attempts.append(f"{a}: {up or 'base models'}")
                trigger = "retry" if self.state == fsm.BLOCKED else "start"
                models = f"escalated {up}" if up else "base models"
                self.take(
                    self.state,
                    trigger,
                    fsm.phase_state(fsm.PHASES[0]),
                    [f"{a} trigger {why}, {models}"],
                )
            case ev.InvocationFinished(phase=phase, role=role, model=model) if phase in RESOLUTION:
                self.merging.append(f"{a} {phase} {role} {model}")
            case ev.InvocationFinished(phase=phase, role=role, model=model):
                self.ran.setdefault(phase, []).append(f"{a} {role} {model}")
            case ev.PhaseSkipped(phase=phase):
                self.take(fsm.phase_state(phase), "skip", _after(phase), [a])
            case ev.PhaseCompleted(phase=phase) if fsm.phase_state(phase) != _CLOSE:
                self.take(
                    fsm.phase_state(phase), "complete", _after(phase), self.ran.pop(phase, [a])
                )
            case ev.PhaseFailed(phase=phase, role=role):
                self.take(fsm.phase_state(phase), "fail", fsm.ERROR, [f"{a} {phase} {role} failed"])
            case ev.GateEvaluated():
                self.gates[event.name] = _verdict(a, event)
            case ev.TicketClosed() if self.state == fsm.MERGING:
                self.take(fsm.MERGING, "merged", fsm.CLOSED, self._merge_notes(a))
            case ev.TicketBlocked() if self.state == fsm.BLOCKED:
                pass  # a rerun after a merge conflict: its edge was taken at the refusal
            case ev.TicketClosed() | ev.TicketBlocked():
                dest = fsm.CLOSED if isinstance(event, ev.TicketClosed) else fsm.BLOCKED
                self.take(_CLOSE, "complete", dest, self._close_notes(a))
            case ev.AttemptResumed(phase=phase):
                # a person's fix for the merge is committed as the attempt resumes
                self.ran = {k: v for k, v in self.ran.items() if k == _MERGE_FIX}
                if self.state == fsm.ERROR:
                    self.take(fsm.ERROR, "resume", fsm.phase_state(phase), [a])
                elif self.state != fsm.AWAITING_MERGE or phase != fsm.PHASES[-1]:
                    # an attempt in progress picks up where it stood: the machine takes no edge
                    self.state = fsm.phase_state(phase)
            case _:
                return False
        return True

    def workspace(self, event: ev.Event) -> None:
        """The workspace's events: a checkpoint goes with its phase's edge, the merge's steps
        with the edges of `merging`."""
        a = f"a{event.attempt}"
        match event:
            case wev.CheckpointCommitted(phase=phase, sha=sha):
                now = self.rebased.get(sha)
                shown = f"{now[:8]} (rebased)" if now else sha[:8]
                self.ran.setdefault(phase, []).append(f"{a} checkpoint {shown}")
            case wev.WorkSetAside(ref=ref, fork=fork):  # before the retry or resume it is for
                self.aside.append(f"{a} work set aside under {ref}")
                self.rerun = self.rerun or fork is not None  # the conflict's refusal follows
            case wev.BranchRebased(baseSha=onto):  # before the attempt it starts
                self.aside.append(f"the next attempt starts on the base tip {onto[:8]}")
            case wev.ResolutionStarted(number=k, role=role, files=files):
                what = ", ".join(f"{p} ({kind})" for p, kind in list(files.items())[:5])
                self.merging.append(f"{a} resolution {k} by {role}: {what}")
            case wev.ResolutionFinished(number=k, passed=ok, reason=why):
                self.merging.append(f"{a} resolution {k} {'passed' if ok else 'failed: ' + why}")
            case wev.MergeHeld(base=base):
                self.take(_CLOSE, "complete", fsm.AWAITING_MERGE, self._close_notes(a))
                self.merging = [f"{a} waited for `tf-fsm merge` into {base}"]
            case wev.MergeStarted(base=base, strategy=strategy):
                self._enter_merging(a)
                self.merging.append(f"{a} merge into {base} ({strategy})")
            case wev.MergeRebased(baseSha=onto):
                self.merging.append(f"{a} rebased onto {onto[:8]}")
            case wev.MergeCompleted(commit=commit, base=base, already=already):
                self._enter_merging(a)
                found = " (found merged already)" if already else ""
                self.merging.append(f"{a} merged into {base} as {commit[:8]}{found}")
            case wev.MergeRefused(failureClass=why, files=files):
                self._enter_merging(a)
                where = f" in {', '.join(files[:5])}" if files else ""
                notes = [*self.merging, f"{a} merge refused: {why}{where}"]
                if self.rerun:  # workspace.conflicts.mode rerun: the attempt ends blocked
                    self.take(fsm.MERGING, "rerun", fsm.BLOCKED, notes)
                else:
                    self.take(fsm.MERGING, "fail", fsm.ERROR, notes)
                self.merging, self.rerun = [], False

    def _enter_merging(self, a: str) -> None:
        """close --complete--> merging (or awaiting_merge --merge--> merging), once per merge (a
        merge found done, or refused before it started, journals no MergeStarted)."""
        if self.state == fsm.AWAITING_MERGE:
            self.take(fsm.AWAITING_MERGE, "merge", fsm.MERGING, self.merging)
            self.merging = []
        elif self.state != fsm.MERGING:
            self.merging = []
            self.take(_CLOSE, "complete", fsm.MERGING, self._close_notes(a))

    def _close_notes(self, a: str) -> list[str]:
        notes = self.ran.pop(fsm.PHASES[-1], [a]) + self.ran.pop(_MERGE_FIX, [])
        notes += self.gates.values()
        self.gates = {}  # gates run again after a rebase go with the merge
        return notes

    def _merge_notes(self, a: str) -> list[str]:
        return (self.merging or [a]) + list(self.gates.values())


def _verdict(a: str, event: ev.GateEvaluated) -> str:
    if event.counts is not None:
        found = ", ".join(f"{k} {v}" for k, v in event.counts.items() if v)
        return f"{a} gate {found or 'no findings'}"
    verdict = "passed" if event.passed else f"failed (exit {event.exitCode})"
    if event.preexisting:  # it failed as it fails on the base commit: it did not block
        verdict += f", {PREEXISTING}"
    return f"{a} gate {event.name} {verdict}"


@cache
def _edges() -> frozenset[Key]:
    return frozenset((e.source, e.trigger, e.dest) for e in fsm.TRANSITIONS)


def load_history(root: Path, ticket_id: str) -> tuple[History, Store]:
    """Read-only: the ticket's journal replayed, its current state from retry-state.json."""
    from tf_fsm.core.resume import live_phase
    from tf_fsm.core.ticket_rules import lifecycle_state
    from tf_fsm.settings.load import load_settings
    from tf_fsm.storage.backends import open_store

    store = open_store(root, load_settings(root), ticket_id)
    if store.journal_size() is None:
        # Checked before anything is written: a ticket never run gets no directory from us.
        raise TicketError(store.files.dir, f"no journal: {ticket_id} has not been run yet")
    state = store.load_retry_state()
    cur = state.current if state else None
    events = store.read_events().events
    phase = live_phase(cur.attemptNumber, cur.status, cur.phase, events) if cur else None
    return replay(ticket_id, events, lifecycle_state(cur, phase, events)), store


def backlog_history(root: Path) -> History:
    """Every run ticket at once: each edge labelled with how many tickets took it (read-only)."""
    from tf_fsm.settings.load import load_settings
    from tf_fsm.views.status import tracked_tickets

    settings = load_settings(root)
    takers: dict[Key, set[str]] = {}
    visited: set[str] = set()
    unmapped: list[str] = []
    ids = tracked_tickets(root, settings)
    drawn = 0
    for ticket_id in ids:
        try:
            one, _ = load_history(root, ticket_id)
        except TicketError:  # a directory without a journal: never run by tf_fsm
            continue
        drawn += 1
        for key in one.taken:
            takers.setdefault(key, set()).add(ticket_id)
        visited.update(one.visited, {one.current})
        unmapped += [f"{ticket_id}: {step}" for step in one.unmapped]
    history = History("backlog", current="", visited=sorted(visited), unmapped=unmapped)
    history.taken = {
        key: [f"{len(who)} ticket{'s' if len(who) != 1 else ''}"] for key, who in takers.items()
    }
    history.title = f"backlog: {drawn} ticket{'s' if drawn != 1 else ''}, how many took each edge"
    return history
