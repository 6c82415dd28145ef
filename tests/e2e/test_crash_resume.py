"""SIGKILL at random points, then resume: every trial ends as an uninterrupted run does.

Half the trials kill tf_fsm from outside after a seeded random delay (any instant: between
fsyncs, mid-journal-append, while an agent runs); the other half have the fake agent kill
tf_fsm and itself from inside an invocation, leaving a half-written temp file. Each trial then
runs `tf-fsm run` again until the ticket settles, and must end with the same retry-state
history, the same artifact names and no completed phase run twice.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.crash.conftest import SOAK
from tests.e2e.conftest import STRONG, Harness, finding

#: 20 in CI, as the crash harness's SIGKILL trials; TF_FSM_CRASH_SOAK=N runs N times as many
TRIALS = 20 * SOAK
SETTLED = (0, 3, 4)


def start(e2e: Harness) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "FAKE_AGENT_PLAN": str(e2e.plan_file),
        "FAKE_AGENT_LOG": str(e2e.log_file),
        "TF_FSM_ROOT": str(e2e.project),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tf_fsm", "run", "pt-1"],
        cwd=e2e.project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def settle(e2e: Harness) -> int:
    for _ in range(8):
        result = e2e.run()
        if result.returncode in SETTLED:
            return result.returncode
        assert result.returncode != 75, result.stderr  # the dead run's lock must be free
    raise AssertionError(f"did not settle: {result.returncode} {result.stderr}")


def history(e2e: Harness) -> list[tuple[Any, ...]]:
    state = e2e.read_state()
    return [
        (
            a["attemptNumber"],
            a["status"],
            a["trigger"],
            a["escalation"]["fixer"],
            a["qualityGate"]["counts"]["Major"],
        )
        for a in state["attempts"]
    ] + [("top", state["status"], state["retryCount"])]


def artifacts(e2e: Harness) -> set[str]:
    skip = ("fake-agent-state.json", ".lock")
    return {
        str(p.relative_to(e2e.dir))
        for p in e2e.dir.rglob("*")
        if p.is_file() and not p.name.startswith(skip)
    }


def completed_twice(e2e: Harness) -> list[tuple[int, str]]:
    done = Counter(
        (ev["attempt"], ev["phase"]) for ev in e2e.events() if ev["event"] == "PhaseCompleted"
    )
    return [key for key, n in done.items() if n > 1]


@pytest.fixture
def baseline(e2e: Harness) -> dict[str, Any]:
    e2e.plan(findings=[finding("f1", [STRONG])])
    started = time.monotonic()
    assert e2e.run().returncode == 0
    reference = {
        "history": history(e2e),
        "artifacts": artifacts(e2e),
        "seconds": time.monotonic() - started,
        "calls": len(e2e.agent_calls()),
    }
    assert reference["history"][:2] == [
        (1, "blocked", "initial", None, 1),
        (2, "closed", "quality_gate", STRONG, 0),
    ]
    return reference


def trial_harness(root: Path) -> Harness:
    """A fresh project of its own for one trial, set up as the `e2e` fixture sets one up."""
    project = root / "project"
    (project / ".tf" / "config").mkdir(parents=True)

    def write_settings(data: dict[str, Any]) -> Path:
        path = project / ".tf" / "config" / "settings.json"
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")
        return path

    return Harness(project, root, write_settings)


def one_trial(trial: int, root: Path, baseline: dict[str, Any]) -> tuple[list[str], Counter[str]]:
    """Run, SIGKILL at a seeded point, resume until settled: (problems, what happened)."""
    rng = random.Random(trial)  # noqa: S311 - seeded test data, not security
    e2e = trial_harness(root)
    seen = Counter[str]()
    plan: dict[str, Any] = {"findings": [finding("f1", [STRONG])]}
    inside = trial % 2 == 1
    if inside:
        plan["killParent"] = {"call": rng.randint(1, baseline["calls"])}
    e2e.plan(**plan)
    proc = start(e2e)
    if inside:
        proc.wait(timeout=120)
    else:
        time.sleep(rng.uniform(0.0, baseline["seconds"]))
        with contextlib.suppress(ProcessLookupError):  # finished: an uninterrupted trial
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    e2e.plan(findings=[finding("f1", [STRONG])])  # no more crashes while resuming
    state_file = e2e.dir / "retry-state.json"
    if not state_file.exists() or e2e.read_state()["status"] != "closed":
        seen["runs"] += 1
    code = settle(e2e)
    names = e2e.names()
    seen["resumed"] += "AttemptResumed" in names
    seen["swept"] += "StaleTempFilesRemoved" in names
    problems = []
    if code != 0:
        problems.append(f"exit {code}")
    if history(e2e) != baseline["history"]:
        problems.append(f"history {history(e2e)}")
    if artifacts(e2e) != baseline["artifacts"]:
        diff = artifacts(e2e) ^ baseline["artifacts"]
        problems.append(f"artifacts differ: {sorted(diff)}")
    if completed_twice(e2e):
        problems.append(f"completed phase re-run: {completed_twice(e2e)}")
    return [f"trial {trial} ({'inside' if inside else 'outside'}): {p}" for p in problems], seen


def test_sigkill_at_random_points_then_resume(baseline: dict[str, Any], tmp_path: Path) -> None:
    """TRIALS seeded trials, each in a fresh project of its own; as many at once as there are
    cores (up to 4: each trial is real processes, and the kill points are random anyway)."""
    from concurrent.futures import ThreadPoolExecutor

    jobs = max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(jobs) as pool:
        done = list(
            pool.map(lambda n: one_trial(n, tmp_path / f"trial-{n}", baseline), range(TRIALS))
        )
    failures = [problem for problems, _ in done for problem in problems]
    interrupted = sum((seen for _, seen in done), Counter[str]())
    assert not failures, json.dumps(failures, indent=1)
    # the kills really landed mid-run: most trials needed a resume, some left half-written files
    assert interrupted["runs"] >= TRIALS * 0.7, interrupted
    assert interrupted["resumed"] >= TRIALS * 0.5, interrupted
    assert interrupted["swept"] >= 5, interrupted
    print(dict(interrupted))
