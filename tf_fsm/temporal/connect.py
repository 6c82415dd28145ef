"""The one place a Temporal client is made: where the cluster is (`--temporal`, else
$TF_FSM_TEMPORAL, else the settings' `temporal.address`), which namespace and queue, and how
the connection is secured (TLS files relative to the project root, an API key read from the
environment variable the settings name). A server that does not answer is a
`TemporalUnreachable` naming the address (exit 69), never a traceback."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from temporalio.client import Client
from temporalio.service import TLSConfig

from tf_fsm.errors import EXIT_UNAVAILABLE, SettingsError, SettingsProblem, TfFsmError, UsageError
from tf_fsm.settings.load import SETTINGS_RELPATH, load_settings
from tf_fsm.settings.temporal import TEMPORAL_ENV, Temporal, TemporalTls, check_address

#: how long a connection may take before the server is taken for absent
CONNECT_SECONDS = 10.0


class TemporalUnreachable(TfFsmError):
    """No Temporal server answered at the address, or the connection was refused."""

    exit_code = EXIT_UNAVAILABLE

    def __init__(self, address: str, why: str) -> None:
        self.address = address
        self.why = why
        super().__init__()

    @property
    def message(self) -> str:
        return f"no Temporal server answered at {self.address}: {self.why}"


@dataclass(frozen=True)
class Target:
    """Where and how to reach the cluster, resolved (`source` says where the address came
    from, for messages)."""

    root: Path
    address: str
    source: str
    namespace: str
    task_queue: str
    heartbeat_timeout: float
    section: Temporal


def target(
    root: Path,
    address: str | None = None,
    namespace: str | None = None,
    task_queue: str | None = None,
) -> Target:
    """The cluster to reach from the project at `root`: a flag given wins over
    $TF_FSM_TEMPORAL, which wins over the settings file (its `temporal` section)."""
    section = load_settings(root).settings.temporal
    from_env = os.environ.get(TEMPORAL_ENV, "")
    if address is not None:
        chosen, source = address, "--temporal"
    elif from_env:
        try:
            chosen, source = check_address(from_env), f"${TEMPORAL_ENV}"
        except ValueError as exc:
            raise UsageError(f"${TEMPORAL_ENV}: {exc}") from None
    elif section.address is not None:
        chosen, source = section.address, "temporal.address"
    else:
        raise UsageError(
            f"no Temporal address: give --temporal HOST:PORT, set ${TEMPORAL_ENV}, or set "
            f"temporal.address in {SETTINGS_RELPATH} (`tf-fsm temporal dev` starts a server)"
        )
    return Target(
        root=root,
        address=chosen,
        source=source,
        namespace=namespace or section.namespace,
        task_queue=task_queue or section.taskQueue,
        heartbeat_timeout=section.heartbeatTimeoutSeconds,
        section=section,
    )


def _read(root: Path, key: str, relative: str) -> bytes:
    path = root / relative
    try:
        return path.read_bytes()
    except OSError as exc:
        problem = f"cannot read {path}: {exc.strerror or exc}"
        raise SettingsError(root / SETTINGS_RELPATH, [SettingsProblem(key, problem)]) from None


def tls_config(root: Path, tls: TemporalTls | None) -> bool | TLSConfig | None:
    """The SDK's TLS option from the settings' `temporal.tls` (None: the SDK's default); a
    file that cannot be read is a settings error naming its key."""
    if tls is None or not tls.enabled:
        return None if tls is None else False
    if not (tls.clientCert or tls.serverCA or tls.serverName):
        return True  # the server checked against the system's roots

    def read(key: str, relative: str | None) -> bytes | None:
        return None if relative is None else _read(root, f"temporal.tls.{key}", relative)

    return TLSConfig(
        client_cert=read("clientCert", tls.clientCert),
        client_private_key=read("clientKey", tls.clientKey),
        server_root_ca_cert=read("serverCA", tls.serverCA),
        domain=tls.serverName,
    )


def api_key(section: Temporal) -> str | None:
    """The API key from the environment variable `temporal.apiKeyEnv` names (an unset or empty
    one is an error naming it, not a connection without the key)."""
    if section.apiKeyEnv is None:
        return None
    key = os.environ.get(section.apiKeyEnv, "")
    if not key:
        raise UsageError(
            f"temporal.apiKeyEnv names ${section.apiKeyEnv}, which is not set (or empty): "
            "export the API key in it"
        )
    return key


async def connect(where: Target) -> Client:
    """A client of the cluster at `where`, or TemporalUnreachable naming its address."""
    tls = tls_config(where.root, where.section.tls)
    key = api_key(where.section)
    try:
        return await Client.connect(
            where.address,
            namespace=where.namespace,
            api_key=key,
            tls=tls if tls is not None else key is not None,  # the SDK's own default
            connect_timeout=timedelta(seconds=CONNECT_SECONDS),
        )
    except RuntimeError as exc:  # the SDK's one error for a failed connection
        raise TemporalUnreachable(where.address, _why(str(exc), tls)) from None


def _why(said: str, tls: bool | TLSConfig | None) -> str:
    """The SDK's message, and what it most likely means."""
    said = said.removeprefix("Failed client connect: ")
    if "Connection refused" in said:
        return "connection refused (is the server running? `tf-fsm temporal dev` starts one)"
    if tls not in (None, False) and ("InvalidContentType" in said or "InvalidMessage" in said):
        return f"the TLS handshake failed: the server does not speak TLS there? ({said})"
    return said
