"""`Store`: what the rest of tf_fsm may use of a ticket's persisted records (its artifacts, its
retry state, its journal, its views, its lock), apart from how and where they are kept. Two
implementations: `tf_fsm.storage.store.TicketStore` (files, pi-ticketflow's layout) and
`tf_fsm.storage.memory.MemoryStore` (process memory); `tf_fsm.storage.backends` chooses one.
Every implementation must pass the conformance suite `tf_fsm.conformance.store`.

No member speaks of paths, except `files`: the exchange area agents work in (`AgentFiles`),
which is a directory because agents are processes told where to write.

The contract, common to every member:

* The ticket id is validated before anything is kept under it (a store of a bad id is never
  constructed: InvalidTicketIdError), so no member ever sees an unvalidated id.
* Everything written (artifacts, retry state, journal lines) is redacted first.
* A record is replaced atomically: a reader sees the old content or the new, never a mix, and
  a write that fails leaves the old content (a disk that refuses it: StorageError naming it).
* The journal is the commit point. While a `batch()` runs only durable journal appends are
  made durable; every other record is a view: the retry state and the chain context have
  their after-image journaled first (`save_view`), the sha256 of the other artifacts written
  are handed to the caller (`take_written`) to be journaled. Everything is durable when the
  batch ends, and a batch after a crash rebuilds the views (`repair_views`).
* A record that cannot be trusted raises CorruptStateError naming it, and is never rewritten
  behind the user's back.
* Reads never write: no member documented as a read creates, changes or removes anything.
* Changes are made while holding `lock()`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from tf_fsm.core.journal import Event
from tf_fsm.core.journal_codec import JournalRead
from tf_fsm.core.resume import Seen
from tf_fsm.core.state import RetryState
from tf_fsm.storage.redact import Redactor


@dataclass(frozen=True)
class Capabilities:
    """What a store offers beyond the protocol, so callers (and the conformance suite) know
    which promises apply to it."""

    #: another process opening the same ticket sees the same records and the same lock
    shared_across_processes: bool
    #: the records are files in pi-ticketflow's layout (byte for byte), under `files.dir`
    pi_ticketflow_files: bool


class AgentFiles(Protocol):
    """The exchange area agents work in: a directory they are told (`TF_ARTIFACT_DIR`,
    `TF_CHAIN_CONTEXT`, their output's path), where the store's artifacts are for them to read
    and where they write theirs. The engine takes what an agent wrote with `take`; only then is
    it the store's. For TicketStore it is the ticket directory itself (no copy)."""

    @property
    def dir(self) -> Path:
        """The directory agents are told (`TF_ARTIFACT_DIR`)."""

    @property
    def within(self) -> Path:
        """The boundary no write may be led out of by a symlink (UnsafePathError)."""

    def path(self, name: str) -> Path:
        """Where artifact `name` is for an agent: a file name or a relative path of plain
        segments (`prompts/attempt-1/x.md`). InvalidArtifactNameError for a name that is empty,
        absolute, has `.`, `..` or hidden segments, names a record the store keeps itself
        (retry state, journal, lock), or resolves (through a symlink) outside `dir`. Writes
        nothing."""

    def unchecked(self, name: str) -> Path:
        """Where artifact `name` is, its name checked as `path` checks it, its symlinks not:
        for a path that is only shown (in a prompt's text), or whose writer checks it."""

    def take(self, name: str) -> tuple[str, str] | None:
        """The sha256 and text of the file an agent wrote as artifact `name` (None if there is
        none), after taking any secret out of it: rewritten atomically, and only when the
        redactor changes something; from then on it is the store's artifact `name`. Bytes that
        are not UTF-8 are kept as they are. Not part of `take_written`."""

    def check_paths(self) -> None:
        """Before a run writes anything: UnsafePathError if the area, or a symlink in it, leads
        out of `within`, or if a record the store appends to or locks is a symlink at all.
        Writes nothing."""


class Store(Protocol):
    """One ticket's persisted records: its artifacts, its retry state, its journal, its lock."""

    @property
    def ticket_id(self) -> str:
        """The ticket's id, validated before the store was built."""

    @property
    def redactor(self) -> Redactor:
        """What every write goes through; callers use it for text they show or pass on."""

    @property
    def capabilities(self) -> Capabilities:
        """What this store offers beyond the protocol."""

    @property
    def files(self) -> AgentFiles:
        """The exchange area agents work in (see AgentFiles)."""

    # --- durability ------------------------------------------------------------------------

    def batch(self, on_durable: Callable[[], None] | None = None) -> AbstractContextManager[None]:
        """A run. Every write is visible to reads at once; only durable journal appends are
        made durable; when the block ends, however it ends, everything written is durable and
        the journal ends with ViewsSynced. `on_durable` is called at each durable point of the
        batch, inside it: what the caller wrote elsewhere (the tk file) is made durable with
        the store's writes (tf_fsm.fs.atomic.one_sync)."""

    def sync(self) -> None:
        """The end of a run (`batch()` calls it): `durable_point`, then ViewsSynced, when
        anything was written; else only the journal's pending sync."""

    def durable_point(self) -> None:
        """Make every write so far durable, the views too, and call the batch's `on_durable`:
        where a ticket closes, and at a run's end."""

    def sync_journal(self) -> None:
        """Make the journal durable now if an append waits for it (before a write elsewhere
        that must never be on disk ahead of the journal)."""

    def deferred_views(self) -> AbstractContextManager[None]:
        """Views saved in the block are journaled at once and written when it ends, after
        one `sync_journal` for all their images (an attempt's start saves two, each of which
        would need its own): nothing in the block may read them back. However the block
        ends, the views are written."""

    def repair_views(self, events: list[Event]) -> list[str]:
        """When `events` (the journal) does not end with ViewsSynced (the last run was cut
        short): rewrite each view that is missing, empty, torn or not its last journaled
        image, journal ViewsChecked, and return the names rewritten. [] after a clean end."""

    # --- artifacts --------------------------------------------------------------------------

    def write_artifact(self, name: str, text: str, only_if_changed: bool = False) -> None:
        """Write artifact `name` (validated as by `files.path`), redacted, replaced atomically,
        and remembered for `take_written`. UnsafePathError when a symlink would lead the write
        out of the ticket's area. `only_if_changed` leaves an identical artifact (and its mtime)
        alone."""

    def take_written(self) -> dict[str, str]:
        """Every artifact written by `write_artifact` since the last call: name -> sha256 of
        its bytes. Forgotten once returned."""

    def seen(self, name: str) -> Seen | None:
        """An artifact's sha256 and mtime (None if it is missing). Writes nothing."""

    def read_artifact(self, name: str) -> str | None:
        """An artifact's text (None if it is missing); bytes that are not UTF-8 read as
        U+FFFD. Refuses a name as `files.path` does. Writes nothing."""

    # --- retry state ------------------------------------------------------------------------

    def load_retry_state(self) -> RetryState | None:
        """The retry state, None when there is none. CorruptStateError (naming the record and
        the `--retry-reset` remedy) when it is empty, not UTF-8, not JSON, not the schema, or of
        another ticket. Writes nothing, whatever it finds."""

    def peek_retry_state(self) -> dict[str, Any] | None:
        """The retry state as plain JSON, not validated, None when absent or unreadable: the
        backlog loop's cheap look at a ticket (its open attempt, its counts). Writes nothing."""

    def save_retry_state(self, state: RetryState) -> None:
        """Replace the retry state, redacted and atomically, as `save_view` does. ValueError
        for another ticket's state. A record already there that cannot be trusted is never
        overwritten: CorruptStateError (only `reset_retry_state` may set it aside)."""

    def save_view(self, name: str, content: dict[str, Any]) -> None:
        """Journal `content`, redacted, as view `name`'s after-image (ViewSaved), then replace
        the view with it as pretty JSON. ValueError for a name that is not a view."""

    def retry_backup_name(self, now: datetime) -> str:
        """The name `reset_retry_state` at `now` would give the backup:
        `retry-state.json.bak.<UTC stamp>`, with `.1`, `.2`, ... when taken. Writes nothing."""

    def reset_retry_state(self, now: datetime) -> str | None:
        """Move the retry state, valid or corrupt, aside as `retry_backup_name(now)` and
        journal a RetryStateReset (with the retry count before, None for a corrupt record); the
        next run starts at attempt 1. Returns the backup's name, None when there was none."""

    # --- journal ----------------------------------------------------------------------------

    def append_event(self, event: Event, durable: bool = True) -> None:
        """`append_events([event], durable)`."""

    def append_events(self, events: list[Event], durable: bool = True) -> None:
        """Append events in order, one line each, redacted, in one write. ValueError for an
        event of another ticket. A torn tail left by a crashed append is cut off first and
        recorded as a JournalTailDropped event, never dropped silently; a complete last line
        that is not a valid event is CorruptStateError and the journal is left as it is.
        `durable=False` (inside `batch()`) writes at once and is made durable with the next
        durable append."""

    def read_events(self) -> JournalRead:
        """The journal's events in the order they were appended, and a torn tail if there is
        one (reported, not repaired). CorruptStateError for a line before the last that is not a
        valid event. Empty when there is no journal. Writes nothing."""

    def replace_journal(self, lines: Sequence[str]) -> list[str]:
        """The ticket's journal is these lines (another host's, oldest first, without their
        newlines): validated (CorruptStateError naming the line, ValueError for another
        ticket's event) before anything changes, redacted, the journal replaced atomically
        (none when `lines` is empty), then every view rebuilt from its last image as
        `repair_views` does, and a view the lines hold no image of removed. Returns the views'
        names. Made while holding `lock()`, outside a `batch()`."""

    def journal_lines(self) -> list[str]:
        """The journal's whole lines as kept, without their newlines (a torn tail left
        out); [] when there is no journal. Writes nothing."""

    def journal_size(self) -> int | None:
        """The journal's length in bytes, None when the ticket has no journal (it never ran):
        grows with every append, so a cache of what was read from it can tell it is stale
        without reading it. Writes nothing."""

    def running_phase(self, attempt: int) -> str | None:
        """The phase attempt `attempt` last started, read cheaply from the journal's end as
        plain JSON (no validation): the loop's look at a running worker. Writes nothing."""

    # --- lock -------------------------------------------------------------------------------

    def lock(
        self, note: str | None = None, *, loop: str | None = None
    ) -> AbstractContextManager[None]:
        """Hold the ticket's exclusive lock for the block, or raise TicketLockedError at once
        (naming the holder's pid when known). Exclusive against a second store of the same
        ticket in this process (not re-entrant), and across processes when the store is
        `shared_across_processes`. Released when the block ends, however it ends, and when the
        holder dies, however it dies (never stale); not lost when the ticket's files are
        deleted while it is held. `note` and `loop` describe the holder (`loop`: the backlog
        loop it works for). Once held, temp files left by a writer killed mid-write are
        removed and journaled (StaleTempFilesRemoved)."""

    def lock_holder(self) -> int | None:
        """None when nobody holds the ticket's lock, else the holder's pid, -1 when unknown.
        Only a probe, which takes nothing: a run takes the lock for real and may still be
        refused."""

    def lock_loop(self) -> str | None:
        """The backlog loop the lock's holder works for (`lock(loop=...)`), None when the lock
        is free or its holder is no loop's worker. Writes nothing."""


#: a project's stores: one per ticket id (tf_fsm.storage.backends.ticket_stores)
StoreFactory = Callable[[str], Store]
