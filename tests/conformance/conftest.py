"""The conformance suites' fixtures: each store implementation in tests/conformance/stores.py
STORES, built fresh for a test, and real second processes that hold a store's lock."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conformance.stores import SECRET, STORES, TICKET, Holders, factory
from tf_fsm.storage.protocol import Store
from tf_fsm.storage.redact import Redactor


@pytest.fixture(params=sorted(STORES))
def spec(request: pytest.FixtureRequest) -> str:
    """The store under test, as `module:function` (a second process builds its own from it)."""
    return STORES[request.param]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A directory of the stores' own (conftest puts a project root in tmp_path)."""
    directory = tmp_path / "stores"
    directory.mkdir()
    return directory


@pytest.fixture
def make(spec: str, root: Path) -> Callable[[str], Store]:
    build = factory(spec)
    return lambda ticket_id: build(root, ticket_id, Redactor([SECRET]))


@pytest.fixture
def store(make: Callable[[str], Store]) -> Store:
    return make(TICKET)


@pytest.fixture
def holders() -> Iterator[Holders]:
    held = Holders()
    yield held
    held.close()
