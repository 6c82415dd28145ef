"""The journal file (`events.jsonl`) on disk: repairing the torn tail a crashed append leaves,
and the CorruptStateError for a line that cannot be trusted. TicketStore does the appending
and reading; tf_fsm.core.journal owns the events and their encoding."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from tf_fsm.core.journal import JournalTailDropped, timestamp
from tf_fsm.core.journal_codec import JournalLineError, decode
from tf_fsm.errors import CorruptStateError
from tf_fsm.storage.redact import Redactor
from tf_fsm.storage.redacted_json import redacted_line

_PREVIEW_CHARS = 80
_TAIL_CHUNK = 64 * 1024


def corrupt_journal(journal_path: Path, problem: str) -> CorruptStateError:
    remedy = "fix or delete that line by hand; tf-fsm never rewrites the journal"
    return CorruptStateError(journal_path, problem, remedy=remedy)


def repair_tail(fd: int, journal_path: Path, ticket_id: str, redactor: Redactor) -> bytes:
    """Bytes to write before the next line so that it starts on a line of its own: nothing,
    a newline (the last event only lacked it), or a JournalTailDropped line after the torn
    bytes have been truncated away. `fd` is the journal, open for reading and appending."""
    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return b""
    start = _last_line_start(fd, size)
    tail = os.pread(fd, size - start, start)
    # Judged exactly as read_events judges it: complete JSON that is not a valid event is
    # corruption, and corruption is reported, not cut away.
    try:
        torn = decode(tail).torn_tail
    except JournalLineError as exc:
        raise corrupt_journal(journal_path, f"last line: {exc.problem}") from exc
    if torn is None:
        return b"\n"
    os.ftruncate(fd, start)
    os.fsync(fd)
    preview = redactor(tail.decode("utf-8", errors="replace"))[:_PREVIEW_CHARS]
    dropped = JournalTailDropped(
        ts=timestamp(datetime.now(UTC)),
        ticket=ticket_id,
        bytes=len(tail),
        preview=preview,
    )
    return redacted_line(dropped, redactor)


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
