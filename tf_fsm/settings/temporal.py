"""The `temporal` section: where the Temporal cluster is and how to reach it, for the commands
that run the backlog on one (docs/many-hosts.md). Paths are relative to the project root; the
API key itself is never in the file, only the name of the environment variable holding it.
The address is checked here, the one place, for the flag and the environment variable too."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from tf_fsm.settings.defaults import TEMPORAL_ENV as TEMPORAL_ENV
from tf_fsm.settings.section import OsStr, Section

#: what a heartbeat timeout may be, at most (a day: a dead worker must be noticed some day)
MAX_HEARTBEAT_SECONDS = 86_400

_HOST = r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)"
_ADDRESS = re.compile(rf"^{_HOST}:(\d{{1,5}})$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_QUEUE = re.compile(r"^[^\s@]+$")


def check_address(value: str) -> str:
    """`HOST:PORT` (an IPv6 host in brackets), the port 1-65535: else a ValueError saying so."""
    found = _ADDRESS.match(value)
    if found is None or not 1 <= int(found.group(2)) <= 65535:
        raise ValueError(
            f"{value!r} is not a Temporal address: HOST:PORT, e.g. 127.0.0.1:7233 "
            "(an IPv6 host in brackets: [::1]:7233)"
        )
    return value


def check_queue(value: str) -> str:
    """A task queue name: no whitespace, and no `@`, which joins a queue and a host in the
    name of a worker's own queue (tf_fsm.temporal.workflow.host_queue)."""
    if not value or _QUEUE.match(value) is None or len(value) > 200:
        raise ValueError(f"{value!r} is not a task queue name: 1-200 characters, no space or '@'")
    return value


class TemporalTls(Section):
    """TLS to the cluster: the server's certificate checked (against the system's roots, or a
    CA of the project's own), and a client certificate for mTLS (Temporal Cloud's, or a
    self-hosted cluster's). `enabled: false` is a plain connection."""

    enabled: bool = True
    #: the client's certificate and private key (PEM files), relative to the project root
    clientCert: OsStr | None = Field(default=None, min_length=1)
    clientKey: OsStr | None = Field(default=None, min_length=1)
    #: the CA that signed the server's certificate (a PEM file); None: the system's roots
    serverCA: OsStr | None = Field(default=None, min_length=1)
    #: the name the server's certificate is checked against (and sent as SNI); None: the host
    serverName: str | None = Field(default=None, min_length=1)

    @model_validator(mode="after")
    def _consistent(self) -> TemporalTls:
        if (self.clientCert is None) != (self.clientKey is None):
            raise ValueError("clientCert and clientKey go together: give both, or neither")
        given = [self.clientCert, self.clientKey, self.serverCA, self.serverName]
        if not self.enabled and any(value is not None for value in given):
            raise ValueError("enabled is false (a plain connection), yet TLS files are named")
        return self


class Temporal(Section):
    #: HOST:PORT of the cluster's frontend; None: given by --temporal or TF_FSM_TEMPORAL
    address: str | None = None
    namespace: str = Field(default="default", min_length=1, max_length=255)
    taskQueue: str = "tf-fsm"
    #: a worker that has not heartbeaten for this long is taken for dead (its phase is retried)
    heartbeatTimeoutSeconds: float = Field(default=60.0, gt=0, le=MAX_HEARTBEAT_SECONDS)
    #: None (not in the file): TLS when an API key is given (as the SDK does), else plain
    tls: TemporalTls | None = None
    #: the NAME of the environment variable holding an API key (Temporal Cloud); None: no key
    apiKeyEnv: str | None = None

    @field_validator("address")
    @classmethod
    def _address(cls, value: str | None) -> str | None:
        return value if value is None else check_address(value)

    @field_validator("taskQueue")
    @classmethod
    def _queue(cls, value: str) -> str:
        return check_queue(value)

    @field_validator("apiKeyEnv")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and _ENV_NAME.match(value) is None:
            # the value is not repeated: it may be the key itself, put here by mistake
            raise ValueError(
                "is not an environment variable's name (letters, digits, '_'): name the "
                "variable that holds the API key, never the key itself"
            )
        return value
