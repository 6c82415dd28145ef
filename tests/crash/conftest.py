"""The crash tests' knobs and the uninterrupted reference run, recorded once per session.

TF_FSM_CRASH_SOAK=<N> multiplies the number of crash states and SIGKILL trials by N;
TF_FSM_CRASH_SEED=<s> picks the base seed (default fixed: CI is reproducible);
TF_FSM_CRASH_ONLY=<i> runs only crash state number i of that seed (replaying a failure).
See docs/crash-testing.md.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.crash import git_scenario, lifecycle
from tests.crash.model import snapshot
from tests.crash.recorder import Op, Recorder

DEFAULT_SEED = 20241


def knob(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    try:
        return int(value) if value else default
    except ValueError:
        raise pytest.UsageError(f"{name} must be an integer, not {value!r}") from None


SOAK = max(1, knob("TF_FSM_CRASH_SOAK", 1))
#: where the power-loss states are materialized and run again, when it is a RAM file system
#: with room: each rerun fsyncs its durable points, and on a disk those syncs and the removal
#: of each passed state's directory were three quarters of the module's time. The model
#: decides what a power cut keeps (tests/crash/model.py), not the disk the rerun runs on.
#: The git trials stay on the disk: a worktree's checkout there is slow enough to be cut short.
RAM_DIR, RAM_MIN_FREE = Path("/dev/shm"), 1 << 30
SEED = knob("TF_FSM_CRASH_SEED", DEFAULT_SEED)
ONLY = knob("TF_FSM_CRASH_ONLY", -1)


@dataclass(frozen=True)
class Recording:
    """A reference run: the project before it, every op it made, and its final state."""

    workflow: dict[str, Any]
    files: dict[str, bytes]
    dirs: set[str]
    ops: list[Op]
    reference: lifecycle.Final


def record(root: Path, workflow: dict[str, Any]) -> Recording:
    lifecycle.make_project(root, workflow)
    files, dirs = snapshot(root)
    recorder = Recorder(root)
    with pytest.MonkeyPatch.context() as patch:
        recorder.install(patch)
        outcome = lifecycle.run_once(root)
    assert (outcome.status, outcome.attempts_run) == ("closed", 3), outcome
    reference = lifecycle.final_state(root)
    assert reference.attempts == [(1, "blocked"), (2, "blocked"), (3, "closed")], reference
    assert (reference.state["status"], reference.state["retryCount"]) == ("closed", 0)
    assert lifecycle.problems(root, reference) == []  # the reference passes its own checks
    return Recording(workflow, files, dirs, recorder.ops, reference)


def _ram_dir() -> Path | None:
    try:
        free = os.statvfs(RAM_DIR)
    except OSError:
        return None
    room = free.f_bavail * free.f_frsize >= RAM_MIN_FREE
    return RAM_DIR if room and os.access(RAM_DIR, os.W_OK | os.X_OK) else None


@pytest.fixture(scope="session")
def states_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A directory for crash states (RAM_DIR when it can, else pytest's temporary directory).
    A state that passed removes its own directory; a failing one's is kept, to be looked at."""
    ram = _ram_dir()
    if ram is None:
        yield tmp_path_factory.mktemp("states")
        return
    root = Path(tempfile.mkdtemp(prefix="tf-fsm-crash-states-", dir=ram))
    yield root
    for place in sorted(root.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if place.is_dir() and not any(place.iterdir()):
            place.rmdir()
    if any(root.iterdir()):
        print(f"\nthe failing crash states are kept in {root}")
    else:
        root.rmdir()


@pytest.fixture(scope="session")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recording]:
    yield record(tmp_path_factory.mktemp("reference") / "project", lifecycle.WORKFLOW)


@pytest.fixture(scope="session")
def full_recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recording]:
    """The variant with research and the closer on."""
    yield record(tmp_path_factory.mktemp("reference-full") / "project", lifecycle.FULL_WORKFLOW)


@pytest.fixture(scope="session", params=git_scenario.SCENARIOS, ids=lambda s: s.name)
def crash_scenario(request: pytest.FixtureRequest) -> git_scenario.Scenario:
    scenario: git_scenario.Scenario = request.param
    return scenario


@pytest.fixture(scope="session")
def git_template(
    crash_scenario: git_scenario.Scenario, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """The git scenario's project before any run (tests/crash/git_scenario.py)."""
    root = tmp_path_factory.mktemp(f"git-template-{crash_scenario.name}") / "project"
    return git_scenario.make_template(root, crash_scenario)


@pytest.fixture(scope="session")
def git_reference(
    crash_scenario: git_scenario.Scenario,
    git_template: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[git_scenario.Reference]:
    """The git scenario run once uninterrupted, each git command's journal offset noted."""
    from tests.crash.git_shim import Shim

    tmp = tmp_path_factory.mktemp(f"git-reference-{crash_scenario.name}")
    root = git_scenario.copy_project(git_template, tmp / "project")
    ran = git_scenario.run(root, crash_scenario, Shim(tmp / "shim"), measure=True)
    assert ran.code == 0, ran.stderr
    final = lifecycle.final_state(root)
    assert tuple(final.attempts) == crash_scenario.attempts, final
    reference = git_scenario.Reference(
        crash_scenario,
        final,
        git_scenario.git_final(root),
        ran.calls,
        git_scenario.events_with_offsets(root),
    )
    assert git_scenario.problems(root, reference) == []  # the reference passes its own checks
    yield reference
