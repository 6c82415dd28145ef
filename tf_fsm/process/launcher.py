"""tf_fsm's side of the launcher (tf_fsm/process/_launch_server.py, whose docstring has the
protocol): one small process per tf_fsm process, started at its first child, that starts
every child the door asks for and ends them all when tf_fsm ends, however it ends.

A child started this way costs about what a plain `posix_spawn` costs, where one whose
parent-death signal `setpriv` sets costs an extra exec; and no child escapes that end, not
even one asked for in the instant tf_fsm is killed (docs/executors.md, "Agents die with
tf_fsm"). Linux with pidfds only; elsewhere `launcher()` is None and the door starts children
itself.
"""

from __future__ import annotations

import array
import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import weakref
from collections.abc import Iterator, Mapping, Sequence
from io import FileIO
from pathlib import Path

from tf_fsm.process.strays import end_marked

_SERVER = Path(__file__).with_name("_launch_server.py")
#: a request bigger than this goes in a memory file, not in the message (a socket's buffer
#: bounds a message; a command line may be up to the system's ARG_MAX)
_INLINE = 64 * 1024


class LaunchedChild:
    """A child the launcher started: what the door needs of a `subprocess.Popen`."""

    def __init__(self, args: Sequence[str], pid: int, pidfd: int, line: socket.socket) -> None:
        self.args, self.pid, self.exit_fd, self.line = list(args), pid, pidfd, line
        self.returncode: int | None = None
        self.stdin: FileIO | None = None
        self.stdout: FileIO | None = None
        self.stderr: FileIO | None = None
        self.mark = ""

    def wait(self, timeout: float | None = None) -> int:
        """Its exit code (minus the signal that ended it), once it has exited and the
        launcher has reaped it; TimeoutExpired after `timeout` seconds."""
        if self.returncode is None:
            if not select.select([self.line], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            self.hear()
        return self.returncode if self.returncode is not None else -signal.SIGKILL

    def hear(self) -> None:
        """Read what the launcher said on the child's line, once it is readable: the child's
        exit code, or the line's end, when the launcher died (killed from outside) before
        the child exited. That child is then ended here, with whatever carries its mark."""
        said = self.line.recv(64)
        _LIVE.discard(self)
        if said.startswith(b"X"):
            self.returncode = int(said[1:])
            return
        with contextlib.suppress(ProcessLookupError):
            signal.pidfd_send_signal(self.exit_fd, signal.SIGKILL)
        select.select([self.exit_fd], [], [])
        end_marked(self.mark)
        self.returncode = -signal.SIGKILL

    def signal_group(self, sig: int) -> None:
        """`sig` to the child's process group, by the launcher while the child is not reaped
        (a group id is never reused while its leader is a zombie)."""
        try:
            self.line.send(b"K%d" % sig)
        except OSError:  # the launcher is gone: the child is only reachable by its pidfd
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self.exit_fd, sig)

    def close(self) -> None:
        _LIVE.discard(self)
        self.line.close()
        os.close(self.exit_fd)


#: the children this process's launcher started and that have not been heard of since
_LIVE: weakref.WeakSet[LaunchedChild] = weakref.WeakSet()


def signal_launched(sig: int) -> int:
    """`sig` to the process group of each child the launcher started for this process that
    has not ended (through the launcher, which never signals a reaped child's group); how
    many. They are the launcher's children, not this process's: `signal_child_groups` alone
    reaches only the launcher."""
    children = list(_LIVE)
    for child in children:
        child.signal_group(sig)
    return len(children)


class Launcher:
    """The launcher process and tf_fsm's line to it (one per process; threads share it)."""

    def __init__(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            self.server = subprocess.Popen(
                [sys.executable, "-I", "-S", str(_SERVER), str(theirs.fileno())],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.control, self.owner = ours, os.getpid()

    def alive(self) -> bool:
        return self.owner == os.getpid() and self.server.poll() is None

    def spawn(
        self,
        program: str,
        argv: Sequence[str],
        *,
        cwd: Path,
        env: Mapping[str, str],
        stdio: tuple[int, int, int],
    ) -> LaunchedChild:
        """Start `program` (a path) with `argv` in `cwd`, its stdin, stdout and stderr the
        descriptors `stdio`; OSError as Popen raises it when it cannot be started."""
        request = b"\0".join(
            [
                os.fsencode(cwd),
                os.fsencode(program),
                b"%d" % len(argv),
                *map(os.fsencode, argv),
                *(os.fsencode(f"{k}={v}") for k, v in env.items()),
            ]
        )
        line, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            fds = [theirs.fileno(), *stdio]
            if len(request) < _INLINE:
                self.control.sendmsg([b"I" + request], [_rights(fds)])
            else:
                with _memory_file(request) as held:
                    self.control.sendmsg([b"F"], [_rights([*fds, held])])
        said, ancillary, _flags, _ = line.recvmsg(64, socket.CMSG_SPACE(array.array("i").itemsize))
        if said.startswith(b"P"):
            pidfd = array.array("i", ancillary[0][2])[0]
            child = LaunchedChild(argv, int(said[1:]), pidfd, line)
            _LIVE.add(child)
            return child
        line.close()
        if said.startswith(b"E"):
            code = int(said[1:])
            name = program if code != 2 or Path(cwd).is_dir() else str(cwd)
            raise OSError(code, os.strerror(code), name)
        raise ConnectionError("tf_fsm's launcher ended before it started the process")


def _rights(fds: Sequence[int]) -> tuple[int, int, bytes]:
    return (socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds).tobytes())


@contextlib.contextmanager
def _memory_file(data: bytes) -> Iterator[int]:
    fd = os.memfd_create("tf-fsm-request", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        yield fd
    finally:
        os.close(fd)


_LOCK = threading.Lock()
_CURRENT: list[Launcher] = []


def available() -> bool:
    """Can this system run the launcher (Linux, pidfds, posix_spawn with setsid)?"""
    return sys.platform == "linux" and hasattr(os, "pidfd_open") and hasattr(os, "memfd_create")


def _forget_in_child() -> None:
    """A process forked without exec (the loop's fork server, tk's reader) lets go of its
    parent's line to the launcher: the launcher ends the parent's children when that line
    ends, which a child holding it would put off for as long as it lives. The lock is made
    anew: another thread may have held it at the fork. The child's first start gets a
    launcher of its own."""
    global _LOCK
    _LOCK = threading.Lock()
    for held in _CURRENT:
        held.control.close()
    _CURRENT.clear()
    _LIVE.clear()  # the parent's children, not this process's to signal


os.register_at_fork(after_in_child=_forget_in_child)


def launcher_pid() -> int | None:
    """The pid of this process's launcher while it runs."""
    with _LOCK:
        return _CURRENT[0].server.pid if _CURRENT and _CURRENT[0].alive() else None


def launcher(dead: Launcher | None = None) -> Launcher | None:
    """This process's launcher, started at the first call, and again when it died (`dead`:
    one the caller found dead); None where the system cannot run one."""
    if not available():
        return None
    with _LOCK:
        if not _CURRENT or _CURRENT[0] is dead or not _CURRENT[0].alive():
            _CURRENT[:] = [Launcher()]
        return _CURRENT[0]
