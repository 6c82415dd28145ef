"""The launcher: the process that starts tf_fsm's children and ends them when tf_fsm ends.

It runs as `python -I -S _launch_server.py FD`, a child of the tf_fsm process it serves,
in a session of its own (so a Ctrl-C meant for tf_fsm does not end it first), with only the
standard library's smallest modules: it starts in a few milliseconds and imports nothing
of tf_fsm's. FD is its end of a SOCK_SEQPACKET pair; tf_fsm holds the other end.

Why a process of its own: a child that tf_fsm starts with the parent-death signal set by an
extra `setpriv` exec costs that exec, and is orphaned anyway when tf_fsm is killed between
the fork and the moment the signal is set. Here every start and every end goes through one
single-threaded loop: a start asked for by a tf_fsm that is then killed is read before the
end of its socket, so the child it started is ended with the rest.

The protocol, one message each (tf_fsm.process.launcher is the other side):

* on the control socket, `I` and then `cwd NUL program NUL n NUL argv[0..n) NUL env...`
  (`KEY=value` each) with four file descriptors: the child's own socket, then its stdin,
  stdout and stderr; or `F` with a fifth descriptor, a file holding that request (one too
  big for a message: a long command line). The child is
  started (`posix_spawn`, a session of its own); its socket gets `P<pid>` and a pidfd, or
  `E<errno>` when it could not be started.
* on a child's socket, from tf_fsm, `K<signal>`: sent to the child's process group while
  the child has not been reaped (so never to a group id reused by someone else).
* when the child exits, its group is killed (what it left running), it is reaped, and its
  socket gets `X<exit code>` (minus the signal number when a signal ended it), then closed.
* the end of the control socket (tf_fsm exited, however): every child's group is killed,
  every child reaped, and the launcher exits.
"""

# The smallest modules only (no `signal`, `array` or `contextlib`: their imports of enum and
# collections cost more than the rest of the launcher's start)
import _signal  # type: ignore[import-not-found]  # typeshed has no stub for it
import _socket
import _struct
import os
import select
import sys

_FDS = 5
_INT = _struct.calcsize("i")
# what Python and the launcher ignore and a child must not (an ignored signal is inherited)
_RESET = (_signal.SIGPIPE, _signal.SIGXFSZ, _signal.SIGINT, _signal.SIGTERM)


class Child:
    def __init__(self, pid: int, reply: "_socket.socket") -> None:
        self.pid, self.reply = pid, reply
        self.pidfd = os.pidfd_open(pid)

    def signal_group(self, sig: int) -> None:
        try:  # noqa: SIM105 - contextlib's import would cost the launcher's start
            os.killpg(self.pid, sig)
        except OSError:  # the group is gone already
            pass

    def reap(self) -> None:
        """Kill what the child left in its group, reap it, and tell tf_fsm its exit code."""
        self.signal_group(_signal.SIGKILL)
        _pid, status = os.waitpid(self.pid, 0)
        os.close(self.pidfd)
        try:  # noqa: SIM105 - as above
            self.reply.send(b"X%d" % os.waitstatus_to_exitcode(status))
        except OSError:  # tf_fsm stopped listening for this child
            pass
        self.reply.close()


def received_fds(ancillary: list[tuple[int, int, bytes]]) -> list[int]:
    fds: list[int] = []
    for level, kind, data in ancillary:
        if level == _socket.SOL_SOCKET and kind == _socket.SCM_RIGHTS:
            count = len(data) // _INT
            fds += _struct.unpack(f"{count}i", data[: count * _INT])
    return fds


def read_whole(fd: int) -> bytes:
    parts: list[bytes] = []
    while chunk := os.pread(fd, 1 << 20, sum(len(part) for part in parts)):
        parts.append(chunk)
    os.close(fd)
    return b"".join(parts)


def start(message: bytes, fds: list[int]) -> "Child | None":
    """Start the child a request asks for; None when it could not be (its socket says why)."""
    reply = _socket.socket(fileno=fds[0])
    if message[:1] == b"F":
        message = b"I" + read_whole(fds.pop())
    cwd, program, count, *rest = message[1:].split(b"\0")
    argv, env = rest[: int(count)], rest[int(count) :]
    try:
        os.chdir(cwd)
        pid = os.posix_spawn(
            program,
            argv,
            dict(item.split(b"=", 1) for item in env),
            file_actions=[(os.POSIX_SPAWN_DUP2, fd, n) for n, fd in enumerate(fds[1:4])],
            setsid=True,
            setsigdef=_RESET,
        )
    except OSError as error:
        reply.send(b"E%d" % (error.errno or 0))
        reply.close()
        return None
    finally:
        for fd in fds[1:]:
            os.close(fd)
    child = Child(pid, reply)
    rights = _struct.pack("i", child.pidfd)
    try:  # noqa: SIM105 - as above
        reply.sendmsg([b"P%d" % pid], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, rights)])
    except OSError:  # tf_fsm is gone already: the end of its line is next, and ends the child
        pass
    return child


def serve(control: "_socket.socket") -> None:
    poll = select.poll()
    poll.register(control.fileno(), select.POLLIN)
    by_fd: dict[int, Child] = {}
    while True:
        for fd, _event in poll.poll():
            if fd == control.fileno():
                message, ancillary, _flags, _ = control.recvmsg(
                    1 << 20, _socket.CMSG_SPACE(_FDS * _INT), _socket.MSG_CMSG_CLOEXEC
                )
                if not message:  # tf_fsm is gone: so is everything it started
                    for child in {id(c): c for c in by_fd.values()}.values():
                        child.reap()
                    return
                started = start(message, received_fds(ancillary))
                if started is not None:
                    for watched in (started.pidfd, started.reply.fileno()):
                        by_fd[watched] = started
                        poll.register(watched, select.POLLIN)
                continue
            child = by_fd[fd]
            if fd == child.reply.fileno():
                asked = child.reply.recv(64)
                if asked.startswith(b"K"):
                    child.signal_group(int(asked[1:]))
                    continue
                # tf_fsm closed the child's socket: it gave the child up, which reap ends
            for watched in (child.pidfd, child.reply.fileno()):
                poll.unregister(watched)
                del by_fd[watched]
            child.reap()


if __name__ == "__main__":
    # tf_fsm decides when its children end: a SIGINT or SIGTERM meant for tf_fsm's children or
    # for what a run left (`end_marked` ends the launcher with its owner) must not end the
    # launcher before it has ended them; its line's end does, and SIGKILL
    _signal.signal(_signal.SIGINT, _signal.SIG_IGN)
    _signal.signal(_signal.SIGTERM, _signal.SIG_IGN)
    os.set_inheritable(int(sys.argv[1]), False)  # no child of ours holds tf_fsm's line
    serve(_socket.socket(fileno=int(sys.argv[1])))
