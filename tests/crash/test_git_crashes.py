"""Crashes at git command boundaries of a ticket in its worktree, and a second crash during
the recovery run: whatever the instant, reruns end in the uninterrupted run's final state,
git included (docs/crash-testing.md, "Crash points in git").

Each trial kills a real `tf-fsm run` at one git command (tests/crash/git_shim.py), may kill
the rerun again, then runs `tf-fsm run` until it exits 0 and compares: the ticket's state and
every artifact, main's history and files, nothing left behind (tests/crash/git_scenario.py).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from tests.crash import git_scenario
from tests.crash.conftest import SEED, SOAK, knob
from tests.crash.git_trials import (
    SECOND_CRASHES,
    Outcome,
    Trial,
    ci_points,
    every_point,
    merged,
    run_many,
    second_crashes,
)

#: TF_FSM_CRASH_GIT_ALL=1: every boundary of every git command (~190 trials) instead of CI's
ALL = knob("TF_FSM_CRASH_GIT_ALL", 0) > 0


def run_all(
    trials: list[Trial], template: Path, tmp: Path, reference: git_scenario.Reference
) -> Outcome:
    return merged(run_many(trials, template, tmp, reference))


def summary(label: str, outcome: Outcome, capsys: pytest.CaptureFixture[str]) -> str:
    line = f"{label}: {dict(sorted(outcome.seen.items()))}"
    with capsys.disabled():
        print(f"\n{line}")
    return line


def test_every_step_of_the_lifecycle_has_git_crash_points(
    git_reference: git_scenario.Reference,
) -> None:
    """Every step runs git, so each has crash points: a step missing here is one the plan
    would never crash in."""
    steps = {s.split(" (")[0] for s in git_scenario.steps(git_reference).values()}
    assert git_reference.scenario.steps <= steps, steps
    rng = random.Random(SEED)  # noqa: S311 - seeded test data
    planned = {t.step.split(" (")[0] for t in ci_points(git_reference, rng)}
    assert planned == steps  # a step the scenario does not name yet (a new one) too


def planned(reference: git_scenario.Reference) -> list[Trial]:
    rng = random.Random(SEED)  # noqa: S311 - seeded test data
    base = every_point(reference, rng) if ALL else ci_points(reference, rng)
    every = every_point(reference, rng)
    return base + [t for _ in range(SOAK - 1) for t in rng.sample(every, len(base) // 2)]


def test_a_crash_at_a_git_command_boundary_ends_as_the_uninterrupted_run(
    git_template: Path,
    git_reference: git_scenario.Reference,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    trials = planned(git_reference)
    outcome = run_all(trials, git_template, tmp_path, git_reference)
    line = summary(f"git crash points (seed {SEED})", outcome, capsys)
    assert not outcome.problems, "\n".join(outcome.problems)
    assert outcome.seen["killed"] == len(trials), line


def test_a_second_crash_during_the_recovery_run_ends_as_the_uninterrupted_run(
    git_template: Path,
    git_reference: git_scenario.Reference,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    rng = random.Random(SEED)  # noqa: S311 - seeded test data
    trials = second_crashes(git_reference, rng, SOAK)
    outcome = run_all(trials, git_template, tmp_path, git_reference)
    line = summary(f"second crashes (seed {SEED})", outcome, capsys)
    assert not outcome.problems, "\n".join(outcome.problems)
    assert outcome.seen["killed again in the rerun"] >= len(SECOND_CRASHES), line
