"""The ticket lock: an exclusive flock(2) on `<ticket>/.lock`, the `.lock.owner` file that
names its holder, and the sweep of temp files that only a crashed writer leaves behind.
TicketStore.lock puts these together and journals what the sweep removed."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock, Timeout

from tf_fsm._atomic import atomic_write_text
from tf_fsm._redacted_json import redacted_json
from tf_fsm.errors import TicketLockedError
from tf_fsm.journal import timestamp
from tf_fsm.redact import Redactor


@contextmanager
def hold_lock(
    lock_path: Path,
    owner_path: Path,
    ticket_id: str,
    pid_note: str | None,
    redactor: Redactor,
) -> Iterator[None]:
    """Hold the exclusive lock on `lock_path` (its directory is created), or raise
    TicketLockedError at once. `owner_path` names this process while it holds it.

    flock(2) through filelock: the kernel drops the lock when the holder's process dies,
    however it dies, so a lock is never stale. `.lock` itself stays on disk (filelock
    neither deletes nor truncates it on Unix)."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    # fallback_to_soft=False: on a filesystem without flock, fail loudly rather than
    # silently use a marker-file lock that a crash would leave behind.
    file_lock = FileLock(lock_path, timeout=0, fallback_to_soft=False, preserve_lock_file=True)
    try:
        file_lock.acquire()
    except Timeout:
        raise TicketLockedError(ticket_id, holder_pid(owner_path), lock_path) from None
    try:
        owner = {
            "pid": os.getpid(),
            "hostname": socket.gethostname(),
            "startedAt": timestamp(datetime.now(UTC)),
            "note": pid_note,
        }
        # Not fsynced: it describes this process only, and after a crash the kernel has
        # already dropped the lock it names (ralph_worker.lock_holder reads it only while held).
        atomic_write_text(owner_path, redacted_json(owner, redactor), durable=False)
        yield
    finally:
        # Removed while still locked, so a later owner file always names a live holder or
        # one that died (whose lock the kernel has already released).
        with suppress(FileNotFoundError):
            owner_path.unlink()
        file_lock.release()


def sweep_temp_files(directory: Path, lock_name: str) -> list[str]:
    """Remove `.<name>.<random>.tmp` files under `directory` and return their relative paths,
    sorted. Only with the lock held: then no live writer owns one, so each is the leftover of
    a process killed mid-write."""
    stale = sorted(p for p in directory.rglob(".*.tmp") if p.is_file() and p.name != lock_name)
    for path in stale:
        with suppress(FileNotFoundError):
            path.unlink()
    return [str(p.relative_to(directory)) for p in stale]


def holder_pid(owner_path: Path) -> int | None:
    """The pid `owner_path` names, None if it is missing or unreadable."""
    try:
        pid = json.loads(owner_path.read_text(encoding="utf-8")).get("pid")
    except (OSError, ValueError, AttributeError):
        return None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) else None
