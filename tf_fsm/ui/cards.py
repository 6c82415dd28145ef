"""One card of the board: a ticket's column and what its card shows, from its tk record and
its state as `tf-fsm status` reads it (`views.status.ticket_status`: the next-step decision,
the retries left and the spend are that one answer, not a second copy here)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tf_fsm.core import journal as ev
from tf_fsm.core.machine import AWAITING_MERGE, BLOCKED, CLOSED, ERROR, MERGING, phase_of

if TYPE_CHECKING:
    from tf_fsm.settings.load import LoadedSettings
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

    row: dict[str, Any]  # `ticket_status`
    waiting: bool  # the current attempt waits for a hand-off artifact
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


def read_state(root: Path, settings: LoadedSettings, ticket_id: str) -> StateFacts:
    """The ticket's state facts (read-only). State tf_fsm refuses to read (a corrupt
    `retry-state.json`, a symlink out of the project) is a card in error that says why, as
    `tf-fsm status` lists it, not a board that stops."""
    from tf_fsm.engine.accounting import attempt_events
    from tf_fsm.errors import TfFsmError
    from tf_fsm.storage.backends import open_store
    from tf_fsm.views.status import readable_journal, ticket_status

    store = open_store(root, settings, ticket_id)
    try:
        row = ticket_status(root, settings, ticket_id, store)
    except TfFsmError as exc:
        row = {"state": "corrupt", "status": "corrupt", "error": str(exc)}
        return StateFacts(row, False, (), (), None, (), ())
    events = readable_journal(store)  # the store's journal cache: not decoded again
    # the current attempt's own events (a run's ViewSaved/ViewsSynced carry no attempt)
    current = attempt_events(events, row["attempt"]) if row.get("attempt") else []
    started = next((e for e in current if isinstance(e, ev.AttemptStarted)), None)
    phase = next((e for e in reversed(current) if isinstance(e, ev.PhaseStarted)), None)
    roles = tuple(phase.roles) if phase else ()
    chosen = (started.models or {}) if started else {}
    return StateFacts(
        row=row,
        waiting=bool(current) and isinstance(current[-1], ev.PhaseWaiting),
        roles=roles,
        models=tuple(chosen.get(r, {}).get("model", "?") for r in roles),
        phase_since=phase.ts if phase else None,
        attempt_starts=tuple(e.ts for e in events if isinstance(e, ev.AttemptStarted)),
        closes=tuple(e.ts for e in events if isinstance(e, ev.TicketClosed)),
    )


def place(
    record: TkRecord | None, facts: StateFacts | None, ready: bool, held: bool
) -> tuple[str, str]:
    """(column, note) of a ticket. `ready`: tk ready would list it; `held`: a run holds its
    lock now."""
    row = facts.row if facts else None
    if row is not None and row.get("error"):  # said even when tk has it closed
        return "error", f"unreadable state: {row['error']}"
    if record is not None and record.status == "closed":
        return "closed", "closed in tk"
    if row is None or row.get("status") is None or row["state"] == CLOSED:
        if record is None:
            return ("closed", "no ticket file") if row else ("waiting", "no ticket file")
        reopened = " (reopened)" if row and row["state"] == CLOSED else ""
        return ("ready", f"tk ready{reopened}") if ready else ("waiting", "open dependencies")
    return _place_state(row, facts, held)


def _place_state(row: dict[str, Any], facts: StateFacts | None, held: bool) -> tuple[str, str]:
    state = row["state"]
    if held:
        return "running", f"at {row.get('phase') or 'start'}"
    if facts is not None and facts.waiting:
        return "human", "waiting for a hand-off artifact"
    if state == AWAITING_MERGE:
        return "human", "passed, waiting for `tf-fsm merge`"
    if phase_of(state) is not None or state == MERGING:
        return "error", f"interrupted at {row.get('phase')}: resumable"
    if state == ERROR:
        if row.get("failureClass") == "merge_conflict":
            return "human", "merge conflict"
        return "error", f"{row.get('failureClass') or 'failed'}: resumable"
    if state == BLOCKED and row.get("skip"):
        if row.get("sameFailure"):
            return "human", "the same failure repeated"
        if row.get("failureClass") == "budget":
            return "human", "budget spent"
        return "human", "retries exhausted"
    if state == BLOCKED:
        return "blocked", f"{row.get('retriesLeft')} retries left"
    return "waiting", str(row.get("next") or state)


def make_card(
    ticket_id: str,
    record: TkRecord | None,
    facts: StateFacts | None,
    settings: LoadedSettings,
    *,
    ready: bool,
    held: bool,
) -> Card:
    column, note = place(record, facts, ready, held)
    row = facts.row if facts else {}
    running = column == "running" and facts is not None
    return Card(
        id=ticket_id,
        title=record.title if record else "(no ticket file)",
        column=column,
        note=note,
        tags=tuple(record.tag_list()) if record else (),
        assignee=record.assignee if record else "",
        attempt=row.get("attempt"),
        max_attempts=settings.max_retries,
        cost=row.get("costUsd"),
        budget=settings.workflow.escalation.maxCostUsd,
        phase=row.get("phase") if running else None,
        roles=facts.roles if running and facts else (),
        models=facts.models if running and facts else (),
        since=facts.phase_since if running and facts else None,
    )
