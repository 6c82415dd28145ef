"""A ticket's workflow id: the repository's identity and the ticket id. Clones of one
repository on many hosts share the identity (their `origin`), so two dispatchers on two hosts
name a ticket's workflow alike, and Temporal runs it once."""

from __future__ import annotations

import hashlib
import re
import socket
from pathlib import Path

from tf_fsm.workspace.git import Git, repository_root

#: `user@host:path`, git's scp-like syntax for ssh
_SCP = re.compile(r"^(?:[^@/]+@)?([^:/]+):(?!//)(.+)$")
_URL = re.compile(r"^[a-z][a-z0-9+.-]*://(?:[^@/]+@)?(.+)$", re.IGNORECASE)


def normal_remote(url: str) -> str:
    """One spelling for the URLs of one remote: no scheme, no user, no `.git`, no trailing
    slash (`git@github.com:o/r.git` and `https://github.com/o/r` are `github.com/o/r`)."""
    url = url.strip()
    if (found := _URL.match(url)) is not None:
        url = found.group(1)
    elif (found := _SCP.match(url)) is not None and not Path(url).exists():
        url = f"{found.group(1)}/{found.group(2)}"
    url = url.rstrip("/")
    return url.removesuffix(".git").rstrip("/")


def origin(root: Path) -> str | None:
    """The URL of the `origin` remote of the repository at `root`, as git has it; None when
    `root` is in no repository or its repository has no `origin`."""
    top = repository_root(root)
    if top is None:
        return None
    found = Git(top).run("remote", "get-url", "origin", check=False)
    url = found.stdout.strip()
    return url if found.exit_code == 0 and url else None


def repository_identity(root: Path) -> str:
    """The repository `root` is a clone of: its `origin` (normalized), else its own path
    (a repository without a shared remote runs on this host only)."""
    url = origin(root)
    if url is not None:
        return normal_remote(url)
    return str((repository_root(root) or root).resolve())


def workflow_prefix(repository: str) -> str:
    """What every workflow id of `repository` (an identity, as `repository_identity` gives
    it) begins with: the identity hashed, to keep ids short and free of `/`."""
    digest = hashlib.sha256(repository.encode("utf-8")).hexdigest()[:16]
    return f"tf-fsm-{digest}-"


def workflow_id(repository: str, ticket: str) -> str:
    """The workflow id of `ticket` in `repository`: readable at its end."""
    return f"{workflow_prefix(repository)}{ticket}"


def default_host(root: Path) -> str:
    """The name of a worker's host: the machine and its clone, so that two clones on one
    machine (two "hosts" of a test) have queues of their own."""
    return f"{socket.gethostname()}:{root.resolve()}"
