"""The executors the Executor conformance suite (test_executors.py) runs against, what each does
by design (`Kind`), and the invocation the engine would give one.

An executor is built by a function taking (the project root, a directory outside the project
for its own inputs). A second implementation is one more entry in KINDS.

With TF_FSM_CONFORMANCE_MUTANTS=executors the suite runs against the deliberately broken
executors of broken_executors.py instead (test_mutants.py).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tf_fsm.core.artifacts import agent_artifact
from tf_fsm.executors.base import Executor, Invocation
from tf_fsm.executors.command import CommandExecutor
from tf_fsm.executors.handoff import HandoffExecutor
from tf_fsm.executors.presets import preset
from tf_fsm.executors.scripted import Scenario, ScriptedExecutor, load_scenario
from tf_fsm.executors.usage import Usage
from tf_fsm.settings.load import ROLES
from tf_fsm.simulate.agent import SimulatedAgent
from tf_fsm.simulate.profile import Profile

TESTS = Path(__file__).resolve().parents[1]
FAKE_AGENT = TESTS / "fake_agent.py"
#: tests/fake_agent.py, reporting its usage as `pi --mode json` does
USAGE_AGENT = TESTS / "stubs" / "usage_agent.py"
TICKET = "pt-1"
MODEL = "provider/model-a"
MUTANTS_ENV = "TF_FSM_CONFORMANCE_MUTANTS"
PHASES = [("implement", "worker"), ("review", "reviewer-general"), ("fix", "fixer")]
#: how long a hung agent would run by itself: far beyond the suite's timeouts
HANG_SECONDS = 3.0
#: the file in the executor's scratch directory a hung agent writes its child's pid to
HUNG_CHILDREN = "hung-children.txt"

# How an executor that cannot run at all is refused.
BY_CHECK = "check() raises ExecutorError"
WHEN_BUILT = "building it from its settings raises ExecutorError, before check()"
NEVER = "nothing outside tf_fsm to check: it can always run"

Build = Callable[[Path, Path], Executor]  # (project root, a directory outside the project)


@dataclass(frozen=True)
class Kind:
    working: Build  # runs the suite's invocations
    failing: Build  # fails them, as its own kind of failure
    unrunnable: Build | None  # one that cannot run at all (None: see `refused`)
    refused: str  # BY_CHECK, WHEN_BUILT or NEVER
    #: what `working` reports each invocation used (None: nothing, by design: no agent CLI
    #: reports it); the result must carry exactly that
    usage: Usage | None
    #: its agent is a process the executor starts: `editing` edits `work.txt` in its working
    #: directory, `hanging` never ends by itself (None both: an in-process agent or a person,
    #: with no process to place or to end)
    editing: Build | None = None
    hanging: Build | None = None
    person_writes: bool = False  # the artifact is written by a person, not the executor
    waits: bool = False  # without the artifact it waits (not a failure) rather than fails


def _agent_env(scratch: Path, plan: dict[str, Any] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FAKE_AGENT", "USAGE_"))}
    if plan is not None:
        path = scratch / "agent-plan.json"
        path.write_text(json.dumps(plan), encoding="utf-8")
        env["FAKE_AGENT_PLAN"] = str(path)
    env["FAKE_AGENT_CHILD_PID"] = str(scratch / HUNG_CHILDREN)
    return env


def _pi_agent(plan: dict[str, Any] | None = None) -> Build:
    """The usage agent behind the `pi` preset's parser (`plan`: what the fake agent does)."""

    def build(root: Path, scratch: Path) -> Executor:
        env = _agent_env(scratch, plan)
        argv = [sys.executable, str(USAGE_AGENT)]
        return CommandExecutor(argv, root, env, preset=preset("pi"))

    return build


def _every_phase(rule: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"phase": phase, **rule} for phase, _role in PHASES]


def _crashing_command(root: Path, scratch: Path) -> Executor:
    plan = {"crash": _every_phase({"exitCode": 3, "stderr": "fake agent crashed"})}
    return CommandExecutor([sys.executable, str(FAKE_AGENT)], root, _agent_env(scratch, plan))


def _missing_command(root: Path, scratch: Path) -> Executor:
    return CommandExecutor(["definitely-not-a-real-agent-xyz"], root, _agent_env(scratch))


def _failing_scenario(root: Path, scratch: Path) -> Executor:
    failures = [
        {"phase": p, "message": "agent crashed: boom"} for p in ("implement", "review", "fix")
    ]
    return ScriptedExecutor(Scenario.model_validate({"failures": failures}))


def _missing_scenario(root: Path, scratch: Path) -> Executor:
    return ScriptedExecutor(load_scenario(scratch / "no-such-scenario.json"))


def _simulated(transient: float) -> Build:
    """The simulator's agent with one model for every role, failing with a provider error
    (transient) at the given rate."""

    def build(root: Path, scratch: Path) -> Executor:
        profile = Profile.model_validate(
            {
                "roles": dict.fromkeys(ROLES, MODEL),
                "models": {MODEL: {"costUsd": 0.1, "reach": 0.5, "transient": transient}},
            }
        )
        return SimulatedAgent(profile, seed=1, hidden={})

    return build


def real_kinds() -> dict[str, Kind]:
    return {
        "command": Kind(
            _pi_agent(),
            _crashing_command,
            _missing_command,
            BY_CHECK,
            # tests/stubs/usage_agent.py's report of every invocation
            usage=Usage(input_tokens=1000, output_tokens=100, cost_usd=0.01),
            editing=_pi_agent({"edits": _every_phase({"file": "work.txt"})}),
            hanging=_pi_agent({"hang": _every_phase({"seconds": HANG_SECONDS})}),
        ),
        "scripted": Kind(
            lambda root, scratch: ScriptedExecutor(load_scenario(None)),
            _failing_scenario,
            _missing_scenario,
            WHEN_BUILT,
            usage=None,
        ),
        "handoff": Kind(
            lambda root, scratch: HandoffExecutor(wait_seconds=30, stable_seconds=0.05),
            lambda root, scratch: HandoffExecutor(wait_seconds=0, stable_seconds=0.05),
            None,
            NEVER,
            usage=None,
            person_writes=True,
            waits=True,
        ),
        # the profile's cost of its model, per invocation, as the CLI presets report it
        "simulated": Kind(_simulated(0.0), _simulated(1.0), None, NEVER, Usage(cost_usd=0.1)),
    }


def kinds() -> dict[str, Kind]:
    """Every executor by name; the broken ones in a mutant run."""
    if os.environ.get(MUTANTS_ENV) == "executors":
        from tests.conformance.broken_executors import BROKEN

        return BROKEN
    return real_kinds()


def invocation(root: Path, phase: str, role: str) -> Invocation:
    """An invocation as the engine makes one: its prompt and chain-context.json written first."""
    artifact_dir = root / ".tf" / "knowledge" / "tickets" / TICKET
    prompt = f"Do the {phase} of {TICKET} as {role}.\n"
    prompt_file = artifact_dir / "prompts" / "attempt-1" / f"{phase}-{role}.md"
    prompt_file.parent.mkdir(parents=True)
    prompt_file.write_text(prompt, encoding="utf-8")
    chain_context = artifact_dir / "chain-context.json"
    chain_context.write_text(json.dumps({"attempt": 1, "models": {role: {"model": MODEL}}}))
    return Invocation(
        ticket_id=TICKET,
        phase=phase,
        role=role,
        model=MODEL,
        thinking=None,
        attempt=1,
        root=root,
        artifact_dir=artifact_dir,
        output=artifact_dir / agent_artifact(phase, role),
        prompt=prompt,
        prompt_file=prompt_file,
        chain_context=chain_context,
        log_file=artifact_dir / "logs" / "attempt-1" / f"{phase}-{role}.log",
    )


def tree(root: Path, exclude: Path | None = None) -> dict[str, tuple[object, ...]]:
    """The project's files and directories (those under `exclude` left out), with their
    bytes and mtimes."""
    seen: dict[str, tuple[object, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        if exclude is not None and (here == exclude or exclude in here.parents):
            continue
        for name in dirnames + filenames:
            path = here / name
            if path == exclude:
                continue
            st = path.lstat()
            content = path.read_bytes() if path.is_file() and not path.is_symlink() else None
            seen[str(path.relative_to(root))] = (st.st_mode, st.st_mtime_ns, content)
    return seen
