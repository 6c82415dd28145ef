"""Resetting a ticket's retries: `retry-state.json` moved aside so the next run starts at
attempt 1.

One code path for `tf-fsm reset` and `tf-fsm run --retry-reset` (`repair_and_reset`): under the
ticket's lock and inside its batch, the views a crash left behind are first rebuilt from the
journal (as every run does before anything reads them), then the retry state is moved aside
(`.bak.<UTC stamp>`, journaled as RetryStateReset; tf_fsm.storage.store). Nothing is dropped:
the old file stays next to the new series under its backup name.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from tf_fsm.core.journal import Event, RetryStateReset
from tf_fsm.errors import CorruptStateError
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.tk import tickets

if TYPE_CHECKING:
    from tf_fsm.storage.protocol import Store

#: who holds the lock while `tf-fsm reset` works (`.lock.owner`'s note)
LOCK_NOTE = "tf-fsm reset"


@dataclass(frozen=True)
class ResetResult:
    """What a reset did: the backup the retry state went to (None: there was none, nothing
    was moved), the blocked attempts it recorded (None: none, or the file was corrupt), and
    the views rebuilt from the journal first."""

    ticket_id: str
    backup: str | None  # the backup's name
    retry_count_before: int | None
    repaired: list[str]
    #: where the backup is, for people and `reset --json`: its path when the store keeps files
    backup_at: str | None = None


def repair_and_reset(store: Store, reset_at: datetime | None) -> tuple[ResetResult, list[Event]]:
    """With the ticket's lock held, inside its batch: the views rebuilt after a crash, then,
    with `reset_at`, the retry state moved aside at that time. Returns what was done and the
    journal as it then is (the reset's RetryStateReset last)."""
    # The whole journal is read before anything else: a line that cannot be trusted stops the
    # command here, before anything is moved (or, for a run, any agent is paid for).
    events = store.read_events().events
    # A run cut short (a crash, a power cut) may have left views that are not what the journal
    # committed: they are rebuilt from it before anything reads or moves them.
    repaired = store.repair_views(events)
    backup = store.reset_retry_state(reset_at) if reset_at is not None else None
    events = store.read_events().events  # with what the repair and the reset journaled
    at = None if backup is None else _where(store, backup)
    result = ResetResult(store.ticket_id, backup, _count_before(events, backup), repaired, at)
    return result, events


def rebuilt(result: ResetResult) -> str:
    """The note on the views rebuilt from the journal, as `run` and `reset` print it."""
    return f"rebuilt from the journal: {', '.join(result.repaired)}"


def _count_before(events: list[Event], backup: str | None) -> int | None:
    """The blocked attempts the reset recorded, as journaled (a corrupt file has none)."""
    if backup is None:
        return None
    reset = next(
        (e for e in reversed(events) if isinstance(e, RetryStateReset) and e.backup == backup),
        None,
    )
    return reset.retryCountBefore if reset is not None else None


def reset_retries(root: Path, ticket_id: str, *, now: datetime | None = None) -> ResetResult:
    """`tf-fsm reset`: the ticket's retries reset without running it. The tk ticket must exist
    (TicketError); another process running the ticket holds its lock (TicketLockedError, and
    nothing is moved). A ticket never run has no directory: nothing to reset, and none is
    made for it."""
    settings = load_settings(root)
    store = open_store(root, settings, ticket_id)  # validates the id
    tickets.read(root, ticket_id)  # a reset of a ticket that does not exist is a mistake
    if not has_records(store):
        return ResetResult(store.ticket_id, None, None, [])
    store.files.check_paths()  # where the reset writes, checked before it writes anything
    with store.lock(note=LOCK_NOTE), store.batch():
        result, _ = repair_and_reset(store, now or datetime.now(UTC))
    return result


def has_records(store: Store) -> bool:
    """Does the store keep anything of the ticket (a journal, a retry state) or is its lock
    held? A command that makes nothing for a ticket never run asks first."""
    return (
        store.journal_size() is not None
        or has_retry_state(store)
        or store.lock_holder() is not None
    )


def has_retry_state(store: Store) -> bool:
    """Does the ticket have a retry state, valid or not (a corrupt one is moved aside too)?"""
    try:
        return store.load_retry_state() is not None
    except CorruptStateError:
        return True


def _where(store: Store, backup: str) -> str:
    if store.capabilities.pi_ticketflow_files:
        return str(store.files.dir / backup)
    return f"{backup} (in this process's memory store)"
