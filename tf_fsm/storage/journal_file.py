"""The journal file (`events.jsonl`) on disk: appending (with the repair of the torn tail a
crashed append leaves), reading back through a cache, and the CorruptStateError for a line
that cannot be trusted. tf_fsm.core.journal owns the events and their encoding; TicketStore
decides what is appended and when it is fsynced.

During a run (the store's `batch()`) the file stays open and its events stay in memory: a
phase's appends are one `write` each, and reading the journal back decodes only what another
writer added since (the cache is checked against the file's inode, size and mtime).
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from tf_fsm._json_input import load_json
from tf_fsm.core.journal import Event, JournalTailDropped, timestamp
from tf_fsm.core.journal_codec import JournalLineError, JournalRead, decode
from tf_fsm.errors import CorruptStateError
from tf_fsm.fs.atomic import disk_errors, make_dirs, open_no_follow, write_all
from tf_fsm.storage.redact import Redactor
from tf_fsm.storage.redacted_json import redacted_line

_PREVIEW_CHARS = 80
_TAIL_CHUNK = 64 * 1024
_Key = tuple[int, int, int]  # inode, size, mtime: the file the cached events were read from


def corrupt_journal(journal_path: Path, problem: str) -> CorruptStateError:
    remedy = "fix or delete that line by hand; tf-fsm never rewrites the journal"
    return CorruptStateError(journal_path, problem, remedy=remedy)


class JournalFile:
    """One ticket's journal. `hold()` keeps it open until `release()`; `unsynced` says an
    append was written but not yet fsynced."""

    def __init__(self, path: Path, within: Path, ticket_id: str, redactor: Redactor) -> None:
        self.path, self.within = path, within
        self.ticket_id, self.redactor = ticket_id, redactor
        self.unsynced = False
        self._fd: int | None = None
        self._ino = 0  # the inode `_fd` is open on
        self._holding = False
        self._tail_checked = False  # our own appends since the tail was checked end in "\n"
        self._cache: tuple[_Key, list[Event]] | None = None

    def hold(self) -> None:
        self._holding = True

    def release(self) -> None:
        self._holding = False
        self._close()

    def _close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._tail_checked = None, False

    def append(self, data: bytes, durable: bool, events: list[Event] | None = None) -> bool:
        """Write `data` (whole lines) at the end, fsynced if `durable`; True when this call
        created the file (its directory entry is then not yet durable). `events`: what the
        lines read back as, when the caller knows (else they are decoded for the cache)."""
        fd, created = self._open()
        try:
            with disk_errors(self.path, "append to"):
                repair = b"" if self._tail_checked else self._repair_tail(fd)
                write_all(fd, repair + data)
                self._tail_checked = True
                if durable:
                    os.fsync(fd)
        except BaseException:
            self._close()  # the tail is checked again by the next append
            self._cache = None
            raise
        self.unsynced = not durable
        self._cached_append(fd, data, events, repaired=bool(repair))
        if not self._holding:
            self._close()
        return created

    def fsync(self) -> None:
        if not self.unsynced:
            return
        if self._fd is not None:
            os.fsync(self._fd)
        else:
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self.unsynced = False

    def _open(self) -> tuple[int, bool]:
        """The file open for reading and appending, and whether this call created it. The
        ticket directory was checked against the boundary when it was made or locked (a run
        holds the lock): each open only needs the file itself not to be a link."""
        if self._fd is not None:
            if self._still_named():
                return self._fd, False
            self._close()  # deleted or replaced behind the run's back: append to the new one
        path, flags, created = self.path, os.O_RDWR | os.O_APPEND, False
        try:
            fd = open_no_follow(path, flags, within=path.parent, operation="append to")
        except FileNotFoundError:
            make_dirs(path.parent, within=self.within)
            flags, created = flags | os.O_CREAT, True
            fd = open_no_follow(path, flags, within=path.parent, operation="create")
        self._fd, self._ino = fd, os.fstat(fd).st_ino
        return fd, created

    def _still_named(self) -> bool:
        try:
            return os.lstat(self.path).st_ino == self._ino
        except FileNotFoundError:
            return False

    def _repair_tail(self, fd: int) -> bytes:
        return repair_tail(fd, self.path, self.ticket_id, self.redactor)

    # --- reading ----------------------------------------------------------------------------

    def read(self) -> JournalRead:
        if self._cache is not None:  # the usual case in a run: one stat says it is current
            try:
                st = self.path.stat()
            except FileNotFoundError:
                return JournalRead([], None)
            if (st.st_ino, st.st_size, st.st_mtime_ns) == self._cache[0]:
                return JournalRead(list(self._cache[1]), None)
        try:
            with self.path.open("rb") as file:
                st = os.fstat(file.fileno())
                key = (st.st_ino, st.st_size, st.st_mtime_ns)
                if self._cache is not None and self._cache[0] == key:
                    return JournalRead(list(self._cache[1]), None)
                data = file.read()
        except FileNotFoundError:
            return JournalRead([], None)
        read = self._decode(data)
        self._cache = (key, read.events) if read.torn_tail is None else None
        return JournalRead(list(read.events), read.torn_tail)

    def _decode(self, data: bytes) -> JournalRead:
        try:
            return decode(data)
        except JournalLineError as exc:
            problem = f"line {exc.line_number}: {exc.problem}"
            raise corrupt_journal(self.path, problem) from exc

    def _cached_append(self, fd: int, data: bytes, new: list[Event] | None, repaired: bool) -> None:
        """Keep the cache in step with what was just appended: the lines decoded again (the
        cache must be what a reader of the file would get), or dropped when the append cut a
        torn tail first."""
        if self._cache is None or repaired:
            self._cache = None
            return
        before, events = self._cache
        st = os.fstat(fd)
        if (st.st_ino, before[1] + len(data)) != (before[0], st.st_size):
            self._cache = None  # someone else wrote meanwhile: read it all again
            return
        events.extend(new if new is not None else self._decode(data).events)
        self._cache = ((st.st_ino, st.st_size, st.st_mtime_ns), events)


def repair_tail(fd: int, journal_path: Path, ticket_id: str, redactor: Redactor) -> bytes:
    """Bytes to write before the next line so that it starts on a line of its own: nothing,
    a newline (the last event only lacked it), or a JournalTailDropped line after the torn
    bytes have been truncated away. `fd` is the journal, open for reading and appending."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return b""
    start = _last_line_start(fd, size)
    tail = os.pread(fd, size - start, start)
    try:
        dropped = torn_tail_line(tail, ticket_id, redactor)
    except JournalLineError as exc:
        raise corrupt_journal(journal_path, f"last line: {exc.problem}") from exc
    if dropped is None:
        return b"\n"
    os.ftruncate(fd, start)
    os.fsync(fd)
    return dropped


def torn_tail_line(tail: bytes, ticket_id: str, redactor: Redactor) -> bytes | None:
    """A journal's last line without its newline, judged exactly as read_events judges it
    (every store's rule): None when it is a complete event that only lacks the newline; else
    the JournalTailDropped line (redacted) that takes the place of the torn bytes, which the
    caller cuts away. JournalLineError when it is complete JSON that is not a valid event:
    corruption is reported, never cut away."""
    if decode(tail).torn_tail is None:
        return None
    preview = redactor(tail.decode("utf-8", errors="replace"))[:_PREVIEW_CHARS]
    dropped = JournalTailDropped(ts=now_stamp(), ticket=ticket_id, bytes=len(tail), preview=preview)
    return redacted_line(dropped, redactor)


def now_stamp() -> str:
    """The journal's timestamp of this moment (a store's own events: ViewSaved, ViewsSynced,
    ViewsChecked, JournalTailDropped)."""
    return timestamp(datetime.now(UTC))


def _last_line_start(fd: int, size: int) -> int:
    """Offset just after the last newline before `size` (0 if there is none)."""
    end = size
    while end > 0:
        start = max(0, end - _TAIL_CHUNK)
        chunk = os.pread(fd, end - start, start)
        newline = chunk.rfind(b"\n")
        if newline != -1:
            return start + newline + 1
        end = start
    return 0


#: how much of a journal's end the loop reads to find the running phase (a phase's events are
#: a few hundred bytes; an attempt's start is never far behind its latest phase)
JOURNAL_TAIL_BYTES = 16 * 1024


def running_phase_in(tail: bytes, attempt: int) -> str | None:
    """The phase attempt `attempt` last started, from the end of a journal, as plain JSON (each
    phase start is written to the journal the moment it begins; the retry state only records
    where an attempt stopped). None when none is found."""
    for line in reversed(tail.splitlines()):
        if b'"PhaseStarted"' not in line:
            continue
        try:
            event = load_json(line.decode("utf-8"))
        except ValueError:
            continue  # the first, cut line of the tail, or a torn last one
        if isinstance(event, dict) and event.get("attempt") == attempt:
            phase = event.get("phase")
            return phase if isinstance(phase, str) else None
    return None


def journal_tail(path: Path) -> bytes:
    """The last JOURNAL_TAIL_BYTES of the journal at `path` (b"" when it cannot be read)."""
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - JOURNAL_TAIL_BYTES))
            return f.read()
    except OSError:
        return b""
