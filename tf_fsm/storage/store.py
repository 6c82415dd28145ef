"""The only code that touches a ticket's files: `<knowledge>/tickets/<ticket-id>/`.

Rules kept here: a ticket id is validated before it becomes a path; every file is replaced
atomically (temp file in the same directory, rename), so no reader ever sees a torn one; a
file that cannot be trusted raises CorruptStateError and is never rewritten behind the user's
back; reads never write; everything written is redacted first.

The journal (`events.jsonl`) is the commit point: it is the only file fsynced while a run
works, once per phase. Every other file is a view written without fsync: `retry-state.json`
and `chain-context.json` have their after-image journaled (ViewSaved) just before they are
written, and every file a phase writes has its sha256 journaled with the phase's completion
(`take_written`). When the run's `batch()` ends, everything is made durable at once (one
syncfs) and ViewsSynced is appended; a run that finds the journal ending otherwise
(`repair_views`) rewrites the views from their images, and the resume re-runs any phase whose
files no longer match (tf_fsm.core.resume). docs/retry-state.md states the guarantee.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tf_fsm.core.journal import (
    Event,
    RetryStateReset,
    StaleTempFilesRemoved,
    ViewsChecked,
    ViewsSynced,
    timestamp,
)
from tf_fsm.core.journal_codec import JournalRead
from tf_fsm.core.resume import Seen
from tf_fsm.core.state import RetryState

# The atomic writes are re-exported: the rest of tf_fsm writes through the store's module.
from tf_fsm.fs.atomic import atomic_write_bytes as atomic_write_bytes
from tf_fsm.fs.atomic import atomic_write_json as atomic_write_json
from tf_fsm.fs.atomic import atomic_write_text as atomic_write_text
from tf_fsm.fs.atomic import disk_errors, fsync_dir, json_text, one_sync, sync_filesystems
from tf_fsm.fs.atomic import make_dirs as make_dirs
from tf_fsm.fs.confine import check_within
from tf_fsm.fs.read import read_bytes, read_with_mtime
from tf_fsm.storage import retry_file
from tf_fsm.storage.journal_file import JournalFile, journal_tail, now_stamp, running_phase_in
from tf_fsm.storage.journal_lines import complete_lines, journal_data, rebuilt_views
from tf_fsm.storage.layout import CHAIN_CONTEXT, JOURNAL, LOCK, LOCK_OWNER, RETRY_STATE
from tf_fsm.storage.lock import hold_lock, lock_holder, owner_note, sweep_temp_files
from tf_fsm.storage.protocol import Capabilities
from tf_fsm.storage.redact import Redactor
from tf_fsm.storage.redacted_json import redacted_line, redacted_lines
from tf_fsm.storage.retry_file import backup_name, parse_retry_state, peek_state
from tf_fsm.storage.ticket_files import TicketFiles

# Ticket ids are re-exported too: callers validate ids through the store's module.
from tf_fsm.storage.ticket_id import MAX_TICKET_ID_LENGTH as MAX_TICKET_ID_LENGTH
from tf_fsm.storage.ticket_id import TICKET_ID_RE as TICKET_ID_RE
from tf_fsm.storage.ticket_id import validate_ticket_id as validate_ticket_id
from tf_fsm.storage.views import VIEWS, crashed, differs, last_images, view_image


class TicketStore:
    """All files of one ticket. Build one per command; hold `lock()` while changing anything."""

    capabilities = Capabilities(shared_across_processes=True, pi_ticketflow_files=True)

    def __init__(
        self, knowledge_dir: Path, ticket_id: str, redactor: Redactor | None = None
    ) -> None:
        self.ticket_id = validate_ticket_id(ticket_id)  # before any path is built from it
        self.knowledge_dir = Path(knowledge_dir)
        self.dir = self.knowledge_dir / "tickets" / self.ticket_id
        self.retry_state_path = self.dir / RETRY_STATE
        self.journal_path = self.dir / JOURNAL
        self.chain_context_path = self.dir / CHAIN_CONTEXT
        self.lock_path = self.dir / LOCK
        self.lock_owner_path = self.dir / LOCK_OWNER
        #: what no write may be led out of by a symlink (tf_fsm.fs.confine); the knowledge
        #: directory itself was checked against the project when it was found (config)
        self.within = self.knowledge_dir
        # Default: known patterns plus this process's secret-looking environment values.
        self.redactor = redactor if redactor is not None else Redactor.from_environ(os.environ)
        self._trusted = False  # retry-state.json was read or written fine by this store
        self._batching = False
        self._unsynced_dirs: set[Path] = set()  # made for the journal, entry not yet durable
        self._journal = JournalFile(self.journal_path, self.within, self.ticket_id, self.redactor)
        self._written: dict[str, str] = {}  # name -> sha256 since the last take_written
        self._imaged: set[str] = set()  # views whose after-image this store made durable
        self._changed = False  # this batch wrote something: its end is a durable point
        self._on_durable: Callable[[], None] | None = None  # the batch caller's durable point
        self._deferred: dict[str, str] | None = None  # views waiting for `deferred_views`' end
        self._deferred_first = False  # one of them is its view's first image: fsync first
        #: the exchange area agents work in: the ticket directory itself
        self.files = TicketFiles(
            self.dir,
            self.within,
            self.redactor,
            (self.journal_path, self.lock_path),
            self._written_by_take,
        )

    def _written_by_take(self) -> None:
        self._changed = True

    # --- the durable point -----------------------------------------------------------------

    @contextmanager
    def batch(self, on_durable: Callable[[], None] | None = None) -> Iterator[None]:
        """A run: the journal stays open, appends marked `durable=False` wait for the next
        fsynced one, and when the block ends everything written is made durable (the ticket
        directory's file system, with what `on_durable` syncs: the tk ticket's directory) and
        ViewsSynced is appended."""
        self._batching, self._changed, self._on_durable = True, False, on_durable
        self._journal.hold()
        try:
            yield
        finally:
            self._batching = False
            try:
                self.sync()
            finally:
                self._journal.release()
                self._on_durable = None

    def sync(self) -> None:
        """The end of a run: `durable_point`, then ViewsSynced marks the clean end. The mark is
        not fsynced itself: should a crash take it, the next run only checks the views again."""
        if not self._changed:
            self.sync_journal()
            return
        self.durable_point()
        synced = ViewsSynced(ts=now_stamp(), ticket=self.ticket_id)
        self._journal.append(redacted_line(synced, self.redactor), durable=False)
        self._journal.unsynced = False

    def durable_point(self) -> None:
        """Make every write so far durable: one syncfs per file system (the ticket
        directory's and those the batch's caller syncs), which covers the journal too."""
        self._sync_dirs()
        with one_sync():
            sync_filesystems([self.dir])
            if self._on_durable is not None:
                self._on_durable()
        self._journal.unsynced = self._changed = False

    def sync_journal(self) -> None:
        """fsync the journal now if an append is waiting for it: before a write outside the
        store (the tk file) that must never be on disk ahead of what the journal says."""
        self._sync_dirs()
        self._journal.fsync()

    @contextmanager
    def deferred_views(self) -> Iterator[None]:
        """`save_view`'s rule (a view on disk has a durable image) for one fsync in all."""
        self._deferred, self._deferred_first = {}, False  # first: a view's first image here
        try:
            yield
        finally:
            pending, self._deferred = self._deferred, None
            if self._deferred_first:  # an image that must be durable before its view
                self.sync_journal()
            for name, text in pending.items():
                self._write_view(name, text)

    def _sync_dirs(self) -> None:
        for directory in sorted(self._unsynced_dirs):
            fsync_dir(directory)
        self._unsynced_dirs.clear()

    # --- artifacts ------------------------------------------------------------------------

    def write_artifact(self, name: str, text: str, only_if_changed: bool = False) -> None:
        """Write an artifact, redacted and atomically, not fsynced: its sha256 goes into the
        journal with the phase's completion (`take_written`). `only_if_changed` leaves an
        identical file (and its mtime) alone."""
        path = self.files.unchecked(name)  # its links are checked by the write itself
        data = self.redactor(text).encode("utf-8")
        if only_if_changed:
            with suppress(FileNotFoundError):
                if read_bytes(path) == data:
                    self._written[name] = hashlib.sha256(data).hexdigest()
                    return
        atomic_write_bytes(path, data, within=self.dir, durable=False)
        self._written[name] = hashlib.sha256(data).hexdigest()
        self._changed = True

    def take_written(self) -> dict[str, str]:
        """The files `write_artifact` wrote since the last call (name under the ticket
        directory -> sha256), forgotten here: what a phase's completion journals."""
        written, self._written = self._written, {}
        return written

    def seen(self, name: str) -> Seen | None:
        """An artifact's sha256 and mtime, for deciding where a resume picks up."""
        try:
            data, mtime = read_with_mtime(self.files.path(name))
        except FileNotFoundError:
            return None
        return Seen(hashlib.sha256(data).hexdigest(), mtime)

    def read_artifact(self, name: str) -> str | None:
        try:
            data = read_bytes(self.files.path(name))
        except FileNotFoundError:
            return None
        return data.decode("utf-8", errors="replace")

    # --- retry state ----------------------------------------------------------------------

    def load_retry_state(self) -> RetryState | None:
        """The ticket's retry state, None if it has none. Read-only, whatever it finds."""
        try:
            raw = self.retry_state_path.read_bytes()
        except FileNotFoundError:
            self._trusted = True  # nothing there to protect
            return None
        state = parse_retry_state(raw, self.retry_state_path, self.ticket_id)
        self._trusted = True
        return state

    def peek_retry_state(self) -> dict[str, Any] | None:
        try:
            return peek_state(self.retry_state_path.read_bytes())
        except OSError:
            return None

    def save_retry_state(self, state: RetryState) -> None:
        """Replace the retry state (a view: its image journaled first). A file already there
        that cannot be trusted is not overwritten (CorruptStateError): only
        `reset_retry_state` may set it aside."""
        if state.ticketId != self.ticket_id:
            raise ValueError(
                f"state of {state.ticketId!r} given to the store of {self.ticket_id!r}"
            )
        if not self._trusted:  # a file this store already read or wrote needs no re-check
            self.load_retry_state()
        self.save_view(self.retry_state_path.name, state.to_json_dict())
        self._trusted = True

    def save_view(self, name: str, content: dict[str, Any]) -> None:
        """Journal `content` (redacted) as the after-image of view `name`, then write the
        file from it. The first image a store saves of each view is fsynced before the file
        is written: a view on disk then always has an image a crash cannot take away."""
        image, text = view_image(name, content, self.redactor, self.ticket_id, now_stamp())
        first = name not in self._imaged
        self.append_event(image, durable=first and self._deferred is None)
        self._imaged.add(name)
        if self._deferred is None:
            self._write_view(name, text)
        else:  # written at the block's end, after the fsync a first image needs
            self._deferred[name], self._deferred_first = text, self._deferred_first or first

    def _write_view(self, name: str, text: str) -> None:
        atomic_write_text(self.dir / name, text, within=self.within, durable=False)
        self._changed = True

    def repair_views(self, events: list[Event]) -> list[str]:
        """After a crash (`events`, the journal, does not end with ViewsSynced): rewrite every
        view that is missing, empty, torn or not its last journaled image, and journal the
        check (ViewsChecked). Returns the names rewritten; nothing is done after a clean end."""
        if not crashed(events):
            return []
        repaired = []
        for name, content in last_images(events).items():
            if content is not None and differs(self.dir / name, content):
                self._write_view(name, json_text(content))
                repaired.append(name)
        self._imaged.update(repaired)  # their images were durable: the journal had them
        checked = ViewsChecked(ts=now_stamp(), ticket=self.ticket_id, repaired=repaired)
        self.append_event(checked, durable=False)
        return repaired

    def retry_backup_name(self, now: datetime) -> str:
        """What `reset_retry_state` at `now` names the backup: `.bak.<UTC stamp>`, with `.1`,
        `.2`, ... when that name is taken."""
        return backup_name(now, lambda name: (self.dir / name).exists())

    def reset_retry_state(self, now: datetime) -> str | None:
        """Move the retry state (valid or corrupt) aside as `retry-state.json.bak.<stamp>` so the
        next run starts at attempt 1. Returns the backup's name, None if there was no file."""
        try:
            raw = self.retry_state_path.read_bytes()
        except FileNotFoundError:
            return None
        count = retry_file.retry_count_before(raw, self.retry_state_path, self.ticket_id)
        # Callers hold the ticket lock, so nobody else creates a backup between check and rename.
        backup = self.dir / self.retry_backup_name(now)
        check_within(backup, self.within)
        with disk_errors(self.retry_state_path, f"move aside to {backup.name}"):
            self.retry_state_path.rename(backup)
            fsync_dir(self.dir)
        reset = RetryStateReset(
            ts=timestamp(now), ticket=self.ticket_id, backup=backup.name, retryCountBefore=count
        )
        self.append_event(reset)
        return backup.name

    # --- journal --------------------------------------------------------------------------

    def append_event(self, event: Event, durable: bool = True) -> None:
        self.append_events([event], durable)

    def append_events(self, events: list[Event], durable: bool = True) -> None:
        """Append events, redacted, in one write and one fsync. A torn tail left by a crashed
        append is cut off first and recorded as a JournalTailDropped event, never dropped
        silently. Inside `batch()`, `durable=False` writes at once (so `status` sees it) and
        leaves the fsync to the next durable append or the batch's end."""
        if not events:
            return
        durable = durable or not self._batching
        for event in events:
            if event.ticket != self.ticket_id:
                raise ValueError(
                    f"event of {event.ticket!r} given to the store of {self.ticket_id!r}"
                )
        line, redacted = redacted_lines(events, self.redactor)
        # Lines the redactor left alone read back as these very events: the cache keeps them.
        if self._journal.append(line, durable, None if redacted else events):
            # The new file's entry (and its directory's, if new) is durable with it.
            self._unsynced_dirs.update((self.dir, self.dir.parent))
        if durable:
            self._sync_dirs()
        self._changed = True

    def read_events(self) -> JournalRead:
        return self._journal.read()

    def replace_journal(self, lines: Sequence[str]) -> list[str]:
        data, events = journal_data(lines, self.ticket_id, self.redactor, self.journal_path)
        if data:
            atomic_write_bytes(self.journal_path, data, within=self.within)
        else:
            with disk_errors(self.journal_path, "remove"), suppress(FileNotFoundError):
                self.journal_path.unlink()
        for name, text in rebuilt_views(events).items():
            if text is not None:
                atomic_write_text(self.dir / name, text, within=self.within)
            else:
                with disk_errors(self.dir / name, "remove"), suppress(FileNotFoundError):
                    (self.dir / name).unlink()
        self._trusted, self._imaged = False, set()
        return list(VIEWS)

    def journal_lines(self) -> list[str]:
        try:
            return complete_lines(self.journal_path.read_bytes())
        except FileNotFoundError:
            return []

    def journal_size(self) -> int | None:
        try:
            return self.journal_path.stat().st_size
        except OSError:
            return None

    def running_phase(self, attempt: int) -> str | None:
        return running_phase_in(journal_tail(self.journal_path), attempt)

    # --- lock -----------------------------------------------------------------------------

    @contextmanager
    def lock(self, note: str | None = None, *, loop: str | None = None) -> Iterator[None]:
        """Hold the ticket's exclusive lock, or raise TicketLockedError at once.

        Kernel locks dropped when the holder dies, so never stale, and not lost when `.lock` is
        deleted (see `tf_fsm.storage.lock`); the holder is described in `.lock.owner`. Once held,
        temp files left by a writer killed mid-write are removed, and journaled."""
        with hold_lock(self.dir, self.within, self.ticket_id, self.redactor, note=note, loop=loop):
            stale = sweep_temp_files(self.dir)
            if stale:
                self.append_event(
                    StaleTempFilesRemoved(
                        ts=now_stamp(),
                        ticket=self.ticket_id,
                        attempt=None,
                        files=stale,
                    )
                )
            yield

    def lock_holder(self) -> int | None:
        holder = lock_holder(self.dir)
        return holder or None

    def lock_loop(self) -> str | None:
        if not self.lock_holder():
            return None
        loop = owner_note(self.dir).get("loop")
        return loop if isinstance(loop, str) else None


if TYPE_CHECKING:
    from tf_fsm.storage.protocol import Store

    def _is_a_store(store: TicketStore) -> Store:
        """Never called: mypy checks here that TicketStore has every member of `Store`."""
        return store
