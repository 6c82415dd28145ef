"""The Store suite's support: the backends it knows (how to build one, to reach its records
raw as a crash or a person would, to see everything it keeps), sample records, and a lock
holder in a second process."""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from tf_fsm.core.journal import AttemptStarted
from tf_fsm.core.state import RetryState
from tf_fsm.storage.layout import JOURNAL
from tf_fsm.storage.memory import MemoryStore, close_namespace, namespace
from tf_fsm.storage.protocol import Store
from tf_fsm.storage.redact import Redactor
from tf_fsm.storage.store import TicketStore

API_KEY = "sk-proj-" + "Zz9aB8cD7eF6gH5iJ4kL3mN2"
TS = "2026-02-14T02:37:05.000Z"
SECRET = "env-secret-value"  # a value from the environment, which the redactor is given
TICKET = "pt-uu03"

# A real retry-state.json written by pi-ticketflow, verbatim.
PI_TICKETFLOW_STATE = """{
  "version": 1,
  "ticketId": "pt-uu03",
  "attempts": [
    {
      "attemptNumber": 1,
      "startedAt": "2026-02-14T02:37:05Z",
      "status": "in_progress",
      "trigger": "implementation"
    }
  ],
  "lastAttemptAt": "2026-02-14T02:37:05Z",
  "status": "active",
  "retryCount": 0
}
"""

StoreFactory = Callable[[Path, str, Redactor | None], Store]


class Raw(Protocol):
    """A store's records reached around the store, by name (an artifact's, `retry-state.json`,
    `events.jsonl`, a backup's), as a crash, a person or an agent would damage them."""

    def get(self, name: str) -> bytes | None: ...
    def put(self, name: str, data: bytes) -> None: ...
    def delete(self, name: str) -> None: ...
    def stamp(self, name: str) -> int | None:
        """The record's mtime (ns), None if it is missing."""

    def where(self, name: str) -> Path:
        """How a CorruptStateError names the record."""


@dataclass(frozen=True)
class StoreBackend:
    """A Store implementation as the suite runs it. `spec` is `module:function`, the function
    taking (root, ticket id, redactor) and building a store that keeps everything under root
    (a second process builds its own from it); `raw` reaches a store's records; `snapshot`
    is everything kept under root (equal before and after a read); `close` forgets it."""

    name: str
    spec: str
    raw: Callable[[Store], Raw]
    snapshot: Callable[[Path], object]
    close: Callable[[Path], None] = lambda root: None

    def build(self, root: Path, ticket_id: str, redactor: Redactor | None = None) -> Store:
        return factory(self.spec)(root, ticket_id, redactor)


def factory(spec: str) -> StoreFactory:
    module, _, name = spec.partition(":")
    return cast(StoreFactory, getattr(importlib.import_module(module), name))


# --- TicketStore ------------------------------------------------------------------------


def ticket_store(root: Path, ticket_id: str, redactor: Redactor | None = None) -> Store:
    """TicketStore on a knowledge directory under `root`."""
    return TicketStore(root / "knowledge", ticket_id, redactor)


class FileRaw:
    def __init__(self, store: Store) -> None:
        self.dir = cast(TicketStore, store).dir

    def where(self, name: str) -> Path:
        return self.dir / name

    def get(self, name: str) -> bytes | None:
        try:
            return self.where(name).read_bytes()
        except FileNotFoundError:
            return None

    def put(self, name: str, data: bytes) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        self.where(name).write_bytes(data)

    def delete(self, name: str) -> None:
        self.where(name).unlink(missing_ok=True)

    def stamp(self, name: str) -> int | None:
        try:
            return self.where(name).stat().st_mtime_ns
        except FileNotFoundError:
            return None


def tree(root: Path, dir_times: bool = True) -> dict[str, tuple[Any, ...]]:
    """Everything under `root`: each file's bytes and mtime, each link's target, each
    directory (and its mtime, which a file created or removed in it changes)."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            key, mtime = str(path.relative_to(root)), path.lstat().st_mtime_ns
            if path.is_symlink():
                out[key] = ("link", os.readlink(path))
            elif path.is_dir():
                out[key] = ("dir", mtime) if dir_times else ("dir",)
            else:
                out[key] = ("file", path.read_bytes(), mtime)
    return out


# --- MemoryStore ------------------------------------------------------------------------


def memory_store(root: Path, ticket_id: str, redactor: Redactor | None = None) -> Store:
    """MemoryStore in the namespace of `root`."""
    return MemoryStore(str(root), ticket_id, redactor)


class MemoryRaw:
    def __init__(self, store: Store) -> None:
        self.store = cast(MemoryStore, store)
        self.records = self.store.records

    def where(self, name: str) -> Path:
        return self.store.where / name

    def get(self, name: str) -> bytes | None:
        if name == JOURNAL:
            journal = self.records.journal
            return None if journal is None else bytes(journal)
        found = self.records.named.get(name)
        return None if found is None else found[0]

    def put(self, name: str, data: bytes) -> None:
        if name == JOURNAL:
            self.records.journal = bytearray(data)
        else:
            self.records.named[name] = (data, time.time_ns())

    def delete(self, name: str) -> None:
        if name == JOURNAL:
            self.records.journal = None
        else:
            self.records.named.pop(name, None)

    def stamp(self, name: str) -> int | None:
        found = self.records.named.get(name)
        return None if found is None else found[1]


def memory_snapshot(root: Path) -> object:
    """Every record of the namespace's tickets, and its exchange directories' files."""
    space = namespace(str(root))
    kept = {
        ticket: (dict(records.named), bytes(records.journal or b""), records.journal is None)
        for ticket, records in space.tickets.items()
        if records.named or records.journal is not None
    }
    return kept, tree(root)


#: the Store implementations of tf_fsm, by name
BACKENDS: dict[str, StoreBackend] = {
    "TicketStore": StoreBackend(
        "TicketStore", "tf_fsm.conformance.stores:ticket_store", FileRaw, tree
    ),
    "MemoryStore": StoreBackend(
        "MemoryStore",
        "tf_fsm.conformance.stores:memory_store",
        MemoryRaw,
        memory_snapshot,
        lambda root: close_namespace(str(root)),
    ),
}


# --- records -------------------------------------------------------------------------------


def state_of(text: str = PI_TICKETFLOW_STATE) -> RetryState:
    return RetryState.model_validate(json.loads(text))


def attempt_started(attempt: int = 1) -> AttemptStarted:
    return AttemptStarted(
        ts=TS, ticket=TICKET, attempt=attempt, trigger="initial", escalation={"fixer": None}
    )


# --- a lock holder in a second process ----------------------------------------------------

# Holds the ticket's lock until a line arrives on stdin, then says it released it.
_HOLDER = """
import sys
from pathlib import Path
from tf_fsm.conformance.stores import factory

store = factory(sys.argv[1])(Path(sys.argv[2]), sys.argv[3], None)
with store.lock("test holder"):
    print("READY", flush=True)
    sys.stdin.readline()
print("RELEASED", flush=True)
"""


def child_env() -> dict[str, str]:
    """The environment of a second process: this one's, with its import path."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}


def read_line(proc: subprocess.Popen[str], timeout: float = 30) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "holder process did not answer"
    return proc.stdout.readline().strip()


class Holders:
    """Processes that hold a ticket's lock; every one still running is killed at `close`."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def start(self, spec: str, root: Path, ticket_id: str) -> subprocess.Popen[str]:
        """A process holding the lock of `ticket_id` in the store `spec` builds under `root`."""
        proc = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, spec, str(root), ticket_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=child_env(),
        )
        self.procs.append(proc)
        assert read_line(proc) == "READY"
        return proc

    @staticmethod
    def release(proc: subprocess.Popen[str]) -> None:
        """Let the holder leave its lock block and exit normally."""
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert read_line(proc) == "RELEASED"
        assert proc.wait(timeout=30) == 0

    @staticmethod
    def kill(proc: subprocess.Popen[str]) -> None:
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(timeout=30)
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    stream.close()
