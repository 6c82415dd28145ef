"""The Store conformance suite (tf_fsm.conformance.store), run for every Store of tf_fsm, and,
in the mutant run (test_mutants.py), for each deliberately broken store."""

from __future__ import annotations

import os

import pytest

from tests.conformance.broken_stores import BROKEN
from tests.conformance.conftest import MUTANTS_ENV
from tf_fsm.conformance.store import *  # noqa: F403  (the suite's tests and fixtures)
from tf_fsm.conformance.stores import BACKENDS, StoreBackend

_STORES = BROKEN if os.environ.get(MUTANTS_ENV) == "stores" else BACKENDS


@pytest.fixture(params=sorted(_STORES))
def kind(request: pytest.FixtureRequest) -> str:
    """The store under test by name (a broken one's name in the mutant run)."""
    return str(request.param)


@pytest.fixture
def backend(kind: str) -> StoreBackend:
    return _STORES[kind]
