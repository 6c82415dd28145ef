"""The conformance suites' mutant run (test_mutants.py): with TF_FSM_CONFORMANCE_MUTANTS set,
a suite runs against its broken implementations (the `kind` parameter names one); each is
taken out of the run at its first failing test, and the file TF_FSM_CONFORMANCE_CAUGHT names
is given, at the end, which test caught each one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Generator
from pathlib import Path

import pytest

MUTANTS_ENV, CAUGHT_ENV = "TF_FSM_CONFORMANCE_MUTANTS", "TF_FSM_CONFORMANCE_CAUGHT"
#: broken implementation -> the first test that failed it
_caught: dict[str, str] = {}


def _mutant(item: pytest.Item) -> str | None:
    if not os.environ.get(MUTANTS_ENV):
        return None
    callspec = getattr(item, "callspec", None)
    name = callspec.params.get("kind") if callspec is not None else None
    return name if isinstance(name, str) else None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    name = _mutant(item)
    if name is not None and name in _caught:
        pytest.skip(f"{name} was caught by {_caught[name]}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    name = _mutant(item)
    if name is not None and report.failed:
        _caught.setdefault(name, item.nodeid)
    return report


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get(CAUGHT_ENV)
    if out and os.environ.get(MUTANTS_ENV):
        Path(out).write_text(json.dumps(_caught, indent=2), encoding="utf-8")
