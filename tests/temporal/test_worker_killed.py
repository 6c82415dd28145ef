"""A worker "host" SIGKILLed mid-attempt: its `tf-fsm run` dies with it (the parent-death
signal), another worker takes the attempt over once the heartbeat timeout has passed, resumes
it, and the ticket closes with no attempt lost or doubled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from tests.temporal.conftest import DevServer
from tests.temporal.test_ticket_workflow import agent_calls, setup
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.temporal.dispatch import start_ticket

WORKER = Path(__file__).with_name("worker_process.py")
HEARTBEAT_TIMEOUT = 2.0
TAKEOVER_MARGIN = 5.0


class Workers:
    """Worker processes started by a test, each ended (SIGKILL) at the end whatever happens."""

    def __init__(self, address: str, root: Path, queue: str) -> None:
        self.address, self.root, self.queue = address, root, queue
        self.started: list[subprocess.Popen[str]] = []

    def start(self) -> subprocess.Popen[str]:
        argv = [sys.executable, str(WORKER), self.address, str(self.root), self.queue]
        worker = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, cwd=self.root)
        self.started.append(worker)
        assert worker.stdout is not None and worker.stdout.readline() == "polling\n"
        return worker

    def end(self) -> None:
        for worker in self.started:
            if worker.poll() is None:
                worker.kill()
            worker.wait()


@pytest.fixture
def workers(project: Path, temporal: DevServer) -> Iterator[Workers]:
    started = Workers(temporal.address, project, f"tf-fsm-{project.parent.name}")
    try:
        yield started
    finally:
        started.end()


def gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_killed_workers_attempt_is_taken_over(
    project: Path, temporal: DevServer, workers: Workers
) -> None:
    setup(project)
    (project / "scenario.json").write_text(json.dumps({"findings": [], "delaySeconds": 1.0}))
    store = open_store(project, load_settings(project), "pt-1")
    first = workers.start()

    async def dispatch() -> object:
        return await start_ticket(
            temporal.client,
            project,
            "pt-1",
            task_queue=workers.queue,
            heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT,
        )

    handle = temporal.run(dispatch())
    deadline = time.monotonic() + 30
    while (run := store.lock_holder()) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run is not None, "the first worker never started the attempt"

    first.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    assert gone(run, within=2.0), "the killed worker's `tf-fsm run` outlived it"
    workers.start()
    # the new run binds the lock before it writes its pid: the dead run's pid may show a moment
    while (taken := store.lock_holder()) in (None, run) and time.monotonic() < deadline:
        time.sleep(0.05)
    takeover = time.monotonic() - killed_at
    result = temporal.run(handle.result())  # type: ignore[attr-defined]

    assert taken is not None and taken != run
    assert takeover < HEARTBEAT_TIMEOUT + TAKEOVER_MARGIN, takeover
    assert (result.status, result.attempt) == ("closed", 1)
    state = store.load_retry_state()
    assert state is not None and [a.attemptNumber for a in state.attempts] == [1]
    assert set(agent_calls(project).values()) == {1}
