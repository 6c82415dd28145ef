"""The pinned Temporal dev server (`temporal server start-dev`), started from the binary the
`temporal` extra installs: on 127.0.0.1 only (its gRPC, HTTP and metrics ports alike), headless,
its history in an SQLite file when one is named, and tied to its starter's life (the
parent-death signal): `tf-fsm temporal dev` and the tests start it alike, here."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path
from typing import IO, Any

from tf_fsm.errors import UsageError
from tf_fsm.process.door import start_process
from tf_fsm.temporal.binary import temporal_binary

#: the only address the dev server listens on: it has no authentication
LOOPBACK = "127.0.0.1"
#: Temporal's usual frontend port
DEFAULT_PORT = 7233
#: where `tf-fsm temporal dev` keeps the history, under the project root
DEFAULT_DB = Path(".tf/temporal/dev.db")
#: how long the server may take to listen (it takes about 0.1-1.6 s)
READY_SECONDS = 60.0


def free_port() -> int:
    """A port free on the loopback address now (the OS's pick)."""
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        port: int = probe.getsockname()[1]
        return port


def check_port_free(port: int) -> None:
    """UsageError unless `port` can be bound on the loopback address: the server would fail,
    and another program listening there would be taken for it."""
    with socket.socket() as probe:
        # as the server binds (Go sets SO_REUSEADDR): a port whose last connections linger
        # in TIME_WAIT, after a restart, is free to it
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOOPBACK, port))
        except OSError as exc:
            raise UsageError(
                f"--port {port}: {LOOPBACK}:{port} is taken ({exc.strerror}); "
                "choose another port, or 0 for a free one"
            ) from None


def dev_server_argv(binary: Path, port: int, db: Path | None) -> list[str]:
    argv = [str(binary), "server", "start-dev", "--headless", "--ip", LOOPBACK]
    argv += ["--port", str(port), "--log-level", "warn"]
    return argv + (["--db-filename", str(db)] if db is not None else [])


def start_dev_server(
    port: int, db: Path | None, cwd: Path, log: IO[Any] | int | None = None
) -> subprocess.Popen[bytes]:
    """The dev server on LOOPBACK:`port`, its history in `db` (None: in memory), its output
    to `log` (None: this process's). Not yet listening: see `wait_listening`."""
    if db is not None:
        db.parent.mkdir(parents=True, exist_ok=True)
    argv = dev_server_argv(temporal_binary(), port, db)
    return start_process(argv, cwd=cwd, stdout=log, stderr=log)


def wait_listening(
    server: subprocess.Popen[bytes], port: int, within: float = READY_SECONDS
) -> None:
    """Return once the server accepts connections on its port; a RuntimeError saying so when
    it exits first or takes longer than `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        if server.poll() is not None:
            raise RuntimeError(f"the Temporal dev server exited {server.returncode}")
        try:
            with socket.create_connection((LOOPBACK, port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"the Temporal dev server did not listen within {within} s"
                ) from None
            time.sleep(0.05)


def stop_dev_server(server: subprocess.Popen[bytes], within: float = 10.0) -> None:
    """SIGTERM, then SIGKILL after `within` seconds; reaped either way."""
    if server.poll() is None:
        server.terminate()
        try:
            server.wait(within)
        except subprocess.TimeoutExpired:
            server.kill()
    server.wait()
