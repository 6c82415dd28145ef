"""The executor contract (tf_fsm.executors.base; docs/lifecycle.md "Agents are processes",
docs/executors.md), run against every executor: `command` (tests/fake_agent.py as the agent
process, its usage reported as pi's by tests/stubs/usage_agent.py and read by the `pi`
preset), `scripted`, `handoff` (the test writes the artifact, as a person would) and the
simulator's agent.

* `check()` raises ExecutorError when the executor cannot run at all;
* `invoke()` writes the invocation's output and returns ok, or returns a failure that does not
  claim ok, with a one-line reason and a failure class;
* the executor writes nothing in the project outside the ticket's directory (an agent's edits
  of the working tree are its work, not the executor's: the agents here make none);
* an agent process runs in the invocation's `cwd` (what it edits lands there), and one that
  hangs is ended at the invocation's `timeout`, with what it started;
* the usage the agent reported (tokens, cost) reaches the result, exactly.

The executors, and what each does by design, are in executors.py (`real_kinds`).

What an executor cannot do by design is an explicit expectation of its `Kind`, never a skip.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import pytest

from tests.conformance.executors import (
    BY_CHECK,
    HANG_SECONDS,
    HUNG_CHILDREN,
    NEVER,
    PHASES,
    TICKET,
    WHEN_BUILT,
    Kind,
    invocation,
    kinds,
    tree,
)
from tf_fsm.errors import ExecutorError
from tf_fsm.executors.base import Invocation, OutputMark
from tf_fsm.executors.failures import AGENT_ERROR, TIMEOUT, TRANSIENT

#: the failure classes an executor reports; the others (no_output, uncountable, quality,
#: budget) are verdicts the engine reaches on what the executor returned
EXECUTOR_CLASSES = TRANSIENT | {AGENT_ERROR}
KINDS = kinds()


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


# -- where the agent runs, how long, and what it reported --------------------------------


def test_the_agent_runs_in_the_invocations_working_directory(
    kind: Kind, project: Path, scratch: Path
) -> None:
    cwd = project / ".tf" / "ralph" / "worktrees" / TICKET  # as the ticket's worktree is
    cwd.mkdir(parents=True)
    inv = dataclasses.replace(invocation(project, "implement", "worker"), cwd=cwd)
    if kind.editing is None:  # by design: no process runs anywhere, and no tree is edited
        assert kind.hanging is None
        if kind.person_writes:
            inv.output.write_text(f"# Implementation: {TICKET}\n\nDone by hand.\n")
        assert kind.working(project, scratch).invoke(inv).ok
        assert list(cwd.iterdir()) == []
        return
    before = tree(project, exclude=cwd)
    result = kind.editing(project, scratch).invoke(inv)
    assert result.ok, result
    assert "attempt 1" in (cwd / "work.txt").read_text(encoding="utf-8")
    # nothing at the project root: its artifact is its own output, under `artifact_dir`
    after = tree(project, exclude=cwd)
    assert {k for k in after if k not in before and not k.startswith(".tf/knowledge")} == set()


def test_a_hung_agent_is_ended_at_the_timeout_with_what_it_started(
    kind: Kind, project: Path, scratch: Path
) -> None:
    inv = dataclasses.replace(invocation(project, "implement", "worker"), timeout=0.5)
    if kind.hanging is None:  # by design: no process to end; it returns by itself, in time
        assert kind.editing is None
        if kind.person_writes:
            inv.output.write_text(f"# Implementation: {TICKET}\n\nDone by hand.\n")
        result = kind.working(project, scratch).invoke(inv)
        assert result.ok and result.failure_class is None
        return
    result = kind.hanging(project, scratch).invoke(inv)
    assert result.ok is False and result.failure_class == TIMEOUT, result
    assert result.failure is not None and "timed out" in result.failure
    assert result.duration < HANG_SECONDS
    children = (scratch / HUNG_CHILDREN).read_text().split()
    assert children, "the hung agent started no child"
    assert [pid for pid in map(int, children) if running(pid)] == []


def test_the_usage_the_agent_reported_reaches_the_result(
    kind: Kind, project: Path, scratch: Path, inv: Invocation
) -> None:
    if kind.person_writes:
        inv.output.write_text(f"# {inv.phase.capitalize()}: {TICKET}\n\nDone by hand.\n")
    result = kind.working(project, scratch).invoke(inv)
    assert result.ok, result
    # None only where nothing reports usage by design: a reported zero is not "none"
    assert result.usage == kind.usage


def running(pid: int, within: float = 5.0) -> bool:
    """Is `pid` still running after `within` seconds (a killed process's orphaned child is
    reaped by init, which may take a moment)?"""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except FileNotFoundError:
            return False
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
        time.sleep(0.05)
    return os.path.exists(f"/proc/{pid}")
