"""Deliberately broken executors: each is the `command` executor of the suite (the agent a real
process) with one promise of the Executor contract broken, as a plausible bug would break it.
test_mutants.py runs the Executor suite against each and checks that every one fails it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tests.conformance.executors import Build, Kind, real_kinds
from tf_fsm.executors.base import Executor, Invocation, InvocationResult
from tf_fsm.executors.command import CommandExecutor


class IgnoresCwd(CommandExecutor):
    """Runs the agent at the project root wherever the invocation says it runs."""

    def invoke(self, invocation: Invocation) -> InvocationResult:
        return super().invoke(dataclasses.replace(invocation, cwd=None))


class IgnoresTimeout(CommandExecutor):
    """Waits for the agent however long it takes."""

    def invoke(self, invocation: Invocation) -> InvocationResult:
        return super().invoke(dataclasses.replace(invocation, timeout=None))


class DropsUsage(CommandExecutor):
    """Never passes on the tokens and cost the agent reported."""

    def invoke(self, invocation: Invocation) -> InvocationResult:
        return dataclasses.replace(super().invoke(invocation), usage=None)


def _as(cls: type[CommandExecutor], build: Build | None) -> Build | None:
    """`build`, its executor given the broken class (so it keeps whatever it was built with)."""
    if build is None:
        return None

    def broken(root: Path, scratch: Path) -> Executor:
        executor = build(root, scratch)
        assert isinstance(executor, CommandExecutor)
        executor.__class__ = cls
        return executor

    return broken


def _broken(cls: type[CommandExecutor]) -> Kind:
    """The `command` kind, every executor it builds broken the same way."""
    real = real_kinds()["command"]
    working = _as(cls, real.working)
    failing = _as(cls, real.failing)
    assert working is not None and failing is not None
    return dataclasses.replace(
        real,
        working=working,
        failing=failing,
        unrunnable=_as(cls, real.unrunnable),
        editing=_as(cls, real.editing),
        hanging=_as(cls, real.hanging),
    )


MUTANTS = (IgnoresCwd, IgnoresTimeout, DropsUsage)
BROKEN: dict[str, Kind] = {cls.__name__: _broken(cls) for cls in MUTANTS}
