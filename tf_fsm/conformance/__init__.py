"""Conformance suites a backend runs unchanged: test support, not part of a run.

`tf_fsm.conformance.store` is the Store suite (tf_fsm.storage.protocol). A backend's test
module imports it and says how to build the backend:

    import pytest
    from tf_fsm.conformance.store import *  # noqa: F403  (the suite's tests and fixtures)
    from tf_fsm.conformance.stores import StoreBackend

    @pytest.fixture
    def backend() -> StoreBackend:
        return StoreBackend("mine", "my_package.tests:build", my_raw, my_snapshot)

then `pytest that_module.py` runs every test against it (tests/conformance/test_store.py runs
it for TicketStore and MemoryStore). Promises beyond the protocol (other processes see the
records, pi-ticketflow's files) are skipped, with the reason, for a store whose
`capabilities` lack them.

This package imports pytest, a dev dependency (`pip install -e '.[dev]'`); nothing else in
tf_fsm imports this package (import-linter checks both).
"""
