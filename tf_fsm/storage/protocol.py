"""`Store`: what the rest of tf_fsm may use of a ticket's persisted files, apart from how they
are kept. `tf_fsm.storage.store.TicketStore` is the implementation; every implementation must
pass the conformance suite in `tests/conformance/test_store.py`.

The contract, common to every member:

* The ticket id is validated before any path is built from it (a store of a bad id is never
  constructed: InvalidTicketIdError), so no member ever sees an unvalidated id.
* Everything written (artifacts, retry state, journal lines) is redacted first.
* A persisted file is replaced atomically: a reader sees the old content or the new, never a
  mix, and a write that fails leaves the old content and no temp file (a disk that refuses
  it: StorageError naming the file).
* The journal is the commit point. While a `batch()` runs only durable journal appends are
  fsynced; every other file is a view: the retry state and the chain context have their
  after-image journaled first (`save_view`), the sha256 of the other files it writes are
  handed to the caller (`take_written`) to be journaled. Everything is durable when the batch
  ends, and a batch after a crash rebuilds the views (`repair_views`).
* A file that cannot be trusted raises CorruptStateError naming it, and is never rewritten
  behind the user's back.
* Reads never write: no member documented as a read creates, changes or removes anything.
* Changes are made while holding `lock()`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from tf_fsm.core.journal import Event
from tf_fsm.core.journal_codec import JournalRead
from tf_fsm.core.resume import Seen
from tf_fsm.core.state import RetryState
from tf_fsm.storage.redact import Redactor


class Store(Protocol):
    """One ticket's persisted files: its artifacts, its retry state, its journal, its lock."""

    # --- where things are (read-only) -------------------------------------------------------

    @property
    def ticket_id(self) -> str:
        """The ticket's id, validated before the store was built."""

    @property
    def dir(self) -> Path:
        """The ticket's directory: every artifact lives under it; agents are told it
        (`TF_ARTIFACT_DIR`)."""

    @property
    def within(self) -> Path:
        """The boundary no write may be led out of by a symlink (UnsafePathError)."""

    @property
    def redactor(self) -> Redactor:
        """What every write goes through; callers use it for text they show or pass on."""

    @property
    def retry_state_path(self) -> Path:
        """Where the retry state is (`retry-state.json`, pi-ticketflow's schema). Read only
        through `load_retry_state`, written only through `save_retry_state`."""

    @property
    def journal_path(self) -> Path:
        """Where the journal is (`events.jsonl`: one JSON line per event). Written only by
        `append_event(s)`; its existence says whether the ticket has ever run."""

    @property
    def chain_context_path(self) -> Path:
        """Where `chain-context.json` is: the artifact of that name, which agents are told
        (`TF_CHAIN_CONTEXT`)."""

    def check_paths(self) -> None:
        """Before a run writes anything: UnsafePathError if the ticket directory, or a symlink
        in it, leads out of `within`, or if the journal or the lock is a symlink at all.
        Writes nothing."""

    # --- durability ------------------------------------------------------------------------

    def batch(self, *more: Path) -> AbstractContextManager[None]:
        """A run. Every write is visible to reads at once; only durable journal appends are
        fsynced; when the block ends, however it ends, everything written is durable (the file
        systems of `dir` and of each of `more`), and the journal ends with ViewsSynced."""

    def sync(self) -> None:
        """The end of a run (`batch()` calls it): `durable_point`, then ViewsSynced, when
        anything was written; else only the journal's pending fsync."""

    def durable_point(self) -> None:
        """Make every write so far durable, the views too (the file systems of `dir` and of
        the directories the batch was given): where a ticket closes, and at a run's end."""

    def sync_journal(self) -> None:
        """fsync the journal now if an append waits for it (before a write elsewhere that must
        never be on disk ahead of the journal)."""

    def repair_views(self, events: list[Event]) -> list[str]:
        """When `events` (the journal) does not end with ViewsSynced (the last run was cut
        short): rewrite each view that is missing, empty, torn or not its last journaled
        image, journal ViewsChecked, and return the names rewritten. [] after a clean end."""

    # --- artifacts --------------------------------------------------------------------------

    def artifact_path(self, name: str) -> Path:
        """The path of artifact `name`: a file name or a relative path of plain segments
        (`prompts/attempt-1/x.md`). InvalidArtifactNameError for a name that is empty, absolute,
        has `.`, `..` or hidden segments, names a file the store writes itself (retry state,
        journal, lock), or resolves (through a symlink) outside `dir`. Writes nothing."""

    def write_artifact(self, name: str, text: str, only_if_changed: bool = False) -> Path:
        """Write artifact `name` (validated as by `artifact_path`), redacted, replaced
        atomically, and remembered for `take_written`; returns its path. UnsafePathError when
        a symlink would lead the write out of `dir`. `only_if_changed` leaves an identical
        file (and its mtime) alone."""

    def take_written(self) -> dict[str, str]:
        """Every file written by `write_artifact` since the last call: name under `dir` ->
        sha256 of its bytes. Forgotten once returned."""

    def redact_agent_file(self, path: Path) -> tuple[str, str] | None:
        """The sha256 and text of a file an agent wrote in `dir` (None if there is none), after
        taking any secret out of it: rewritten atomically, and only when the redactor changes
        something. Bytes that are not UTF-8 are kept as they are."""

    def seen(self, name: str) -> Seen | None:
        """An artifact's sha256 and mtime (None if it is missing). Writes nothing."""

    def read_artifact(self, name: str) -> str | None:
        """An artifact's text (None if it is missing); bytes that are not UTF-8 read as
        U+FFFD. Refuses a name as `artifact_path` does. Writes nothing."""

    # --- retry state ------------------------------------------------------------------------

    def load_retry_state(self) -> RetryState | None:
        """The retry state, None when there is none. CorruptStateError (naming the file and the
        `--retry-reset` remedy) when it is empty, not UTF-8, not JSON, not the schema, or of
        another ticket. Writes nothing, whatever it finds."""

    def save_retry_state(self, state: RetryState) -> None:
        """Replace the retry state, redacted and atomically, as `save_view` does. ValueError
        for another ticket's state. A file already there that cannot be trusted is never
        overwritten: CorruptStateError (only `reset_retry_state` may set it aside)."""

    def save_view(self, name: str, content: dict[str, Any]) -> None:
        """Journal `content`, redacted, as view `name`'s after-image (ViewSaved), then replace
        the file with it as pretty JSON. ValueError for a name that is not a view."""

    def retry_backup_path(self, now: datetime) -> Path:
        """Where `reset_retry_state` at `now` would move the retry state:
        `retry-state.json.bak.<UTC stamp>`, with `.1`, `.2`, ... when taken. Writes nothing."""

    def reset_retry_state(self, now: datetime) -> Path | None:
        """Move the retry state, valid or corrupt, aside to `retry_backup_path(now)` and journal
        a RetryStateReset (with the retry count before, None for a corrupt file); the next run
        starts at attempt 1. Returns the backup, None when there was no retry state."""

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

    # --- lock -------------------------------------------------------------------------------

    def lock(
        self, note: str | None = None, *, loop: str | None = None
    ) -> AbstractContextManager[None]:
        """Hold the ticket's exclusive lock for the block, or raise TicketLockedError at once
        (naming the holder's pid when known). Exclusive across processes and against a second
        store of the same ticket in this process (not re-entrant). Released when the block ends,
        however it ends, and when the holder dies, however it dies (never stale); not lost when
        the ticket's files or directory are deleted while it is held. `note` and `loop` describe
        the holder (`loop`: the backlog loop it works for). Once held, temp files left by a
        writer killed mid-write are removed and journaled (StaleTempFilesRemoved)."""

    def lock_holder(self) -> int | None:
        """None when nobody holds the ticket's lock, else the holder's pid (-1 if unknown).
        Only a probe, which takes nothing: a run takes the lock for real and may be refused."""
