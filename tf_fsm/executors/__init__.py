"""Executors run one agent invocation each. `executor.kind` in settings picks one."""

from __future__ import annotations

from pathlib import Path

from tf_fsm.executors.base import Executor, ExecutorError, Invocation, InvocationResult, OutputMark
from tf_fsm.settings.load import LoadedSettings

__all__ = [
    "Executor",
    "ExecutorError",
    "Invocation",
    "InvocationResult",
    "OutputMark",
    "make_executor",
]


def make_executor(settings: LoadedSettings, root: Path) -> Executor:
    conf = settings.settings.executor
    if conf.kind == "handoff":
        from tf_fsm.executors.handoff import HandoffExecutor

        return HandoffExecutor(conf.waitSeconds, conf.stableSeconds)
    if conf.kind == "scripted":
        from tf_fsm.executors.scripted import ScriptedExecutor, load_scenario

        path = None
        if conf.scenario:
            path = (
                Path(conf.scenario) if Path(conf.scenario).is_absolute() else root / conf.scenario
            )
        return ScriptedExecutor(load_scenario(path))
    from tf_fsm.executors.command import CommandExecutor
    from tf_fsm.executors.presets import preset

    return CommandExecutor(
        conf.command,
        root,
        preset=preset(conf.preset) if conf.preset else None,
        program=conf.program,
        extra_args=conf.extraArgs,
    )
