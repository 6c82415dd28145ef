"""A child's output as tf_fsm keeps it: bounded captures of its streams, and the redacted tail
that error reports quote."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

#: how much text beyond a tail's cut is redacted with it (a PEM private key fits in it)
TAIL_REDACT_MARGIN = 8192
_LINE_SLACK = 64 * 1024  # how far back a kept head or tail looks for a line end to cut at

#: told each chunk a child prints as it is read: (the bytes, "stdout" or "stderr")
OnOutput = Callable[[bytes, str], None]


class Capture:
    """One output stream as it is read: all of it, or with `keep`, only its first and last
    `keep` bytes (memory stays bounded however much the process prints). Each chunk is also
    handed to `on_output` as it arrives, with the stream's name, before any of it is dropped."""

    def __init__(self, keep: int | None, name: str = "", on_output: OnOutput | None = None) -> None:
        self.keep = keep
        self.name = name
        self.on_output = on_output
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.total = 0

    def add(self, data: bytes) -> None:
        if self.on_output is not None:
            self.on_output(data, self.name)
        self.total += len(data)
        if self.keep is None:
            self.head += data
            return
        room = self.keep - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail.append(data)
            self.tail_size += len(data)
            while self.tail and self.tail_size - len(self.tail[0]) >= self.keep:
                self.tail_size -= len(self.tail.popleft())

    def text(self) -> str:
        head, tail = bytes(self.head), b"".join(self.tail)
        if self.keep is None or self.total <= 2 * self.keep:
            return (head + tail).decode("utf-8", errors="replace")
        tail = tail[-self.keep :]
        # Cut at line ends where there is one near, so that no line (nor a secret on it) is
        # kept in part, where redaction could no longer recognise it.
        end = head.rfind(b"\n", max(0, len(head) - _LINE_SLACK)) + 1
        head = head[:end] if end else head
        start = tail.find(b"\n", 0, _LINE_SLACK) + 1
        tail = tail[start:]
        dropped = self.total - len(head) - len(tail)
        note = (
            f"\n[... tf-fsm: {dropped} bytes of output dropped here: only the first and last "
            f"{self.keep} bytes of a stream are kept ...]\n"
        )
        return head.decode("utf-8", errors="replace") + note + tail.decode("utf-8", "replace")


def tail(
    text: str, lines: int = 20, limit: int = 2000, redact: Callable[[str], str] | None = None
) -> str:
    """The last lines of a stream, bounded, for one-line error reports.

    With `redact`, a margin beyond the cut is redacted first, then cut: a secret that straddles
    the cut is recognised whole and never shows up in part. (Cutting first, then redacting,
    leaves the end of such a secret unrecognisable.)"""
    if lines <= 0 or limit <= 0:
        return ""
    text = text.rstrip()
    if redact is not None:
        text = _redacted_end(text, 2 * limit, redact)  # `\r\n` becomes `\n`: 2 * limit
    kept = "\n".join(text.splitlines()[-lines:])
    return kept[-limit:]


def _redacted_end(text: str, size: int, redact: Callable[[str], str]) -> str:
    """At least the last `size` characters of `text` (fewer if it is shorter), redacted. A
    window TAIL_REDACT_MARGIN longer is redacted, then that many characters are dropped from
    its start again: a secret cut by the window's start lies in them, however much redaction
    shortened the text after it. A window that redaction shortened is widened, and redone."""
    want = size
    for _ in range(4):
        window = text[-(want + TAIL_REDACT_MARGIN) :]
        if len(window) == len(text):
            return redact(text)
        clean = redact(window)[TAIL_REDACT_MARGIN:]
        if len(clean) >= size:
            break
        want += size - len(clean)
    return clean
