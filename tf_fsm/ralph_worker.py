"""The worker side of the backlog loop (`tf-fsm run ID --ralph`), and the loop's cheap probes
of one ticket's files (lock, retry-state) that never build a ticket model."""

from __future__ import annotations

import fcntl
import json
import os
import signal
from pathlib import Path
from types import FrameType
from typing import Any

from tf_fsm.store import TicketStore


def install_worker_sigint() -> None:
    """The first SIGINT (or SIGTERM) interrupts the run (the attempt stays resumable); later
    ones are ignored, so the Ctrl-C the terminal sends and the one the loop forwards do not cut
    the clean-up (agent process group, lock) short."""
    fired = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal fired
        if not fired:
            fired = True
            raise KeyboardInterrupt

    signal.signal(signal.SIGINT, handler)
    signal.signal(signal.SIGTERM, handler)


def lock_holder(store: TicketStore) -> int:
    """0 when nobody holds the ticket's lock, else the holder's pid (-1 if unknown). Only a
    probe: the worker takes the lock for real and may still be refused (exit 75)."""
    try:
        fd = os.open(store.lock_path, os.O_RDONLY)
    except FileNotFoundError:
        return 0
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        try:
            pid = json.loads(store.lock_owner_path.read_text(encoding="utf-8")).get("pid")
        except (OSError, ValueError, AttributeError):
            pid = None
        return pid if isinstance(pid, int) else -1
    finally:
        os.close(fd)  # closing drops the probe's own lock
    return 0


def read_state_json(path: Path) -> dict[str, Any] | None:
    """retry-state.json as plain JSON, for views (phase, counts); None if absent or unreadable."""
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def open_attempt(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """The last attempt when it is in progress (the plain-JSON view of it)."""
    attempts = data.get("attempts") if data else None
    last = attempts[-1] if isinstance(attempts, list) and attempts else None
    return last if isinstance(last, dict) and last.get("status") == "in_progress" else None


#: how much of a journal's end the loop reads to find the running phase (a phase's events are
#: a few hundred bytes; an attempt's start is never far behind its latest phase)
JOURNAL_TAIL_BYTES = 16 * 1024


def running_phase(journal: Path, attempt: int) -> str | None:
    """The phase attempt `attempt` last started, from the end of the journal, as plain JSON
    (each phase start is written to the journal the moment it begins; retry-state.json only
    records where an attempt stopped). None when none is found."""
    try:
        with journal.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - JOURNAL_TAIL_BYTES))
            tail = f.read()
    except OSError:
        return None
    for line in reversed(tail.splitlines()):
        if b'"PhaseStarted"' not in line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue  # the first, cut line of the tail, or a torn last one
        if isinstance(event, dict) and event.get("attempt") == attempt:
            phase = event.get("phase")
            return phase if isinstance(phase, str) else None
    return None
