"""SIGKILL of a real `tf-fsm run` at seeded random moments, then `tf-fsm run` again until the
ticket is closed: every trial ends in the uninterrupted run's final state.

The agent is tests/crash/agent.py as a real process (the command executor). Each trial draws
a journal size between empty and the uninterrupted run's, waits until the journal has grown
that far, then a further seeded few milliseconds, and kills: the kills spread over the whole
lifecycle and fall anywhere (mid journal append, between a view's temp file and its rename,
while an agent runs).
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.crash import lifecycle
from tests.crash.conftest import SEED, SOAK, Recording
from tests.crash.states import RECOVERY_EVENTS

TRIALS = 20
EXIT_OK = 0
#: a run after a kill may end blocked (3) when the kill fell between two attempts' records
RERUN_CODES = (EXIT_OK, 3)


def cli_project(root: Path) -> Path:
    lifecycle.make_project(root, lifecycle.WORKFLOW, lifecycle.agent_command())
    return root


def start(root: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "tf_fsm", "run", lifecycle.TICKET_ID],
        cwd=root,
        env={**os.environ, "TF_FSM_ROOT": str(root)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def rerun_until_closed(root: Path) -> list[int]:
    """`tf-fsm run` until it exits 0 (closed): the exit codes, never a failure's."""
    codes: list[int] = []
    while len(codes) < lifecycle.MAX_RERUNS:
        done = run_cli("run", lifecycle.TICKET_ID, cwd=root, env={"TF_FSM_ROOT": str(root)})
        codes.append(done.returncode)
        if done.returncode not in RERUN_CODES:
            raise AssertionError(f"rerun exited {codes}: {done.stderr.strip()[-500:]}")
        if done.returncode == EXIT_OK:
            return codes
    raise AssertionError(f"not closed after {lifecycle.MAX_RERUNS} reruns: {codes}")


@dataclass(frozen=True)
class CliReference:
    seconds: float
    journal_bytes: int
    final: lifecycle.Final  # its artifacts are the command agent's (its logs say how it ran)


@pytest.fixture(scope="module")
def cli_reference(recording: Recording, tmp_path_factory: pytest.TempPathFactory) -> CliReference:
    """An uninterrupted `tf-fsm run` of the scenario: it ends in the same final state as the
    in-process reference (the same agent, run as a process), its artifacts aside: the logs
    of a process hold its command line."""
    root = cli_project(tmp_path_factory.mktemp("cli-reference") / "project")
    started = time.monotonic()
    assert rerun_until_closed(root) == [EXIT_OK]
    elapsed = time.monotonic() - started
    final = lifecycle.final_state(root)
    assert lifecycle.problems(root, final) == []
    reference = recording.reference
    assert (final.state, final.prior) == (reference.state, reference.prior)
    assert final.files.keys() == reference.files.keys()
    size = (root / lifecycle.TICKET_DIR / "events.jsonl").stat().st_size
    return CliReference(elapsed, size, final)


def kill_when_grown(
    proc: subprocess.Popen[bytes], journal: Path, size: float, pause: float
) -> None:
    """SIGKILL the run (its whole process group) once `journal` holds `size` bytes, `pause`
    seconds later; nothing if it ended first."""
    deadline = time.monotonic() + 60
    while proc.poll() is None and time.monotonic() < deadline:
        with contextlib.suppress(FileNotFoundError):
            if journal.stat().st_size >= size:
                break
        time.sleep(0.002)
    time.sleep(pause)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=60)


def one_trial(
    trial: int, root: Path, cli: CliReference, reference: lifecycle.Final
) -> tuple[list[str], Counter[str]]:
    rng = random.Random(SEED + trial)  # noqa: S311 - seeded test data, not security
    size, pause = rng.uniform(0, cli.journal_bytes), rng.uniform(0, 0.02)
    proc = start(cli_project(root))
    kill_when_grown(proc, root / lifecycle.TICKET_DIR / "events.jsonl", size, pause)
    seen = Counter[str]({"trials": 1})
    seen["killed mid-run"] += proc.returncode == -signal.SIGKILL
    where = f"trial {trial} (TF_FSM_CRASH_SEED={SEED}: kill at {size:.0f} journal bytes"
    where += f" + {pause:.3f} s)"
    try:
        codes = rerun_until_closed(root)
    except AssertionError as exc:
        return [f"{where}: {exc}"], seen
    names = {e.event for e in lifecycle.events(root)}
    for event, label in RECOVERY_EVENTS.items():
        seen[label] += event in names
    return [f"{where}, reruns {codes}: {p}" for p in lifecycle.problems(root, reference)], seen


def test_sigkill_at_seeded_moments_then_rerun(
    recording: Recording,
    cli_reference: CliReference,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    trials = TRIALS * SOAK
    jobs = max(1, min(4, os.cpu_count() or 1))
    with ThreadPoolExecutor(jobs) as pool:
        done = list(
            pool.map(
                lambda n: one_trial(n, tmp_path / f"trial-{n}", cli_reference, cli_reference.final),
                range(trials),
            )
        )
    failures = [problem for problems, _ in done for problem in problems]
    seen = sum((outcome for _, outcome in done), Counter[str]())
    line = f"SIGKILL (seed {SEED}, run {cli_reference.seconds:.2f} s): {dict(sorted(seen.items()))}"
    with capsys.disabled():
        print(f"\n{line}")
    assert not failures, "\n".join(failures)
    # the kills really landed mid-run, many of them inside an attempt
    assert seen["killed mid-run"] >= trials // 2, line
    assert seen["resumed an attempt"] >= trials // 4, line
