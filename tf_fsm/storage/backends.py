"""Where a project's ticket stores keep their records: the one place a backend is chosen.

`storage.backend` in the settings (`files`, the default, or `memory`), or a command's
`--store` flag, which wins. Every caller opens stores through `ticket_stores` (or
`open_store` for one ticket).

* `files`: TicketStore, pi-ticketflow's files under `workflow.knowledgeDir`.
* `memory`: MemoryStore, this process's memory only (namespace: the knowledge directory).
  Refused where other processes must see the records (the backlog loop's workers, `watch`,
  `ui`): `memory_refused` says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from tf_fsm.errors import UsageError
from tf_fsm.settings.load import LoadedSettings, knowledge_dir
from tf_fsm.storage.ticket_id import TICKET_ID_RE

# The stores are imported when one is opened: listing a project's tickets (`status` on a
# project where none has run) costs no journal or retry-state model (benchmarks/
# bench_startup.py).
if TYPE_CHECKING:
    from tf_fsm.storage.protocol import Store

FILES, MEMORY = "files", "memory"


class Stores:
    """A project's stores: `stores(ticket_id)` opens one (the id validated first)."""

    def __init__(self, knowledge: Path, backend: str) -> None:
        self.knowledge, self.backend = knowledge, backend
        self._open: Callable[[str], Store] | None = None

    def __call__(self, ticket_id: str) -> Store:
        if self._open is None:
            self._open = _opener(self.knowledge, self.backend)
        return self._open(ticket_id)

    def ticket_ids(self) -> list[str]:
        """The tickets that have records, sorted (files: a ticket directory; memory: a ticket
        opened in this process)."""
        if self.backend == MEMORY:
            from tf_fsm.storage.memory import namespace

            return sorted(namespace(str(self.knowledge)).tickets)
        base = self.knowledge / "tickets"
        try:
            names = [p.name for p in base.iterdir() if TICKET_ID_RE.fullmatch(p.name)]
            return sorted(n for n in names if (base / n).is_dir())
        except OSError:
            return []


def _opener(knowledge: Path, backend: str) -> Callable[[str], Store]:
    if backend == MEMORY:
        from tf_fsm.storage.memory import MemoryStore

        return lambda ticket_id: MemoryStore(str(knowledge), ticket_id)
    import os

    from tf_fsm.storage.redact import Redactor
    from tf_fsm.storage.store import TicketStore

    # One redactor for the stores a command opens: the environment it reads is the process's,
    # and building its pattern per store was a fifth of reading a thousand tickets' state.
    redactor = Redactor.from_environ(os.environ)
    return lambda ticket_id: TicketStore(knowledge, ticket_id, redactor)


def backend_of(settings: LoadedSettings, backend: str | None = None) -> str:
    """The backend a command uses: its `--store` flag, else `storage.backend`."""
    return backend if backend is not None else settings.settings.storage.backend


def with_backend(settings: LoadedSettings, backend: str | None) -> LoadedSettings:
    """`settings` with `storage.backend` set to `backend` (a command's `--store`), for
    everything the command opens; as they are when `backend` is None."""
    if backend is None:
        return settings
    storage = settings.settings.storage.model_copy(update={"backend": backend})
    return replace(settings, settings=settings.settings.model_copy(update={"storage": storage}))


def ticket_stores(root: Path, settings: LoadedSettings, backend: str | None = None) -> Stores:
    """The one way to open a project's ticket stores: `workflow.knowledgeDir` resolved and
    checked against the project once (tf_fsm.settings.load.knowledge_dir), the backend chosen
    (`backend_of`), then a store per ticket id (each id validated before it is used)."""
    return Stores(knowledge_dir(root, settings), backend_of(settings, backend))


def open_store(
    root: Path, settings: LoadedSettings, ticket_id: str, backend: str | None = None
) -> Store:
    """One ticket's store in the project at `root` (see `ticket_stores`)."""
    return ticket_stores(root, settings, backend)(ticket_id)


def memory_refused(settings: LoadedSettings, backend: str | None, what: str) -> None:
    """UsageError (exit 2) when the chosen backend is `memory` and `what` (a command or a
    mode of one) needs other processes to see the ticket's records."""
    if backend_of(settings, backend) != MEMORY:
        return
    source = "--store memory" if backend is not None else 'storage.backend is "memory"'
    raise UsageError(
        f"{source}: {what} needs the ticket's records shared with other processes, which the "
        "memory store keeps in one process; use the files store (`--store files`, or "
        'storage.backend "files")'
    )
