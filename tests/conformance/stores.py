"""The Store implementations the conformance suite runs against, and a lock holder in a second
process (shared with tests/test_store.py).

A store is named by `"module:function"`, the function taking (root, ticket id, redactor) and
building a store in a directory of its own under root: the holder process builds its own
store of the same ticket from the same name. A second implementation is one more entry in
STORES.
"""

from __future__ import annotations

import importlib
import os
import select
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tf_fsm.storage.protocol import Store
from tf_fsm.storage.redact import Redactor
from tf_fsm.storage.store import TicketStore

REPO = Path(__file__).resolve().parents[2]
API_KEY = "sk-proj-" + "Zz9aB8cD7eF6gH5iJ4kL3mN2"

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
