"""The Store implementations the conformance suite runs against, and a lock holder in a second
process (shared with tests/test_store.py).

A store is named by `"module:function"`, the function taking (root, ticket id, redactor) and
building a store in a directory of its own under root: the holder process builds its own
store of the same ticket from the same name. A second implementation is one more entry in
STORES.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tf_fsm.core.journal import AttemptStarted
from tf_fsm.core.state import RetryState
from tf_fsm.storage.protocol import Store
from tf_fsm.storage.redact import Redactor
from tf_fsm.storage.store import TicketStore

REPO = Path(__file__).resolve().parents[2]
API_KEY = "sk-proj-" + "Zz9aB8cD7eF6gH5iJ4kL3mN2"
TS = "2026-02-14T02:37:05.000Z"

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


def ticket_store(root: Path, ticket_id: str, redactor: Redactor | None = None) -> Store:
    """TicketStore on a knowledge directory under `root` (typed Store: mypy checks it is one)."""
    return TicketStore(root / "knowledge", ticket_id, redactor)


#: every Store implementation, by name: the function that builds one
STORES: dict[str, str] = {"TicketStore": "tests.conformance.stores:ticket_store"}


def factory(spec: str) -> StoreFactory:
    module, _, name = spec.partition(":")
    built: StoreFactory = getattr(importlib.import_module(module), name)
    return built


# Holds the ticket's lock until a line arrives on stdin, then says it released it.
_HOLDER = """
import sys
from pathlib import Path
from tests.conformance.stores import factory

store = factory(sys.argv[1])(Path(sys.argv[2]), sys.argv[3], None)
with store.lock("test holder"):
    print("READY", flush=True)
    sys.stdin.readline()
print("RELEASED", flush=True)
"""


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
            env={**os.environ, "PYTHONPATH": str(REPO)},
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


SECRET = "env-secret-value"  # a value from the environment, which the redactor is given
TICKET = "pt-uu03"


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


def state_of(text: str = PI_TICKETFLOW_STATE) -> RetryState:
    return RetryState.model_validate(json.loads(text))


def write_state(store: Store, text: str) -> Path:
    store.dir.mkdir(parents=True, exist_ok=True)
    store.retry_state_path.write_text(text, encoding="utf-8")
    return store.retry_state_path


def attempt_started(attempt: int = 1) -> AttemptStarted:
    return AttemptStarted(
        ts=TS, ticket=TICKET, attempt=attempt, trigger="initial", escalation={"fixer": None}
    )
