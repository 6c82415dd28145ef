"""The `temporal` settings section and the connection a worker makes from it, as real
`tf-fsm` processes: bad values exit 2 naming the key; the flag wins over $TF_FSM_TEMPORAL,
which wins over the settings; a server that is not there exits 69 naming the address; an API
key is read from the variable the settings name; the TLS files are sent (checked against a TLS
server of the test's own, which requires a client certificate) and a missing one is named."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from tests.conftest import run_cli
from tests.temporal.conftest import DevServer, free_port
from tests.temporal.test_commands import Started, clone_of_a_remote, start_worker
from tests.temporal.test_commands import started as started  # the fixture

EXIT_UNAVAILABLE = 69


def settings(project: Path, temporal: dict[str, Any]) -> None:
    path = project / ".tf/config/settings.json"
    path.write_text(json.dumps({"temporal": temporal}), encoding="utf-8")


@pytest.mark.parametrize(
    ("section", "said"),
    [
        ({"address": "7233"}, "temporal.address: '7233' is not a Temporal address"),
        ({"address": "h:99999"}, "temporal.address: 'h:99999' is not a Temporal address"),
        ({"taskQueue": "q@host"}, "temporal.taskQueue: 'q@host' is not a task queue name"),
        ({"heartbeatTimeoutSeconds": 0}, "temporal.heartbeatTimeoutSeconds: Input should be"),
        ({"tls": {"clientCert": "c.pem"}}, "temporal.tls: clientCert and clientKey go together"),
        ({"nameSpace": "x"}, "temporal.nameSpace: unknown key (did you mean namespace?)"),
    ],
)
def test_a_bad_temporal_setting_exits_2_naming_its_key(
    project: Path, section: dict[str, Any], said: str
) -> None:
    settings(project, section)
    result = run_cli("settings")
    assert result.returncode == 2
    assert said in result.stderr


def test_an_api_key_put_in_place_of_its_variable_is_refused_and_not_repeated(
    project: Path,
) -> None:
    settings(project, {"apiKeyEnv": "tfk_secret-Value.123"})
    result = run_cli("settings")
    assert result.returncode == 2
    assert "temporal.apiKeyEnv: is not an environment variable's name" in result.stderr
    assert "tfk_secret" not in result.stderr


def test_the_flag_wins_over_the_environment_which_wins_over_the_settings(
    project: Path, temporal: DevServer, started: Started
) -> None:
    clone_of_a_remote(project)
    nowhere = f"127.0.0.1:{free_port()}"
    settings(project, {"address": nowhere})
    env = {"TF_FSM_TEMPORAL": temporal.address}
    worker = started(
        subprocess.Popen(
            [*_tf_fsm(), "worker"],
            cwd=project,
            env={**_environ(), **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    )
    assert worker.stdout is not None
    assert worker.stdout.readline().startswith(f"tf-fsm worker: polling {temporal.address} ")
    worker.send_signal(signal.SIGTERM)
    assert worker.wait(30) == 0

    env = {"TF_FSM_TEMPORAL": nowhere}
    _, said = start_worker(started, project, temporal.address, env=env)
    assert said.startswith(f"tf-fsm worker: polling {temporal.address} ")


def _tf_fsm() -> list[str]:
    import sys

    return [sys.executable, "-m", "tf_fsm"]


def _environ() -> dict[str, str]:
    import os

    return dict(os.environ)


def test_no_address_and_a_bad_environment_address_exit_2(project: Path) -> None:
    clone_of_a_remote(project)
    result = run_cli("worker", env={"TF_FSM_TEMPORAL": ""})
    assert result.returncode == 2
    assert "no Temporal address: give --temporal HOST:PORT, set $TF_FSM_TEMPORAL" in result.stderr
    result = run_cli("worker", env={"TF_FSM_TEMPORAL": "localhost"})
    assert result.returncode == 2
    assert "$TF_FSM_TEMPORAL: 'localhost' is not a Temporal address" in result.stderr
    result = run_cli("worker", "--temporal", "localhost:")
    assert result.returncode == 2
    assert "argument --temporal: 'localhost:' is not a Temporal address" in result.stderr


def test_a_server_that_is_not_there_exits_69_naming_the_address(project: Path) -> None:
    clone_of_a_remote(project)
    nowhere = f"127.0.0.1:{free_port()}"
    result = run_cli("worker", "--temporal", nowhere)
    assert result.returncode == EXIT_UNAVAILABLE
    assert f"no Temporal server answered at {nowhere}: connection refused" in result.stderr


def test_an_api_key_from_the_named_variable_is_accepted_by_the_dev_server(
    project: Path, temporal: DevServer, started: Started
) -> None:
    clone_of_a_remote(project)
    settings(project, {"apiKeyEnv": "TF_TEST_KEY", "tls": {"enabled": False}})
    result = run_cli("worker", "--temporal", temporal.address, env={"TF_TEST_KEY": ""})
    assert result.returncode == 2
    assert "temporal.apiKeyEnv names $TF_TEST_KEY, which is not set" in result.stderr
    _, said = start_worker(started, project, temporal.address, env={"TF_TEST_KEY": "k-123"})
    assert said.startswith(f"tf-fsm worker: polling {temporal.address} ")


def test_tls_to_a_plain_server_fails_clearly(project: Path, temporal: DevServer) -> None:
    clone_of_a_remote(project)
    settings(project, {"tls": {}})
    result = run_cli("worker", "--temporal", temporal.address)
    assert result.returncode == EXIT_UNAVAILABLE
    assert f"no Temporal server answered at {temporal.address}: the TLS handshake failed" in (
        result.stderr
    )


def test_a_tls_file_that_is_missing_is_named(project: Path) -> None:
    clone_of_a_remote(project)
    settings(project, {"tls": {"clientCert": "certs/c.pem", "clientKey": "certs/c.key"}})
    result = run_cli("worker", "--temporal", "127.0.0.1:7233")
    assert result.returncode == 2
    assert "temporal.tls.clientCert: cannot read " in result.stderr
    assert str(project / "certs/c.pem") in result.stderr


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def _certificate(cwd: Path, name: str, extensions: str) -> None:
    """`name`.pem and .key, signed by the test's CA (ca.pem, ca.key)."""
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(
        "req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=cwd
    )
    (cwd / f"{name}.ext").write_text(extensions)
    _openssl(
        "x509",
        "-req",
        "-in",
        f"{name}.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "1",
        "-out",
        f"{name}.pem",
        "-extfile",
        f"{name}.ext",
        cwd=cwd,
    )


@pytest.fixture
def certs(project: Path) -> Path:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    place = project / "certs"
    place.mkdir()
    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    _openssl(
        "req",
        "-x509",
        *ec,
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=tf-fsm test CA",
        cwd=place,
    )
    _certificate(
        place, "temporal.test", "subjectAltName=DNS:temporal.test\nextendedKeyUsage=serverAuth\n"
    )
    _certificate(place, "tf-fsm-worker", "extendedKeyUsage=clientAuth\n")
    return place


@pytest.fixture
def tls_server(certs: Path) -> Iterator[tuple[str, list[Any]]]:
    """A TLS listener that requires a client certificate signed by the test's CA and records
    each one it was shown (it speaks no gRPC: the worker's connection fails after the
    handshake)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs / "temporal.test.pem", certs / "temporal.test.key")
    context.load_verify_locations(certs / "ca.pem")
    context.verify_mode = ssl.CERT_REQUIRED
    context.set_alpn_protocols(["h2"])
    shown: list[Any] = []
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            conn.settimeout(5)
            try:
                with context.wrap_socket(conn, server_side=True) as tls:
                    shown.append(tls.getpeercert())
            except (ssl.SSLError, OSError):
                conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        yield f"127.0.0.1:{listener.getsockname()[1]}", shown
    finally:
        stop.set()
        thread.join()
        listener.close()


def test_the_tls_settings_send_the_client_certificate(
    project: Path, tls_server: tuple[str, list[Any]]
) -> None:
    address, shown = tls_server
    clone_of_a_remote(project)
    tls = {
        "clientCert": "certs/tf-fsm-worker.pem",
        "clientKey": "certs/tf-fsm-worker.key",
        "serverCA": "certs/ca.pem",
        "serverName": "temporal.test",
    }
    settings(project, {"tls": tls})
    result = run_cli("worker", "--temporal", address)
    assert result.returncode == EXIT_UNAVAILABLE, result.stderr
    assert f"no Temporal server answered at {address}" in result.stderr
    subjects = [dict(part[0] for part in cert["subject"]) for cert in shown]
    assert {"commonName": "tf-fsm-worker"} in subjects


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--slots", "0", "argument --slots: '0': a whole number, 1 to 256"),
        ("--grace", "nan", "argument --grace: 'nan': seconds, 0 to 86400"),
        ("--task-queue", "q@h", "argument --task-queue: 'q@h' is not a task queue name"),
    ],
)
def test_bad_worker_flags_exit_2_naming_the_flag(flag: str, value: str, said: str) -> None:
    result = run_cli("worker", "--temporal", "127.0.0.1:7233", flag, value)
    assert result.returncode == 2
    assert said in result.stderr
