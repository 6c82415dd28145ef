"""Executors run one agent invocation each. `executor.kind` in settings picks one from
`EXECUTORS`, the registry keyed by kind."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tf_fsm.executors.base import Executor, ExecutorError, Invocation, InvocationResult, OutputMark
from tf_fsm.settings.load import LoadedSettings

__all__ = [
    "EXECUTORS",
    "Executor",
    "ExecutorError",
    "Invocation",
    "InvocationResult",
    "OutputMark",
    "make_executor",
]

# Each factory imports its executor's module when called, so start-up loads only the one used.


def _handoff(settings: LoadedSettings, root: Path) -> Executor:
    from tf_fsm.executors.handoff import HandoffExecutor

    conf = settings.settings.executor
    return HandoffExecutor(conf.waitSeconds, conf.stableSeconds)


def _scripted(settings: LoadedSettings, root: Path) -> Executor:
    from tf_fsm.executors.scripted import ScriptedExecutor, load_scenario

    scenario = settings.settings.executor.scenario
    return ScriptedExecutor(load_scenario(root / scenario if scenario else None))


def _command(settings: LoadedSettings, root: Path) -> Executor:
    from tf_fsm.executors.command import CommandExecutor
    from tf_fsm.executors.presets import preset

    conf = settings.settings.executor
    return CommandExecutor(
        conf.command,
        root,
        preset=preset(conf.preset) if conf.preset else None,
        program=conf.program,
        extra_args=conf.extraArgs,
    )


#: `executor.kind` -> the factory that builds it from the settings and the project root
EXECUTORS: dict[str, Callable[[LoadedSettings, Path], Executor]] = {
    "command": _command,
    "scripted": _scripted,
    "handoff": _handoff,
}


def make_executor(settings: LoadedSettings, root: Path) -> Executor:
    return EXECUTORS[settings.settings.executor.kind](settings, root)
