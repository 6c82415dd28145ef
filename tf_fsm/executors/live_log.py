"""An agent's output on disk while it runs: `logs/attempt-<n>/<phase>-<role>.live.log`, for
people (and the web board) to follow an invocation that may take an hour.

Only redacted text reaches the file. Each stream is kept apart until its lines are whole, and
a batch of whole lines is redacted before it is written, so a secret printed in pieces (or cut
by the other stream's output in between) is recognised whole. The one pattern that spans lines,
a PEM private key, is held back from its BEGIN line until its END line arrives. A line longer
than 64 KiB is written in part before it ends, cut where redacting the two sides apart gives
what redacting them together gives, at least TAIL_REDACT_MARGIN before the end of what came.

The file is a view, not state: the invocation's whole log is written by the engine when it
ends, and this file is removed then. So nothing here is fsynced, and a disk that refuses a
write stops the live log (the reason goes into the invocation's log), never the agent.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from tf_fsm.errors import TfFsmError
from tf_fsm.fs.atomic import disk_errors, make_dirs, open_no_follow, write_all
from tf_fsm.fs.confine import check_within
from tf_fsm.process.output import TAIL_REDACT_MARGIN

#: a partial line longer than this is written before its end arrives
LINE_LIMIT = 64 * 1024
_CUT_TRIES = 8  # blanks tried as the cut of a long line before the plain byte cut
_BLANK = re.compile(rb"[ \t\r\n,;]")
_PEM_BEGIN = re.compile(rb"-----BEGIN[A-Z0-9 ]*PRIVATE KEY")
_PEM_END = b"-----END"


class LiveLog:
    """A context manager: `write` the agent's output as it comes; on exit the rest is
    written and the file removed. `stopped` says why the file stopped being written, if it
    did (a disk error, a symlink at its path), for the invocation's log."""

    def __init__(self, path: Path, *, within: Path, redact: Callable[[str], str]) -> None:
        self.path, self.within, self.redact = path, within, redact
        self.stopped: str | None = None
        self._pending: dict[str, bytearray] = {}  # stream -> what is not written yet
        self._fd: int | None = None

    def __enter__(self) -> LiveLog:
        self._remove()  # a killed run's, lest it pass for this run's until the agent speaks
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def write(self, chunk: bytes, stream: str = "stdout") -> None:
        """Take `chunk` of `stream`; write the whole lines it completes, redacted."""
        if self.stopped is not None:
            return
        pending = self._pending.setdefault(stream, bytearray())
        pending += chunk
        if cut := _whole_lines(pending):
            self._append(self._taken(pending, cut))
        if len(pending) > LINE_LIMIT and self.stopped is None:
            self._append_long(pending)

    def close(self) -> None:
        """Write what is left of each stream, close the file and remove it."""
        for pending in list(self._pending.values()):  # a failed write empties the dict
            if pending and self.stopped is None:
                self._append(self._taken(pending, len(pending)))
        self._pending.clear()
        self._close_file()
        self._remove()

    def _taken(self, pending: bytearray, cut: int) -> str:
        """The first `cut` bytes of `pending`, decoded and redacted, taken out of it."""
        text = pending[:cut].decode("utf-8", errors="replace")
        del pending[:cut]
        return self.redact(text)

    def _append_long(self, pending: bytearray) -> None:
        """Write most of a partial line that has grown past LINE_LIMIT."""
        whole = self.redact(pending.decode("utf-8", errors="replace"))
        for cut in _long_line_cuts(pending):
            head = self.redact(pending[:cut].decode("utf-8", errors="replace"))
            if head + self.redact(pending[cut:].decode("utf-8", errors="replace")) == whole:
                del pending[:cut]
                self._append(head)
                return
        # No cut that every secret keeps clear of: one longer than the margin, or many. The
        # whole of it then, redacted as it stands.
        pending.clear()
        self._append(whole)

    def _append(self, text: str) -> None:
        if self.stopped is not None or not text:
            return
        try:
            if self._fd is None:
                self._fd = self._open()
            with disk_errors(self.path, "write"):
                # Not fsynced: a view for people; the engine writes the log that is kept.
                write_all(self._fd, text.encode("utf-8"))
        except (OSError, TfFsmError) as exc:
            self._stop(exc, "write")

    def _open(self) -> int:
        """The file, created on the first output, never through a symlink; truncated, should
        one have come back since it was removed."""
        make_dirs(self.path.parent, within=self.within)
        flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
        return open_no_follow(self.path, flags, within=self.within, operation="write")

    def _stop(self, exc: OSError | TfFsmError, operation: str) -> None:
        if self.stopped is None:
            if isinstance(exc, TfFsmError):
                self.stopped = exc.message
            else:
                self.stopped = f"cannot {operation} {self.path}: {exc.strerror or exc}"
        self._pending.clear()
        self._close_file()

    def _close_file(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.close(fd)
            except OSError as exc:
                self._stop(exc, "close")

    def _remove(self) -> None:
        """Remove the file at the path if it is a plain file (a link or a directory someone
        put there is left as it is), not through a symlink out of the boundary."""
        try:
            if not stat.S_ISREG(os.lstat(self.path).st_mode):
                return
            check_within(self.path, self.within)
            with disk_errors(self.path, "remove"):
                self.path.unlink()
        except FileNotFoundError:
            return
        except (OSError, TfFsmError) as exc:
            self._stop(exc, "remove")


def _whole_lines(pending: bytearray) -> int:
    """How many bytes of `pending` end a line and may be written: up to the last newline,
    but not from the line of a private key's BEGIN whose END has not come yet (the key is
    redacted whole). A BEGIN more than TAIL_REDACT_MARGIN back is no key held any longer."""
    end = pending.rfind(b"\n") + 1
    if not end:
        return 0
    begin = None
    for match in _PEM_BEGIN.finditer(pending, max(0, end - TAIL_REDACT_MARGIN), end):
        begin = match.start()
    if begin is not None and pending.find(_PEM_END, begin, end) < 0:
        end = pending.rfind(b"\n", 0, begin) + 1
    return end


def _long_line_cuts(pending: bytearray) -> Iterator[int]:
    """Where a long partial line may be cut, best first: after the last few blanks at least
    TAIL_REDACT_MARGIN before its end, then at that point itself (on a UTF-8 boundary)."""
    limit = len(pending) - TAIL_REDACT_MARGIN
    blanks = [match.end() for match in _BLANK.finditer(pending, 0, limit)]
    yield from reversed(blanks[-_CUT_TRIES:])
    while limit > 0 and pending[limit] & 0xC0 == 0x80:  # inside a UTF-8 character
        limit -= 1
    if limit > 0:
        yield limit
