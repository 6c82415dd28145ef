"""Processes that an agent (or a gate command) leaves behind, found and ended.

Every process tf_fsm starts gets `TF_FSM_OWNER=<pid>.<start>.<n>` in its environment: the
starting tf_fsm process (its pid and start time, so a reused pid is told apart) and which of
its children it is. Whatever that child starts inherits the mark, also when it leaves the
child's process group or session (`setsid`, a daemon's double fork). So a process that
carries a mark is provably tf_fsm's own, and nothing else is ever ended here.

* A child's leftovers are ended when it ends (`end_marked`, from tf_fsm.process.door).
* A run that was killed (SIGKILL, a power cut) leaves its leftovers orphaned: the next run,
  loop or watch ends every marked process whose owner is no longer alive (`end_orphans`).

Linux only (it reads /proc); elsewhere both find nothing, and the process group kill at a
child's end is what remains. A process that clears its environment and leaves its group is
not found: that is the limit of this rule.
"""

from __future__ import annotations

import functools
import itertools
import os
import signal
import time
from collections.abc import Callable, Container, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

OWNER_ENV = "TF_FSM_OWNER"
_KEY = OWNER_ENV.encode() + b"="
_PROC = Path("/proc")
_SEQUENCE = itertools.count(1)
#: how long ended processes get to exit before the next signal (or giving up)
GRACE_SECONDS = 2.0


def start_ticks(pid: int) -> int | None:
    """When `pid` started, in clock ticks since boot (/proc/<pid>/stat field 22); None when
    there is no such process. Its pid and start time name a process for good."""
    try:
        stat = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    fields = stat.rsplit(b")", 1)[-1].split()  # the command name may hold spaces
    return int(fields[19]) if len(fields) > 19 else None


@functools.cache
def _self_ticks(pid: int) -> int:
    # Keyed on the pid: a forked worker is another process, with another start time.
    return start_ticks(pid) or 0


def new_mark() -> str:
    """The mark for the next child this process starts."""
    return f"{process_mark()}.{next(_SEQUENCE)}"


@dataclass(frozen=True)
class Marked:
    pid: int
    mark: str
    command: str

    def owner_alive(self) -> bool:
        return mark_alive(self.mark.rsplit(".", 1)[0])


def _marked() -> Iterator[Marked]:
    """Every live process (but this one) whose environment carries a mark."""
    me = str(os.getpid())
    try:
        entries = [entry.name for entry in _PROC.iterdir()]
    except OSError:
        return
    for name in entries:
        if not name.isdigit() or name == me:
            continue
        mark = _mark_of(name)
        if mark is not None:
            yield Marked(int(name), mark, _command(name))


def _mark_of(pid: str) -> str | None:
    try:
        environ = (_PROC / pid / "environ").read_bytes()
    except OSError:  # gone, or not ours to read
        return None
    if environ.startswith(_KEY):
        start = 0
    elif (start := environ.find(b"\0" + _KEY) + 1) == 0:  # a variable, not text in a value
        return None
    value = environ[start + len(_KEY) :].split(b"\0", 1)[0].decode("ascii", "replace")
    return value if value.count(".") == 2 else None


def is_git(pid: int | str) -> bool:
    """Is process `pid` a `git` (its command name in /proc)? Plain system calls: asked of
    every process on the machine before a worktree is made or removed."""
    try:
        fd = os.open(f"/proc/{pid}/comm", os.O_RDONLY)
    except OSError:  # gone, or not ours to look at
        return False
    try:
        return os.read(fd, 64) == b"git\n"
    except OSError:
        return False
    finally:
        os.close(fd)


def _command(pid: str) -> str:
    try:
        argv = (_PROC / pid / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    return b" ".join(a for a in argv if a).decode("utf-8", "replace")[:120] or "?"


def end_marked(mark: str) -> list[Marked]:
    """End every process that carries exactly `mark` (what one child left behind)."""
    return _end(lambda m: m.mark == mark)


def end_orphans() -> str | None:
    """End every marked process whose owner is no longer alive: what a killed tf_fsm run
    left behind. Returns what to tell the user, None when there was nothing."""
    ended = _end(lambda m: not m.owner_alive())
    return f"ended processes a killed tf-fsm run left running: {describe(ended)}" if ended else None


def _end(chosen: Callable[[Marked], bool]) -> list[Marked]:
    found = [m for m in _marked() if chosen(m)]
    targets = [_Target(m) for m in found]
    try:
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for target in targets:
                # git is killed at once, never asked to stop (tf_fsm.workspace.git.Git.run)
                target.send(signal.SIGKILL if target.git else sig)
            deadline = time.monotonic() + GRACE_SECONDS
            while time.monotonic() < deadline and any(t.running() for t in targets):
                time.sleep(0.02)
    finally:
        for target in targets:
            target.close()
    return found


class _Target:
    """One marked process to end. Signals go through a pidfd taken while its mark was
    confirmed, so they never reach a later process that reuses the pid; without pidfds (old
    kernels) the mark is checked again before each signal."""

    def __init__(self, marked: Marked) -> None:
        self.marked: Marked | None = marked
        self.fd: int | None = None
        self.git = is_git(marked.pid)
        with suppress(AttributeError, OSError):
            self.fd = os.pidfd_open(marked.pid)
        if not self._same():  # it ended (and its pid may be reused) before the pidfd
            self.close()
            self.marked = None

    def _same(self) -> bool:
        return self.marked is not None and _mark_of(str(self.marked.pid)) == self.marked.mark

    def running(self) -> bool:
        return self.marked is not None and _running(self.marked.pid)

    def send(self, sig: int) -> None:
        if self.marked is None or not _running(self.marked.pid):
            return
        with suppress(ProcessLookupError, PermissionError):
            if self.fd is not None:
                signal.pidfd_send_signal(self.fd, sig)
            elif self._same():
                os.kill(self.marked.pid, sig)

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _running(pid: int) -> bool:
    """Alive and not a zombie (a zombie waits only for its parent to reap it)."""
    try:
        stat = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return False
    return stat.rsplit(b")", 1)[-1].split()[:1] not in ([b"Z"], [b"X"])


def describe(ended: list[Marked]) -> str:
    """One line naming what was ended: `pid (command)`, a few of them."""
    shown = ", ".join(f"{m.pid} ({m.command})" for m in ended[:5])
    more = f" and {len(ended) - 5} more" if len(ended) > 5 else ""
    return f"{shown}{more}"


#: marks of children that have ended in this process, whose leftovers `end_finished` ends
_FINISHED: set[str] = set()


def finished(mark: str) -> None:
    _FINISHED.add(mark)


def end_finished() -> list[Marked]:
    """End what the children this process started, and that have ended, left running: called
    when a run ends. Costs nothing when no child was started."""
    marks = set(_FINISHED)
    _FINISHED.difference_update(marks)
    return _end(lambda m: m.mark in marks) if marks else []


def process_mark(pid: int | None = None) -> str:
    """`<pid>.<start time>`: a process named for good (this one by default)."""
    pid = os.getpid() if pid is None else pid
    return f"{pid}.{_self_ticks(pid) if pid == os.getpid() else start_ticks(pid) or 0}"


def mark_alive(mark: str) -> bool:
    """Whether the process a `process_mark` names is still running."""
    pid, _, ticks = mark.partition(".")
    return pid.isdigit() and ticks.isdigit() and start_ticks(int(pid)) == int(ticks)


def signal_child_groups(sig: int, spare: Container[int] = ()) -> int:
    """Send `sig` to the process group of each child of this process but those in `spare`
    (each child tf_fsm starts leads a session of its own, so a Ctrl-C at the terminal never
    reaches it); how many. Linux only. (tf_fsm.process.door.signal_children also reaches the
    children the launcher started.)"""
    sent = 0
    for stat in _PROC.glob("[0-9]*/stat"):
        with suppress(OSError, ValueError, IndexError):
            pid = int(stat.parent.name)
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if parent == os.getpid() and pid not in spare:
                os.killpg(pid, sig)
                sent += 1
    return sent
