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
* A file that cannot be trusted raises CorruptStateError naming it, and is never rewritten
  behind the user's back.
* Reads never write: no member documented as a read creates, changes or removes anything.
* Changes are made while holding `lock()`.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Protocol

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

    # --- grouped durability -----------------------------------------------------------------

    def batch(self) -> AbstractContextManager[None]:
        """A block in which the fsyncs that only order writes may be grouped. Every write is
        visible to reads at once; what a durable journal append or a retry-state save reports
        is on disk no later than that record; all of it is durable when the block ends."""

    def sync(self) -> None:
        """Make every write so far durable."""

    # --- artifacts --------------------------------------------------------------------------

    def artifact_path(self, name: str) -> Path:
        """The path of artifact `name`: a file name or a relative path of plain segments
        (`prompts/attempt-1/x.md`). InvalidArtifactNameError for a name that is empty, absolute,
        has `.`, `..` or hidden segments, names a file the store writes itself (retry state,
        journal, lock), or resolves (through a symlink) outside `dir`. Writes nothing."""

    def write_artifact(
        self, name: str, text: str, only_if_changed: bool = False, sync_dir: bool = True
    ) -> Path:
        """Write artifact `name` (validated as by `artifact_path`), redacted, replaced
        atomically; returns its path. UnsafePathError when a symlink would lead the write out
        of `dir`. `only_if_changed` leaves an identical file (and its mtime) alone;
        `sync_dir=False` is for copies kept for people, whose rename need not be durable."""

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
        """Replace the retry state, redacted and atomically. ValueError for another ticket's
        state. A file already there that cannot be trusted is never overwritten:
        CorruptStateError (only `reset_retry_state` may set it aside)."""

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
