"""The ticket lock: one process runs a ticket at a time, and the lock cannot be lost by
deleting a file.

Two locks, both dropped by the kernel when their holder dies, however it dies, so a lock is
never stale:

* an exclusive flock(2) on `<ticket>/.lock` (opened without following a symlink);
* on Linux, an abstract-namespace Unix socket named after the ticket directory's real path. It
  is not a file: deleting `.lock`, its directory, or the whole knowledge directory (`git
  clean`, an agent, a person) while a run holds the lock does not let a second run in.

`.lock.owner` names the holder while it holds the lock. The sweep of temp files that only a
crashed writer leaves behind runs under the lock (TicketStore.lock journals what it removed).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path

from tf_fsm._json_input import load_json
from tf_fsm.core.journal import timestamp
from tf_fsm.errors import TicketLockedError
from tf_fsm.fs.atomic import atomic_write_text, make_dirs, open_no_follow
from tf_fsm.storage.redact import Redactor
from tf_fsm.storage.redacted_json import redacted_json

_ABSTRACT = sys.platform == "linux"


def _socket_name(ticket_dir: Path) -> bytes:
    """The abstract socket's name: the ticket directory's real path, hashed (the same
    directory reached by another path gets the same name)."""
    digest = hashlib.sha256(os.fsencode(os.path.realpath(ticket_dir))).hexdigest()
    return b"\0tf-fsm/ticket-lock/" + digest.encode()


def _bind(ticket_dir: Path) -> socket.socket | None:
    """The bound socket, None when another process holds the name."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        sock.bind(_socket_name(ticket_dir))
    except OSError:
        sock.close()
        return None
    return sock


def _flock(lock_path: Path, within: Path) -> int | None:
    """The locked descriptor of `lock_path`, None when another process holds it."""
    fd = open_no_follow(lock_path, os.O_RDWR | os.O_CREAT, within=within, operation="lock")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


@contextmanager
def hold_lock(
    ticket_dir: Path,
    within: Path,
    ticket_id: str,
    redactor: Redactor,
    *,
    note: str | None = None,
    loop: str | None = None,
) -> Iterator[None]:
    """Hold the ticket's lock (its directory is created), or raise TicketLockedError at once.
    `.lock.owner` names this process, with `note`, and `loop` when it is a backlog loop's
    worker (the loop's `<pid>.<start time>`, so a later loop can tell one orphaned)."""
    lock_path, owner_path = ticket_dir / ".lock", ticket_dir / ".lock.owner"
    make_dirs(ticket_dir, within=within)
    sock = _bind(ticket_dir) if _ABSTRACT else None
    if _ABSTRACT and sock is None:
        raise TicketLockedError(ticket_id, holder_pid(ticket_dir), lock_path)
    with contextlib.ExitStack() as held:
        if sock is not None:
            held.callback(sock.close)
        fd = _flock(lock_path, within)
        if fd is None:
            raise TicketLockedError(ticket_id, holder_pid(ticket_dir), lock_path)
        held.callback(os.close, fd)  # closing the descriptor drops the flock
        owner = {
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            "startedAt": timestamp(datetime.now(UTC)),
            "note": note,
            "loop": loop,
        }
        # Not fsynced: it describes this process only, and after a crash the kernel has
        # already dropped the lock it names.
        text = redacted_json(owner, redactor)
        atomic_write_text(owner_path, text, within=within, durable=False)
        try:
            yield
        finally:
            # Removed while still locked, so an owner file always names a live holder or one
            # that died (whose lock the kernel has already released).
            with suppress(FileNotFoundError):
                owner_path.unlink()


def lock_holder(ticket_dir: Path) -> int:
    """0 when nobody holds the ticket's lock, else the holder's pid (-1 if unknown). Only a
    probe, which takes nothing: a run takes the lock for real and may still be refused."""
    if not _held(ticket_dir):
        return 0
    pid = holder_pid(ticket_dir)
    return pid if pid is not None else -1


def _held(ticket_dir: Path) -> bool:
    if _ABSTRACT:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as probe:
            try:
                probe.connect(_socket_name(ticket_dir))
            except OSError:  # ECONNREFUSED: nobody has the name bound
                return False
            return True
    try:
        fd = os.open(ticket_dir / ".lock", os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # a reader's probe takes it for an instant
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def owner_note(ticket_dir: Path) -> dict[str, object]:
    """`.lock.owner` as written by `hold_lock`; {} when it is missing or unreadable."""
    try:
        owner = load_json((ticket_dir / ".lock.owner").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return owner if isinstance(owner, dict) else {}


def holder_pid(ticket_dir: Path) -> int | None:
    """The pid of the lock's holder: what `.lock.owner` names, else (on Linux, the note deleted
    along with `.lock`) the process that has the lock's socket open. None if unknown."""
    pid = owner_note(ticket_dir).get("pid")
    if isinstance(pid, int) and not isinstance(pid, bool):
        return pid
    return _socket_owner(ticket_dir) if _ABSTRACT else None


def _socket_link(ticket_dir: Path) -> Path | None:
    """What a descriptor of the lock's abstract socket links to in /proc (`socket:[inode]`),
    None when nobody has the name bound."""
    wanted = "@" + _socket_name(ticket_dir)[1:].decode()
    try:
        lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    except OSError:
        return None
    inode = next((f[6] for f in map(str.split, lines) if len(f) > 7 and f[7] == wanted), None)
    return None if inode is None else Path(f"socket:[{inode}]")


def _has_open(pid: int, link: Path) -> bool:
    with suppress(OSError):
        return any(_link(fd) == link for fd in Path(f"/proc/{pid}/fd").iterdir())
    return False


def _socket_owner(ticket_dir: Path) -> int | None:
    """The pid with the lock's abstract socket open, from /proc (read only when the owner note
    is gone: it reads every process's descriptors)."""
    link = _socket_link(ticket_dir)
    if link is None:
        return None
    for process in Path("/proc").iterdir():
        if process.name.isdigit() and _has_open(int(process.name), link):
            return int(process.name)
    return None


def holds_lock(ticket_dir: Path, pid: int) -> bool:
    """Whether process `pid` holds the ticket's lock now: on Linux, it has the lock's socket
    open (the note could name a pid since reused); elsewhere, the lock is held and its owner
    note names `pid` on this host."""
    if pid <= 0:
        return False
    if _ABSTRACT:
        link = _socket_link(ticket_dir)
        return link is not None and _has_open(pid, link)
    note = owner_note(ticket_dir)
    here = note.get("hostname") == socket.gethostname()
    return _held(ticket_dir) and note.get("pid") == pid and here


def _link(fd: Path) -> Path | None:
    try:
        return fd.readlink()
    except OSError:
        return None


def sweep_temp_files(directory: Path) -> list[str]:
    """Remove `.<name>.<random>.tmp` files under `directory` and return their relative paths,
    sorted. Only with the lock held: then no live writer owns one, so each is the leftover of
    a process killed mid-write."""
    stale = sorted(p for p in directory.rglob(".*.tmp") if p.is_file())
    for path in stale:
        with suppress(FileNotFoundError):
            path.unlink()
    return [str(p.relative_to(directory)) for p in stale]
