"""Which tests share a worker when the suite runs on several (pytest-xdist, `-n auto --dist
loadgroup`, the README's command).

A module- or session-scoped fixture of this suite is made once per worker that runs a test
using it: the crash harness's recordings and tried crash states, the mutant runs, the Temporal
dev server, the browser. Spread over two workers, each would be made twice (tens of seconds
each, and two dev servers). So every test gets an `xdist_group` named after what it shares:
tests that share such a fixture, directly or through another, are one group, run by one
worker, and the fixture is made once. Tests that share nothing are spread one by one.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from pathlib import Path

import pytest

SUITE = Path(__file__).parent

SHARED_SCOPES = ("session", "package", "module", "class")


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _ours(fixture: object) -> Path | None:
    """The file of this suite that defines `fixture`; None for pytest's own (tmp_path_factory
    is session-scoped, but nothing is made per worker for it)."""
    try:
        where = Path(inspect.getfile(fixture.func)).resolve()  # type: ignore[attr-defined]
    except TypeError:
        return None
    return where if where.is_relative_to(SUITE) else None


def _shared(item: pytest.Item) -> list[str]:
    """What `item` shares with other tests: its module, for a module-scoped fixture (each
    module gets its own), and the fixture itself, for a session-scoped one."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    keys = []
    for name, defs in info.name2fixturedefs.items():
        fixture = defs[-1]  # the definition in effect for this test
        if (where := _ours(fixture)) is None:
            continue
        if fixture.scope == "session":
            keys.append(f"{where.relative_to(SUITE)}:{name}")
        elif fixture.scope in SHARED_SCOPES:
            keys.append(_module(item))
    return keys


def _components(tests: Iterable[list[str]]) -> dict[str, str]:
    """Each key's group: the smallest key it is linked to through tests that use both."""
    parent: dict[str, str] = {}

    def root(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    for keys in tests:
        for other in keys:
            a, b = root(keys[0]), root(other)
            parent[max(a, b)] = min(a, b)
    return {key: root(key) for key in list(parent)}


def group_shared_fixtures(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test that shares a fixture with `xdist_group(<its group>)` (when
    pytest-xdist is there: it defines that mark)."""
    if not config.pluginmanager.hasplugin("xdist"):
        return
    shared = {item.nodeid: _shared(item) for item in items}
    # A test may ask for its module's fixture by name (request.getfixturevalue), unseen here:
    # a module with a module-scoped fixture stays on one worker as a whole.
    modules = {key for keys in shared.values() for key in keys}
    for item in items:
        if _module(item) in modules:
            shared[item.nodeid].append(_module(item))
    group = _components(shared.values())
    for item in items:
        if keys := shared[item.nodeid]:
            item.add_marker(pytest.mark.xdist_group(group[keys[0]]))
