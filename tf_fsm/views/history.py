"""A ticket's path through the lifecycle, replayed from its journal (`events.jsonl`).

`replay` is pure: journal events in, the table edges they took out. The diagrams draw it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tf_fsm.core import journal as ev
from tf_fsm.core import machine as fsm
from tf_fsm.errors import TicketError

if TYPE_CHECKING:
    from tf_fsm.storage.store import TicketStore

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
    edges = {(e.source, e.trigger, e.dest) for e in fsm.TRANSITIONS}
    history = History(ticket_id, current)
    state, last = fsm.INITIAL, fsm.phase_state(fsm.PHASES[-1])
    ran: dict[str, list[str]] = {}  # phase -> "aN role model" lines of this attempt
    gates: dict[str, str] = {}  # gate name -> its last verdict this attempt

    def take(source: str, trigger: str, dest: str, notes: list[str]) -> None:
        nonlocal state
        if (source, trigger, dest) in edges:
            history.taken.setdefault((source, trigger, dest), []).extend(notes)
        else:
            history.unmapped.append(f"{notes[0].split()[0]}: {source} --{trigger}--> {dest}")
        history.visited.extend(s for s in (source, dest) if s not in history.visited)
        state = dest

    for event in events:
        a = f"a{event.attempt}"
        match event:
            case ev.RetryStateReset():
                state = fsm.INITIAL
                history.attempts.append("--retry-reset: attempt numbers start again at 1")
            case ev.AttemptStarted(trigger=why):
                ran, gates = {}, {}
                up = _models_line(escalated_models(event))
                history.attempts.append(f"{a}: {up or 'base models'}")
                trigger = "retry" if state == fsm.BLOCKED else "start"
                first = fsm.phase_state(fsm.PHASES[0])
                models = f"escalated {up}" if up else "base models"
                take(state, trigger, first, [f"{a} trigger {why}, {models}"])
            case ev.InvocationFinished(phase=phase, role=role, model=model):
                ran.setdefault(phase, []).append(f"{a} {role} {model}")
            case ev.PhaseSkipped(phase=phase):
                take(fsm.phase_state(phase), "skip", _after(phase), [a])
            case ev.PhaseCompleted(phase=phase) if fsm.phase_state(phase) != last:
                take(fsm.phase_state(phase), "complete", _after(phase), ran.pop(phase, [a]))
            case ev.PhaseFailed(phase=phase, role=role):
                take(fsm.phase_state(phase), "fail", fsm.ERROR, [f"{a} {phase} {role} failed"])
            case ev.GateEvaluated(name=name, passed=passed, counts=counts, exitCode=code):
                if counts is not None:
                    found = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
                    gates[name] = f"{a} gate {found or 'no findings'}"
                else:
                    verdict = "passed" if passed else f"failed (exit {code})"
                    gates[name] = f"{a} gate {name} {verdict}"
            case ev.TicketClosed() | ev.TicketBlocked():
                dest = fsm.CLOSED if isinstance(event, ev.TicketClosed) else fsm.BLOCKED
                notes = ran.pop(fsm.PHASES[-1], [a]) + list(gates.values())
                take(last, "complete", dest, notes)
            case ev.AttemptResumed(phase=phase):
                ran = {}
                take(state, "resume", fsm.phase_state(phase), [a])
    if current in history.visited:
        history.visited.remove(current)  # styled as the current state instead
    return history


def load_history(root: Path, ticket_id: str) -> tuple[History, TicketStore]:
    """Read-only: the ticket's journal replayed, its current state from retry-state.json."""
    from tf_fsm.core.resume import live_phase
    from tf_fsm.settings.load import load_settings
    from tf_fsm.storage.store import open_store

    store = open_store(root, load_settings(root), ticket_id)
    if not store.journal_path.is_file():
        # Checked before anything is written: a ticket never run gets no directory from us.
        raise TicketError(store.journal_path, f"no journal: {ticket_id} has not been run yet")
    state = store.load_retry_state()
    cur = state.current if state else None
    events = store.read_events().events
    phase = live_phase(cur.attemptNumber, cur.status, cur.phase, events) if cur else None
    current = fsm.state_of_attempt(cur.status if cur else None, phase)
    return replay(ticket_id, events, current), store


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
