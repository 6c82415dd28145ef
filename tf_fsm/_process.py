"""The one function through which tf_fsm starts a subprocess.

Each child leads its own process group, so a timeout (or Ctrl-C) ends everything it started,
not just the direct child. On Linux each child also dies with tf_fsm (the parent-death
signal), so an orphaned agent never writes into a ticket another run has resumed.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import os
import select
import selectors
import shutil
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from io import IOBase
from pathlib import Path

KILL_GRACE_SECONDS = 2.0
#: how much text beyond a tail's cut is redacted with it (a PEM private key fits in it)
TAIL_REDACT_MARGIN = 8192
_PIPE_BUF = getattr(select, "PIPE_BUF", 512)  # a write this size never blocks
_CHUNK = 64 * 1024
_LINE_SLACK = 64 * 1024  # how far back a kept head or tail looks for a line end to cut at
_PR_SET_PDEATHSIG = 1


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up once in the parent: the child, between fork and exec, then
    only calls it (importing ctypes there cost milliseconds per agent)."""
    try:
        import ctypes

        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
        return prctl
    except (OSError, AttributeError):  # not Linux: the process group timeout still applies
        return None


def _die_with_parent() -> None:
    """In the child, before exec: if tf_fsm is killed (even SIGKILL), take the child down too."""
    prctl = _prctl()
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@functools.cache
def _setpriv() -> str | None:
    """util-linux's `setpriv`, if it sets the parent-death signal (2.33 and later). It sets
    the signal and execs the command, so Python starts the child with vfork; a `preexec_fn`
    makes it fork the whole interpreter (3-4 ms more per agent) and is unsafe in a process
    with threads, such as `tf-fsm watch`. Probed once per process."""
    found = shutil.which("setpriv")
    if found is None:
        return None
    try:
        probe = subprocess.run(
            [found, "--pdeathsig", "KILL", "--", found, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return found if probe.returncode == 0 else None


def find_program(name: str, cwd: Path, env: Mapping[str, str] | None) -> str:
    """The file `name` runs, found as Popen would find it (the child's PATH, or relative to
    `cwd`), or the FileNotFoundError Popen would raise: `setpriv` is what execs it."""
    if os.sep in name:
        path = cwd / name
        if path.is_file():
            if not os.access(path, os.X_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), name)
            return str(path)
    else:
        search = (env if env is not None else os.environ).get("PATH", os.defpath)
        found = shutil.which(name, path=search)
        if found is not None:
            return str(cwd / found)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)


def _with_parent_death(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str] | None
) -> tuple[list[str], Callable[[], None] | None]:
    """The argv to start, and the preexec_fn if one is needed, so the child dies with us."""
    if sys.platform != "linux" or not argv:
        return list(argv), None
    setpriv = _setpriv()
    if setpriv is not None:
        program = find_program(argv[0], cwd, env)
        return [setpriv, "--pdeathsig", "KILL", "--", program, *argv[1:]], None
    if _prctl() is not None:
        return list(argv), _die_with_parent
    return list(argv), None  # no prctl: the process group timeout still applies


def parent_death() -> str:
    """How the processes tf_fsm starts are tied to its life, in words (`tf-fsm doctor`)."""
    if sys.platform != "linux":
        return "agents are ended by their process group at a timeout or Ctrl-C (not Linux)"
    if (found := _setpriv()) is not None:
        return f"agents die with tf_fsm (parent-death signal set by {found})"
    if _prctl() is not None:
        return (
            "agents die with tf_fsm (parent-death signal set by a hook before exec; "
            "util-linux setpriv 2.33+ on PATH would save a few ms per agent)"
        )
    return "agents are ended by their process group at a timeout or Ctrl-C (no prctl)"


@dataclass(frozen=True)
class ProcessResult:
    argv: tuple[str, ...]
    exit_code: int | None  # None when it was killed at its timeout
    timed_out: bool
    duration: float
    stdout: str
    stderr: str


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_SECONDS), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        if grace is None:
            return
        try:
            proc.wait(timeout=grace)
            # The leader is gone; make sure nothing it spawned lingers in the group.
            os.killpg(proc.pid, signal.SIGKILL)
        except (subprocess.TimeoutExpired, ProcessLookupError, PermissionError):
            continue
        return


class _Capture:
    """One output stream as it is read: all of it, or with `keep`, only its first and last
    `keep` bytes (memory stays bounded however much the process prints)."""

    def __init__(self, keep: int | None) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail: deque[bytes] = deque()
        self.tail_size = 0
        self.total = 0

    def add(self, data: bytes) -> None:
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


def _pump(
    proc: subprocess.Popen[bytes], data: bytes, streams: dict[int, _Capture], deadline: float | None
) -> None:
    """Feed `data` to stdin and read stdout and stderr until both are closed, as `communicate`
    does, but into bounded captures. TimeoutExpired at the deadline."""
    with selectors.DefaultSelector() as sel:
        if proc.stdin is not None and not proc.stdin.closed:
            if data:
                sel.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                _close(proc.stdin)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None and not stream.closed:
                sel.register(stream, selectors.EVENT_READ, streams[stream.fileno()])
        view, offset = memoryview(data), 0
        while sel.get_map():
            wait = None if deadline is None else deadline - time.monotonic()
            if wait is not None and wait <= 0:
                raise subprocess.TimeoutExpired(proc.args, 0)
            for key, _ in sel.select(wait):
                if key.data is None:  # stdin
                    try:
                        offset += os.write(key.fd, view[offset : offset + _PIPE_BUF])
                    except BrokenPipeError:  # it stopped reading: the rest is not wanted
                        offset = len(view)
                    if offset < len(view):
                        continue
                elif chunk := os.read(key.fd, _CHUNK):
                    key.data.add(chunk)
                    continue
                sel.unregister(key.fileobj)
                _close(key.fileobj)


def _close(stream: object) -> None:
    if isinstance(stream, IOBase):
        with contextlib.suppress(BrokenPipeError):
            stream.close()


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float | None = None,
    keep: int | None = None,
) -> ProcessResult:
    """Run `argv` (no shell), feed `stdin`, capture both streams, kill the group on timeout.
    With `keep`, only the first and last `keep` bytes of each stream are kept (cut at line
    ends where possible), and a note where the middle was says how many bytes were dropped."""
    started = time.monotonic()
    command, preexec = _with_parent_death(argv, cwd, env)
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=preexec,
    )
    data = stdin.encode() if stdin is not None else b""
    out, err = _Capture(keep), _Capture(keep)
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}  # type: ignore[union-attr]
    deadline = None if timeout is None else started + timeout
    timed_out = False
    try:
        _pump(proc, data, streams, deadline)
        proc.wait(None if deadline is None else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        _pump(proc, b"", streams, None)
        proc.wait()
    except BaseException:  # Ctrl-C: take the agent down with us, then let the caller see it
        _kill_group(proc)
        _pump(proc, b"", streams, None)
        proc.wait()
        raise
    return ProcessResult(
        argv=tuple(argv),
        exit_code=None if timed_out else proc.returncode,
        timed_out=timed_out,
        duration=time.monotonic() - started,
        stdout=out.text(),
        stderr=err.text(),
    )


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
