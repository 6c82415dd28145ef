"""The Store conformance suite (tf_fsm.conformance.store), run for every Store of tf_fsm."""

from __future__ import annotations

import pytest

from tf_fsm.conformance.store import *  # noqa: F403  (the suite's tests and fixtures)
from tf_fsm.conformance.stores import BACKENDS, StoreBackend


@pytest.fixture(params=sorted(BACKENDS))
def backend(request: pytest.FixtureRequest) -> StoreBackend:
    return BACKENDS[request.param]
