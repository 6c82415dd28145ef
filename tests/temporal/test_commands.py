"""`tf-fsm temporal dev` and `tf-fsm worker` as real processes: the dev server's address and
history file, loopback only, gone with its command; a worker in a clone polls its two queues,
stops on SIGTERM with exit 0 and leaves no process; a phase running when it stops is handed
back after the grace period and taken over by another worker."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from temporalio.api.enums.v1 import EventType

from tests.conftest import tk_ticket
from tests.temporal.conftest import DevServer, alive, clone_of_a_remote, start_ticket
from tests.temporal.test_ticket_workflow import agent_calls, setup
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.temporal.worker import WORKER_STOPPED
from tf_fsm.tk.tickets import read

DEV_LINE = re.compile(
    r"^temporal dev server: (127\.0\.0\.1:(\d+)) \(history in (.+)\); Ctrl-C stops it$"
)


def tf_fsm(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tf_fsm", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (Linux's /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def gone(pid: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.05)
    return False


class Started:
    """Processes a test started, each SIGKILLed at the end if still running."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[str]] = []

    def __call__(self, proc: subprocess.Popen[str]) -> subprocess.Popen[str]:
        self.procs.append(proc)
        return proc

    def end(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


@pytest.fixture
def started() -> Iterator[Started]:
    procs = Started()
    try:
        yield procs
    finally:
        procs.end()


def loopback_listeners_only(pid: int) -> list[str]:
    """The addresses `pid` listens on (TCP), from `ss`."""
    shown = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in shown.splitlines() if f"pid={pid}," in line]


def test_temporal_dev_writes_its_history_where_told_and_stops_with_sigterm(
    project: Path, started: Started
) -> None:
    db = project.parent / "elsewhere" / "history.db"
    dev = started(tf_fsm("temporal", "dev", "--db", str(db), "--port", "0", cwd=project))
    assert dev.stdout is not None
    line = dev.stdout.readline().rstrip("\n")
    found = DEV_LINE.match(line)
    assert found is not None, line
    assert Path(found.group(3)) == db and db.is_file()
    [server] = children(dev.pid)
    if shutil.which("ss") is not None:
        listening = loopback_listeners_only(server)
        assert f"127.0.0.1:{found.group(2)}" in listening
        assert all(address.startswith("127.0.0.1:") for address in listening), listening

    dev.send_signal(signal.SIGTERM)
    out, err = dev.communicate(timeout=30)
    assert dev.returncode == 0, err
    assert out == ""  # the one line, read above: the server's own banner goes to stderr
    assert not alive(server)


def test_temporal_dev_keeps_its_history_under_the_project_by_default(
    project: Path, started: Started
) -> None:
    dev = started(tf_fsm("temporal", "dev", "--port", "0", cwd=project))
    assert dev.stdout is not None
    found = DEV_LINE.match(dev.stdout.readline().rstrip("\n"))
    assert found is not None and found.group(3) == ".tf/temporal/dev.db"
    assert (project / ".tf/temporal/dev.db").is_file()
    dev.send_signal(signal.SIGINT)
    assert dev.wait(30) == 0


def test_temporal_dev_refuses_a_port_taken(project: Path, temporal: DevServer) -> None:
    port = temporal.address.rsplit(":", 1)[1]
    dev = tf_fsm("temporal", "dev", "--port", port, cwd=project)
    out, err = dev.communicate(timeout=30)
    assert dev.returncode == 2
    assert f"--port {port}: 127.0.0.1:{port} is taken" in err and out == ""


def start_worker(
    started: Started, project: Path, address: str, *flags: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[str], str]:
    worker = started(tf_fsm("worker", *flags, "--temporal", address, cwd=project, env=env))
    assert worker.stdout is not None
    return worker, worker.stdout.readline()


def test_a_worker_polls_both_queues_and_stops_on_sigterm(
    project: Path, temporal: DevServer, started: Started
) -> None:
    clone_of_a_remote(project)
    queue = f"q-{project.parent.name}"
    worker, said = start_worker(
        started, project, temporal.address, "--task-queue", queue, "--host", "h1"
    )
    assert said == (
        f"tf-fsm worker: polling {temporal.address} (namespace default), queues {queue} and "
        f"{queue}@h1, 1 at once, in {project}\n"
    )
    worker.send_signal(signal.SIGTERM)
    _, err = worker.communicate(timeout=30)
    assert worker.returncode == 0, err
    assert "tf-fsm worker: stopped" in err


def test_a_worker_refuses_a_clone_without_origin(project: Path, temporal: DevServer) -> None:
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    worker = tf_fsm("worker", "--temporal", temporal.address, cwd=project)
    out, err = worker.communicate(timeout=30)
    assert worker.returncode == 2
    assert "no `origin` remote" in err and out == ""


def test_a_phase_running_when_its_worker_stops_is_handed_back_and_taken_over(
    project: Path, temporal: DevServer, started: Started
) -> None:
    clone_of_a_remote(project)
    setup(project)
    (project / "scenario.json").write_text(json.dumps({"findings": [], "delaySeconds": 1.5}))
    store = open_store(project, load_settings(project), "pt-1")
    queue = f"q-{project.parent.name}"
    first, _ = start_worker(
        started, project, temporal.address, "--task-queue", queue, "--grace", "0.5"
    )
    handle = temporal.run(start_ticket(temporal.client, project, "pt-1", task_queue=queue))
    deadline = time.monotonic() + 30
    while (run := store.lock_holder()) in (None, first.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert run is not None, "the worker never started the attempt"

    first.send_signal(signal.SIGTERM)
    _, err = first.communicate(timeout=30)
    assert first.returncode == 0, err
    assert not alive(run), "the stopped worker's `tf-fsm run` outlived it"
    start_worker(started, project, temporal.address, "--task-queue", queue)
    result = temporal.run(handle.result())

    assert result.status == "closed"
    history = temporal.run(handle.fetch_history())
    tries = [
        e.activity_task_started_event_attributes
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
    ]
    retried = [t for t in tries if t.attempt > 1]
    assert retried and retried[0].last_failure.application_failure_info.type == WORKER_STOPPED
    state = store.load_retry_state()
    assert state is not None and [a.attemptNumber for a in state.attempts] == [1]
    assert set(agent_calls(project).values()) == {1}


def test_a_killed_workers_run_dies_with_it(
    project: Path, temporal: DevServer, started: Started
) -> None:
    clone_of_a_remote(project)
    setup(project)
    (project / "scenario.json").write_text(json.dumps({"findings": [], "delaySeconds": 30}))
    store = open_store(project, load_settings(project), "pt-1")
    queue = f"q-{project.parent.name}"
    worker, _ = start_worker(started, project, temporal.address, "--task-queue", queue)
    handle = temporal.run(start_ticket(temporal.client, project, "pt-1", task_queue=queue))
    try:
        deadline = time.monotonic() + 30
        # the worker itself holds the lock a moment, rewriting the ticket's files: its run's
        # holds it next
        while store.lock_holder() in (None, worker.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        run = store.lock_holder()
        assert run is not None, "the worker never started the attempt"
        worker.send_signal(signal.SIGKILL)
        assert gone(run, within=2.0), "the killed worker's `tf-fsm run` outlived it"
    finally:
        temporal.run(handle.terminate())


@pytest.mark.parametrize("slots", [1, 2])
def test_a_worker_runs_at_most_its_slots_at_once(
    project: Path, temporal: DevServer, started: Started, slots: int
) -> None:
    clone_of_a_remote(project)
    setup(project)
    (project / ".tickets/pt-2.md").write_text(tk_ticket("pt-2"))
    (project / "scenario.json").write_text(json.dumps({"findings": [], "delaySeconds": 0.5}))
    stores = [open_store(project, load_settings(project), t) for t in ("pt-1", "pt-2")]
    queue = f"q-{project.parent.name}"
    start_worker(started, project, temporal.address, "--task-queue", queue, "--slots", str(slots))
    handles = [
        temporal.run(start_ticket(temporal.client, project, t, task_queue=queue))
        for t in ("pt-1", "pt-2")
    ]
    most = 0
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        held = sum(store.lock_holder() is not None for store in stores)
        most = max(most, held)
        if all(read(project, t).status == "closed" for t in ("pt-1", "pt-2")):
            break
        time.sleep(0.01)
    assert [temporal.run(h.result()).status for h in handles] == ["closed", "closed"]
    assert most == slots
