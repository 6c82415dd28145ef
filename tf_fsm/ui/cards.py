"""One card of the board: a ticket's column and what its card shows, from its tk record and
its read model (tf_fsm.core.ticket.TicketView, as `tf-fsm status` reads it: the next-step
decision, the refusal, the hand-off, the failure class and the spend are those answers, not a
second copy here)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tf_fsm.core import journal as ev
from tf_fsm.core.machine import AWAITING_MERGE, BLOCKED, CLOSED, ERROR, MERGING, phase_of
from tf_fsm.core.tk_rules import is_closed

if TYPE_CHECKING:
    from tf_fsm.core.ticket import TicketView
    from tf_fsm.settings.load import LoadedSettings
    from tf_fsm.storage.protocol import Store
    from tf_fsm.tk.backlog import TkRecord

#: the board's columns, left to right: (key, heading)
COLUMNS: tuple[tuple[str, str], ...] = (
    ("waiting", "waiting on dependencies"),
    ("ready", "ready"),
    ("running", "running"),
    ("blocked", "blocked, retries left"),
    ("human", "needs a human"),
    ("error", "error"),
    ("closed", "closed"),
)


@dataclass(frozen=True)
class StateFacts:
    """What a ticket's state files say, read once per change of those files."""

    view: TicketView | None  # None: state tf_fsm refuses to read (`error` says why)
    error: str | None
    roles: tuple[str, ...]  # the running phase's roles
    models: tuple[str, ...]  # their models (as the attempt chose them)
    phase_since: str | None  # when the phase started (the journal's timestamp)
    attempt_starts: tuple[str, ...]  # every AttemptStarted's timestamp
    closes: tuple[str, ...]  # every TicketClosed's timestamp


@dataclass(frozen=True)
class Card:
    id: str
    title: str
    column: str
    note: str  # why it stands there, in a few words
    tags: tuple[str, ...]
    assignee: str
    attempt: int | None
    max_attempts: int
    cost: float | None
    budget: float | None
    phase: str | None = None
    roles: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    since: str | None = None


def read_state(
    root: Path, settings: LoadedSettings, ticket_id: str, store: Store | None = None
) -> StateFacts:
    """The ticket's state facts (read-only), through `store` when the caller keeps one open
    for the ticket (its journal cache then spares a decode). State tf_fsm refuses to read (a
    corrupt `retry-state.json`, a symlink out of the project) is a card in error that says
    why, as `tf-fsm status` lists it, not a board that stops."""
    from tf_fsm.core.ticket_rules import attempt_events
    from tf_fsm.errors import TfFsmError
    from tf_fsm.storage.backends import open_store
    from tf_fsm.views.status import readable_journal, ticket_view

    store = store or open_store(root, settings, ticket_id)
    try:
        view = ticket_view(root, settings, ticket_id, store)
    except TfFsmError as exc:
        return StateFacts(None, str(exc), (), (), None, (), ())
    events = readable_journal(store)  # the store's journal cache: not decoded again
    # the current attempt's own events (a run's ViewSaved/ViewsSynced carry no attempt)
    current = attempt_events(events, view.attempt) if view.attempt else []
    started = next((e for e in current if isinstance(e, ev.AttemptStarted)), None)
    phase = next((e for e in reversed(current) if isinstance(e, ev.PhaseStarted)), None)
    roles = tuple(phase.roles) if phase else ()
    chosen = (started.models or {}) if started else {}
    return StateFacts(
        view=view,
        error=None,
        roles=roles,
        models=tuple(chosen.get(r, {}).get("model", "?") for r in roles),
        phase_since=phase.ts if phase else None,
        attempt_starts=tuple(e.ts for e in events if isinstance(e, ev.AttemptStarted)),
        closes=tuple(e.ts for e in events if isinstance(e, ev.TicketClosed)),
    )


def place(
    record: TkRecord | None,
    facts: StateFacts | None,
    ready: bool,
    held: bool,
    closed_elsewhere: str | None = None,
) -> tuple[str, str]:
    """(column, note) of a ticket. `ready`: tk ready would list it; `held`: a run holds its
    lock now (here, or on a cluster's worker); `closed_elsewhere`: why it is closed though
    this clone's tk file is not yet (its workflow closed it on the shared remote)."""
    if facts is not None and facts.error is not None:  # said even when tk has it closed
        return "error", f"unreadable state: {facts.error}"
    view = facts.view if facts else None
    if record is not None and is_closed(record.status):
        return "closed", "closed in tk"
    if closed_elsewhere is not None:
        return "closed", closed_elsewhere
    if view is None or view.status is None or view.state == CLOSED:
        if record is None:
            return ("closed", "no ticket file") if view else ("waiting", "no ticket file")
        reopened = " (reopened)" if view and view.state == CLOSED else ""
        return ("ready", f"tk ready{reopened}") if ready else ("waiting", "open dependencies")
    return _place_state(view, held)


#: the note of a ticket `run` refuses a new attempt, by the refusal (tf_fsm.core.next_step)
REFUSED_NOTES = {
    "same_failure": "the same failure repeated",
    "budget": "budget spent",
    "retries_exhausted": "retries exhausted",
    "no_attempt_allowed": "retries exhausted",
}


def _place_state(view: TicketView, held: bool) -> tuple[str, str]:
    state = view.state
    if held:
        return "running", f"at {view.phase or 'start'}"
    if view.waiting:
        return "human", "waiting for a hand-off artifact"
    if state == AWAITING_MERGE:
        return "human", "passed, waiting for `tf-fsm merge`"
    if phase_of(state) is not None or state == MERGING:
        return "error", f"interrupted at {view.phase}: resumable"
    if state == ERROR:
        if view.failure_class == "merge_conflict":
            return "human", "merge conflict"
        return "error", f"{view.failure_class or 'failed'}: resumable"
    if view.refusal is not None:
        return "human", REFUSED_NOTES[view.refusal]
    if state == BLOCKED:
        return "blocked", f"{view.retries_left} retries left"
    return "waiting", view.step.reason or state


def make_card(
    ticket_id: str,
    record: TkRecord | None,
    facts: StateFacts | None,
    settings: LoadedSettings,
    *,
    ready: bool,
    held: bool,
    closed_elsewhere: str | None = None,
) -> Card:
    column, note = place(record, facts, ready, held, closed_elsewhere)
    view = facts.view if facts else None
    running = column == "running" and facts is not None
    return Card(
        id=ticket_id,
        title=record.title if record else "(no ticket file)",
        column=column,
        note=note,
        tags=tuple(record.tag_list()) if record else (),
        assignee=record.assignee if record else "",
        attempt=view.attempt if view else None,
        max_attempts=settings.max_retries,
        cost=view.budget.spent if view else None,
        budget=settings.workflow.escalation.maxCostUsd,
        phase=view.phase if running and view else None,
        roles=facts.roles if running and facts else (),
        models=facts.models if running and facts else (),
        since=facts.phase_since if running and facts else None,
    )
