"""Each mutant of tests/crash/mutants.py (tf_fsm with one crash-safety rule broken, run as a
real patched process) is caught by the crash harness (docs/crash-testing.md, "Mutants").

In CI each mutant is tried until it is caught, starting from the crash state or crash point
the table run found first (so CI stays short; a change that moves it only makes CI try more).
TF_FSM_CRASH_MUTANTS=1 tries every state and crash point and prints the table's figures:
how many caught the mutant, and by which checks.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from tests.crash import git_scenario, lifecycle, mutants
from tests.crash.conftest import SEED, knob
from tests.crash.git_shim import CrashPoint, Shim
from tests.crash.git_trials import Trial, every_point, run_many

#: TF_FSM_CRASH_MUTANTS=1: every state and crash point (the table), not only until caught
ALL = knob("TF_FSM_CRASH_MUTANTS", 0) > 0
#: the power-loss state that caught each mutant first in the table run (`lost:N`: the N-th
#: lost-file state, `random:N`: the N-th random crash state, of the lifecycle)
FIRST_STATE = {
    "journal-not-fsynced": "random:95",
    "views-not-rebuilt": "random:10",
    "no-sync-before-close": "random:6",
    "torn-tail-kept": "random:14",
    "implementation-not-remade": "lost:1",
}
#: the git crash point that catches each git mutant
FIRST_POINT = {
    "merge-journaled-first": CrashPoint("before", match="merge --no-ff*"),
    "worktree-removed-first": CrashPoint("after", match="update-ref -m tf-fsm: remove*"),
}
VARIANTS = ("lifecycle", "full") if ALL else ("lifecycle",)


def power_loss(mutant: str, variant: str) -> dict[str, Any]:
    """The power-loss harness in a process patched with `mutant`: its JSON verdict."""
    how = ["--all"] if ALL else [f"--first={FIRST_STATE[mutant]}"]
    argv = [sys.executable, "-m", "tests.crash.mutants", "--power-loss", mutant, variant, *how]
    env = {**os.environ, "PYTHONPATH": str(git_scenario.REPO)}
    done = subprocess.run(
        argv,
        cwd=git_scenario.REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    verdict: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return verdict


@pytest.fixture(scope="module")
def power_loss_verdicts() -> dict[tuple[str, str], dict[str, Any]]:
    """Every power-loss mutant, two processes at a time."""
    runs = [(m, v) for m in mutants.POWER_LOSS for v in VARIANTS]
    with ThreadPoolExecutor(2) as pool:
        verdicts = list(pool.map(lambda run: power_loss(*run), runs))
    return dict(zip(runs, verdicts, strict=True))


def row(
    mutant: str, where: str, verdict: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> str:
    """One line of the table: the mutant, what caught it, and how often."""
    line = (
        f"mutant {mutant} ({mutants.DESCRIPTION[mutant]}), {where}: caught by "
        f"{verdict['checks']} in {verdict['caught']} of {verdict['tried']} tried (first: "
        f"{verdict.get('first')})"
    )
    if "without a crash" in verdict:
        line += f"; without a crash: {verdict['without a crash'] or 'silent'}"
    with capsys.disabled():
        print(f"\n{line}")
    return line


@pytest.mark.parametrize("mutant", mutants.POWER_LOSS)
def test_a_power_loss_mutant_is_caught(
    mutant: str,
    power_loss_verdicts: dict[tuple[str, str], dict[str, Any]],
    capsys: pytest.CaptureFixture[str],
) -> None:
    for variant in VARIANTS:
        verdict = power_loss_verdicts[(mutant, variant)]
        line = row(mutant, f"power loss ({variant})", verdict, capsys)
        if variant == "lifecycle":
            assert verdict["caught"] >= 1, line


@pytest.mark.parametrize("mutant", mutants.GIT)
def test_a_git_mutant_is_caught(
    mutant: str,
    git_template: Path,
    git_reference: git_scenario.Reference,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    program = mutants.program(mutant)
    trials = [Trial(FIRST_POINT[mutant], "the mutant's point")]
    verdict: dict[str, Any] = {}
    if ALL:  # and whether the mutant is caught without a crash too
        shim = Shim(tmp_path / "uninterrupted-shim")
        root = git_scenario.copy_project(git_template, tmp_path / "uninterrupted")
        ran = git_scenario.run(root, git_reference.scenario, shim, program=program)
        found = git_scenario.problems(root, git_reference) if ran.code == 0 else [ran.stderr]
        verdict["without a crash"] = sorted({lifecycle.check_of(p) for p in found})
        trials += every_point(git_reference, random.Random(SEED))  # noqa: S311 - seeded
    outcomes = run_many(trials, git_template, tmp_path, git_reference, program, jobs=1 + ALL)
    caught = [(t, o) for t, o in zip(trials, outcomes, strict=True) if o.problems]
    checks = sorted({lifecycle.check_of(p) for _, o in caught for p in o.problems})
    first = str(caught[0][0]) if caught else None
    verdict |= {"checks": checks, "caught": len(caught), "tried": len(trials), "first": first}
    line = row(mutant, "git", verdict, capsys)
    assert caught, line
