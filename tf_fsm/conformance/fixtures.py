"""The Store suite's fixtures, built on the `backend` fixture a backend's test module gives
(tf_fsm.conformance.stores.StoreBackend)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tf_fsm.conformance.stores import SECRET, TICKET, Holders, Raw, StoreBackend
from tf_fsm.storage.protocol import Capabilities, Store
from tf_fsm.storage.redact import Redactor

#: why a test is skipped for a store without a capability
WHY = {
    "shared_across_processes": "the store's records and lock are not shared with other "
    "processes (a promise about a second process)",
    "pi_ticketflow_files": "the store keeps no files of its own (a promise about files on "
    "disk: symlinks, a reader of the old file, a disk that refuses a write)",
}


def needs(store: Store, capability: str) -> None:
    """Skip the test, saying why, unless `store` has `capability` (a Capabilities field)."""
    if not getattr(store.capabilities, capability):
        pytest.skip(f"{type(store).__name__}: {WHY[capability]}")


@pytest.fixture
def root(tmp_path: Path, backend: StoreBackend) -> Iterator[Path]:
    """A directory of the stores' own (conftest puts a project root in tmp_path)."""
    directory = tmp_path / "stores"
    directory.mkdir()
    yield directory
    backend.close(directory)


@pytest.fixture
def spec(backend: StoreBackend) -> str:
    """The store under test, as `module:function` (a second process builds its own from it)."""
    return backend.spec


@pytest.fixture
def make(backend: StoreBackend, root: Path) -> Callable[[str], Store]:
    return lambda ticket_id: backend.build(root, ticket_id, Redactor([SECRET]))


@pytest.fixture
def store(make: Callable[[str], Store]) -> Store:
    return make(TICKET)


@pytest.fixture
def raw(backend: StoreBackend, store: Store) -> Raw:
    """The records of `store`, reached around it."""
    return backend.raw(store)


@pytest.fixture
def snapshot(backend: StoreBackend, root: Path) -> Callable[[], object]:
    """Everything the backend keeps for the stores under root, now."""
    return lambda: backend.snapshot(root)


@pytest.fixture
def holders() -> Iterator[Holders]:
    held = Holders()
    yield held
    held.close()


__all__ = ["Capabilities", "holders", "make", "needs", "raw", "root", "snapshot", "spec", "store"]
