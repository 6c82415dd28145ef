"""The one function through which tf_fsm starts a subprocess.

Each child leads its own process group, so a timeout (or Ctrl-C) ends everything it started,
not just the direct child. Each child also dies with tf_fsm, however tf_fsm ends (on Linux
its launcher, tf_fsm.process.launcher, ends it; elsewhere the parent-death signal,
tf_fsm.process.direct), so an orphaned agent never writes into a ticket another run has
resumed.
"""

from __future__ import annotations

import contextlib
import os
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from io import FileIO, IOBase
from pathlib import Path

from tf_fsm.process.direct import find_program as find_program  # re-exported for callers
from tf_fsm.process.direct import parent_death as parent_death
from tf_fsm.process.direct import start_process as start_process
from tf_fsm.process.direct import with_parent_death
from tf_fsm.process.launcher import LaunchedChild, Launcher, launcher, launcher_pid, signal_launched
from tf_fsm.process.output import (
    TAIL_REDACT_MARGIN as TAIL_REDACT_MARGIN,  # re-exported for callers
)
from tf_fsm.process.output import Capture, OnOutput
from tf_fsm.process.output import tail as tail
from tf_fsm.process.strays import OWNER_ENV, end_marked, finished, new_mark, signal_child_groups

#: a child as the door holds it: started by the launcher, or by the door itself
Child = subprocess.Popen[bytes] | LaunchedChild

#: how long a child stopped with SIGTERM has to end before SIGKILL (run_process's `grace`)
KILL_GRACE_SECONDS = 2.0
_PIPE_BUF = getattr(select, "PIPE_BUF", 512)  # a write this size never blocks
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class ProcessResult:
    argv: tuple[str, ...]
    exit_code: int | None  # None when it was killed at its timeout
    timed_out: bool
    duration: float
    stdout: str
    stderr: str


#: how long a child's output may stay open after the child itself has exited: whatever still
#: holds it then is a leftover of the child, and is ended
LINGER_SECONDS = 1.0


class _Leader:
    """The child itself. On Linux its exit is seen through a pidfd before it is reaped: while
    it is a zombie its process group id cannot be reused, so the group's leftovers (`cmd &`)
    are killed without any risk of reaching someone else's processes."""

    def __init__(self, proc: Child, mark: str) -> None:
        self.proc, self.mark = proc, mark
        self.fd: int | None = None
        if isinstance(proc, LaunchedChild):
            self.fd = proc.exit_fd
        else:
            with contextlib.suppress(AttributeError, OSError):
                self.fd = os.pidfd_open(proc.pid)
        self.exited_at: float | None = None
        self.swept = False

    def signal_group(self, sig: int) -> None:
        if isinstance(self.proc, LaunchedChild):
            self.proc.signal_group(sig)
        else:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, sig)

    def on_exit(self) -> None:
        """The child has exited: kill what is left of its process group (the launcher does
        that itself for the children it started, before it reaps them)."""
        if self.exited_at is None:
            self.exited_at = time.monotonic()
            if not isinstance(self.proc, LaunchedChild):
                self.signal_group(signal.SIGKILL)

    def wait_exit(self, timeout: float | None) -> bool:
        """Whether the child exited within `timeout` (reaped only where there is no pidfd)."""
        if self.exited_at is None:
            if self.fd is not None:
                if not select.select([self.fd], [], [], timeout)[0]:
                    return False
            else:
                try:
                    self.proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    return False
            self.on_exit()
        return True

    def reap(self, deadline: float | None) -> None:
        """Wait for the child to exit (TimeoutExpired at the deadline), end its group, reap it."""
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        if not self.wait_exit(remaining):
            raise subprocess.TimeoutExpired(self.proc.args, remaining or 0)
        self.proc.wait()

    def linger_until(self) -> float | None:
        """Until when its output is still read after it exited (None while it runs)."""
        if self.exited_at is None:
            return None
        return self.exited_at + LINGER_SECONDS * (2 if self.swept else 1)

    def close(self) -> None:
        if isinstance(self.proc, LaunchedChild):
            self.proc.close()
        elif self.fd is not None:
            os.close(self.fd)
        self.fd = None
        finished(self.mark)


def _kill_group(leader: _Leader, grace: float) -> None:
    """SIGTERM to the child's group; SIGKILL to it once the child exits, or after the grace
    (at once when `grace` is 0)."""
    if grace > 0:
        leader.signal_group(signal.SIGTERM)
    if grace <= 0 or not leader.wait_exit(grace):
        leader.signal_group(signal.SIGKILL)
        leader.wait_exit(None)


def _pump(
    proc: Child,
    data: bytes,
    streams: dict[int, Capture],
    deadline: float | None,
    leader: _Leader,
    wake: float | None = None,
) -> None:
    """Feed `data` to stdin and read stdout and stderr until both are closed, as `communicate`
    does, but into bounded captures. TimeoutExpired at the deadline. Once the child has
    exited, output still held open after LINGER_SECONDS is held by a leftover that left its
    group: those are ended (tf_fsm.process.strays), and after as long again the pipes are let go."""
    with selectors.DefaultSelector() as sel:
        if proc.stdin is not None and not proc.stdin.closed:
            if data:
                sel.register(proc.stdin, selectors.EVENT_WRITE)
            else:
                _close(proc.stdin)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None and not stream.closed:
                sel.register(stream, selectors.EVENT_READ, streams[stream.fileno()])
        if leader.fd is not None and leader.exited_at is None:
            sel.register(leader.fd, selectors.EVENT_READ, leader)
        if isinstance(proc, LaunchedChild) and proc.returncode is None:
            sel.register(proc.line, selectors.EVENT_READ, proc)  # the launcher's word
        view, offset = memoryview(data), 0
        while any(
            key.data is not leader and key.data is not proc for key in sel.get_map().values()
        ):
            wait = _wait(proc, deadline, leader)
            if wait is None and leader.exited_at is not None:
                _let_go(sel, leader)
                return
            if wake is not None:  # back in Python at least this often
                wait = wake if wait is None else min(wait, wake)
            for key, _ in sel.select(wait):
                if key.data is leader:
                    sel.unregister(key.fileobj)
                    leader.on_exit()
                elif key.data is proc:
                    sel.unregister(key.fileobj)
                    proc.hear()
                elif key.data is None:  # stdin
                    try:
                        offset += os.write(key.fd, view[offset : offset + _PIPE_BUF])
                    except BrokenPipeError:  # it stopped reading: the rest is not wanted
                        offset = len(view)
                    if offset >= len(view):
                        sel.unregister(key.fileobj)
                        _close(key.fileobj)
                elif chunk := os.read(key.fd, _CHUNK):
                    key.data.add(chunk)
                else:
                    sel.unregister(key.fileobj)
                    _close(key.fileobj)


def _wait(proc: Child, deadline: float | None, leader: _Leader) -> float | None:
    """How long the next select may wait; TimeoutExpired at the deadline. None with the child
    gone means the output has lingered for good."""
    now = time.monotonic()
    if deadline is not None and now >= deadline:
        raise subprocess.TimeoutExpired(proc.args, 0)
    linger = leader.linger_until()
    if linger is not None and now >= linger:
        if leader.swept:
            return None
        leader.swept = True
        end_marked(leader.mark)  # those holding the output open
        linger = leader.linger_until()
    until = min((t for t in (deadline, linger) if t is not None), default=None)
    return None if until is None else max(0.0, until - now)


def _let_go(sel: selectors.BaseSelector, leader: _Leader) -> None:
    """Stop reading output that something outside tf_fsm's reach still holds open."""
    for key in list(sel.get_map().values()):
        sel.unregister(key.fileobj)
        if key.data is not leader:
            _close(key.fileobj)


def _close(stream: object) -> None:
    if isinstance(stream, IOBase):
        with contextlib.suppress(BrokenPipeError):
            stream.close()


def _start(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str] | None, mark: str, *, feed: bool
) -> Child:
    """Start `argv` with `mark` in its environment, its output on pipes, its stdin a pipe
    when `feed`: through the launcher where there is one, else by the door itself."""
    full_env = {**(os.environ if env is None else env), OWNER_ENV: mark}
    boot = launcher() if argv else None
    if boot is None:
        command, preexec = with_parent_death(argv, cwd, env)
        return subprocess.Popen(
            command,
            cwd=cwd,
            env=full_env,
            stdin=subprocess.PIPE if feed else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=preexec,
        )
    program = find_program(argv[0], cwd, env)
    try:
        return _launched(boot, program, argv, cwd, full_env, feed)
    except ConnectionError:  # the launcher died (killed from outside): a new one, once
        end_marked(mark)  # what it may have started for us
        return _launched(launcher(dead=boot) or boot, program, argv, cwd, full_env, feed)


def _launched(
    boot: Launcher,
    program: str,
    argv: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    feed: bool,
) -> LaunchedChild:
    """`argv` started by the launcher, with pipes to it as `Popen` makes them."""
    stdin_r, stdin_w = os.pipe() if feed else (os.open(os.devnull, os.O_RDONLY), -1)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    ours = [fd for fd in (stdin_w, out_r, err_r) if fd >= 0]
    try:
        child = boot.spawn(program, argv, cwd=cwd, env=env, stdio=(stdin_r, out_w, err_w))
    except BaseException:
        for fd in ours:
            os.close(fd)
        raise
    finally:
        for fd in (stdin_r, out_w, err_w):
            os.close(fd)
    child.stdin = FileIO(stdin_w, "wb") if stdin_w >= 0 else None
    child.stdout, child.stderr = FileIO(out_r, "rb"), FileIO(err_r, "rb")
    child.mark = env[OWNER_ENV]
    return child


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float | None = None,
    keep: int | None = None,
    on_output: OnOutput | None = None,
    wake: float | None = None,
    grace: float = KILL_GRACE_SECONDS,
) -> ProcessResult:
    """Run `argv` (no shell), feed `stdin`, capture both streams, kill the group on timeout.
    With `keep`, only the first and last `keep` bytes of each stream are kept (cut at line
    ends where possible), and a note where the middle was says how many bytes were dropped.
    `on_output` gets every chunk read from stdout or stderr as it arrives, with the name of
    its stream, both streams in the order they were read (a live view of the output; what is
    captured is the same). It must not raise: an exception from it ends the child as Ctrl-C
    would. With `wake`, the wait for output returns at least every `wake` seconds, so that an
    exception raised in this thread from outside (a cancelled Temporal activity's) ends the
    child as Ctrl-C does, also while the child is silent. A child ended before its time gets
    SIGTERM and `grace` seconds to end, then SIGKILL (`grace` 0: SIGKILL at once).

    Whatever the child leaves behind when it ends (a `sleep 300 &`, a dev server) is ended
    with it: its process group at once, and processes that left the group (tf_fsm.process.strays)
    when they hold its output open, else at the end of the run."""
    started = time.monotonic()
    mark = new_mark()
    proc = _start(argv, cwd, env, mark, feed=stdin is not None)
    data = stdin.encode() if stdin is not None else b""
    out, err = Capture(keep, "stdout", on_output), Capture(keep, "stderr", on_output)
    streams = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}  # type: ignore[union-attr]
    deadline = None if timeout is None else started + timeout
    timed_out = False
    leader = _Leader(proc, mark)
    try:
        _pump(proc, data, streams, deadline, leader, wake)
        leader.reap(deadline)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(leader, grace)
        _pump(proc, b"", streams, None, leader)
        proc.wait()
    except BaseException:  # Ctrl-C: take the agent down with us, then let the caller see it
        _kill_group(leader, grace)
        _pump(proc, b"", streams, None, leader)
        proc.wait()
        raise
    finally:
        leader.close()
    return ProcessResult(
        argv=tuple(argv),
        exit_code=None if timed_out else proc.returncode,
        timed_out=timed_out,
        duration=time.monotonic() - started,
        stdout=out.text(),
        stderr=err.text(),
    )


def signal_children(sig: int) -> int:
    """`sig` to the process group of every child this process started and that runs still:
    those its launcher started, through the launcher, and any it started itself (the
    launcher, which ends its children when this process ends, is spared). For a command that
    leaves with children running (`watch`, `ui`); how many."""
    pid = launcher_pid()
    return signal_launched(sig) + signal_child_groups(sig, spare=() if pid is None else (pid,))
