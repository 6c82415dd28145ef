"""The executor contract (tf_fsm.executors.base; docs/lifecycle.md "Agents are processes",
docs/executors.md), run against every executor: `command` (tests/fake_agent.py as the agent
process), `scripted`, `handoff` (the test writes the artifact, as a person would) and the
simulator's agent.

* `check()` raises ExecutorError when the executor cannot run at all;
* `invoke()` writes the invocation's output and returns ok, or returns a failure that does not
  claim ok, with a one-line reason and a failure class;
* the executor writes nothing in the project outside the ticket's directory (an agent's edits
  of the working tree are its work, not the executor's: the agents here make none).

What an executor cannot do by design is an explicit expectation of its `Kind`, never a skip.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tf_fsm.core.artifacts import agent_artifact
from tf_fsm.errors import ExecutorError
from tf_fsm.executors.base import Executor, Invocation, OutputMark
from tf_fsm.executors.command import CommandExecutor
from tf_fsm.executors.failures import AGENT_ERROR, TRANSIENT
from tf_fsm.executors.handoff import HandoffExecutor
from tf_fsm.executors.scripted import Scenario, ScriptedExecutor, load_scenario
from tf_fsm.settings.load import ROLES
from tf_fsm.simulate.agent import SimulatedAgent
from tf_fsm.simulate.profile import Profile

FAKE_AGENT = Path(__file__).resolve().parents[1] / "fake_agent.py"
TICKET = "pt-1"
MODEL = "provider/model-a"
#: the failure classes an executor reports; the others (no_output, uncountable, quality,
#: budget) are verdicts the engine reaches on what the executor returned
EXECUTOR_CLASSES = TRANSIENT | {AGENT_ERROR}

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
    person_writes: bool = False  # the artifact is written by a person, not the executor
    waits: bool = False  # without the artifact it waits (not a failure) rather than fails


def _agent_env(scratch: Path, plan: dict[str, Any] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_AGENT")}
    if plan is not None:
        path = scratch / "agent-plan.json"
        path.write_text(json.dumps(plan), encoding="utf-8")
        env["FAKE_AGENT_PLAN"] = str(path)
    return env


def _command(root: Path, scratch: Path) -> Executor:
    return CommandExecutor([sys.executable, str(FAKE_AGENT)], root, _agent_env(scratch))


def _crashing_command(root: Path, scratch: Path) -> Executor:
    plan = {"crash": [{"phase": p, "exitCode": 3, "stderr": "fake agent crashed"}
                      for p in ("implement", "review", "fix")]}  # fmt: skip
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


KINDS: dict[str, Kind] = {
    "command": Kind(_command, _crashing_command, _missing_command, BY_CHECK),
    "scripted": Kind(
        lambda root, scratch: ScriptedExecutor(load_scenario(None)),
        _failing_scenario,
        _missing_scenario,
        WHEN_BUILT,
    ),
    "handoff": Kind(
        lambda root, scratch: HandoffExecutor(wait_seconds=30, stable_seconds=0.05),
        lambda root, scratch: HandoffExecutor(wait_seconds=0, stable_seconds=0.05),
        None,
        NEVER,
        person_writes=True,
        waits=True,
    ),
    "simulated": Kind(_simulated(0.0), _simulated(1.0), None, NEVER),
}
PHASES = [("implement", "worker"), ("review", "reviewer-general"), ("fix", "fixer")]


@pytest.fixture(params=sorted(KINDS))
def kind(request: pytest.FixtureRequest) -> Kind:
    return KINDS[request.param]


@pytest.fixture
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory outside the project for the executor's own inputs (plan, scenario)."""
    return tmp_path_factory.mktemp("scratch")


@pytest.fixture(params=PHASES, ids=lambda phase_role: phase_role[0])
def inv(request: pytest.FixtureRequest, project: Path) -> Invocation:
    """An invocation of one of PHASES, its prompt and chain context written as a run does."""
    phase, role = request.param
    return invocation(project, phase, role)


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
        ticket_id=TICKET, phase=phase, role=role, model=MODEL, thinking=None, attempt=1,
        root=root, artifact_dir=artifact_dir, output=artifact_dir / agent_artifact(phase, role),
        prompt=prompt, prompt_file=prompt_file, chain_context=chain_context,
        log_file=artifact_dir / "logs" / "attempt-1" / f"{phase}-{role}.log",
    )  # fmt: skip


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


def test_a_runnable_executor_passes_its_check_and_it_writes_nothing(
    kind: Kind, project: Path, scratch: Path
) -> None:
    executor = kind.working(project, scratch)
    invocation(project, "implement", "worker")  # the ticket's directory as a run has it
    before = tree(project)
    executor.check()
    assert tree(project) == before


def test_an_executor_that_cannot_run_is_refused_before_any_invocation(
    kind: Kind, project: Path, scratch: Path
) -> None:
    if kind.refused == BY_CHECK:
        assert kind.unrunnable is not None
        executor = kind.unrunnable(project, scratch)
        with pytest.raises(ExecutorError) as info:
            executor.check()
        assert "\n" not in str(info.value)
    elif kind.refused == WHEN_BUILT:
        assert kind.unrunnable is not None
        with pytest.raises(ExecutorError) as info:
            kind.unrunnable(project, scratch)
        assert "\n" not in str(info.value)
    else:  # by design: nothing it needs is outside tf_fsm, so its check always passes
        assert kind.refused == NEVER and kind.unrunnable is None
        kind.working(project, scratch).check()  # raises nothing


def test_a_successful_invocation_writes_its_output_and_claims_ok(
    kind: Kind, project: Path, scratch: Path, inv: Invocation
) -> None:
    executor = kind.working(project, scratch)
    if kind.person_writes:  # as a person does, after reading the prompt
        inv.output.write_text(f"# {inv.phase.capitalize()}: {TICKET}\n\nDone by hand.\n")
    mark = OutputMark.of(inv.output)
    before = tree(project, exclude=inv.artifact_dir)

    result = executor.invoke(inv)

    assert result.ok is True, result
    assert (result.failure, result.failure_class, result.waiting) == (None, None, False)
    assert inv.output.is_file()
    assert inv.output.read_text(encoding="utf-8").strip()
    if kind.person_writes:  # taken as it is: the executor does not touch it
        assert result.accepted_existing is True
        assert not mark.written_since(inv.output)
    else:  # written by this invocation, which the engine checks
        assert result.accepted_existing is False
        assert mark.written_since(inv.output)
    assert tree(project, exclude=inv.artifact_dir) == before


def test_a_failed_invocation_does_not_claim_ok(
    kind: Kind, project: Path, scratch: Path, inv: Invocation
) -> None:
    executor = kind.failing(project, scratch)
    before = tree(project, exclude=inv.artifact_dir)

    result = executor.invoke(inv)

    assert result.ok is False, result
    assert result.failure, result
    assert "\n" not in result.failure  # one line: it goes into the journal and the summary
    if kind.waits:  # by design: without the artifact it waits for it, which is no failure
        assert result.waiting is True
        assert result.failure_class is None
    else:
        assert result.waiting is False
        assert result.failure_class in EXECUTOR_CLASSES
    assert tree(project, exclude=inv.artifact_dir) == before
