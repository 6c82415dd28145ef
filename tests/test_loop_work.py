"""What the backlog loop and a worker say to each other (tf_fsm.loop.work): a real worker process
given a work order runs it and reports one JSON line; a bad order or a bad report is refused
naming what is wrong; a worker that reports nothing is judged by its exit code and its log."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.test_ralph import FIXABLE, Project


@pytest.fixture
def proj(project: Path) -> Project:
    return Project(project)


def run_worker(order: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A loop's worker entry (tf_fsm.cli.run.worker_main) in a process of its own, given its
    work order as the loop's fork server gives it: one JSON document."""
    code = "import sys; from tf_fsm.cli.run import worker_main; sys.exit(worker_main(sys.argv[1]))"
    return subprocess.run(
        [sys.executable, "-c", code, order],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_worker_runs_its_work_order_and_reports_one_json_line(proj: Project) -> None:
    from tf_fsm.engine.api import Outcome
    from tf_fsm.loop.work import WorkOrder, read_report

    proj.ticket("pt-1", plan=FIXABLE)
    order = WorkOrder(proj.root, "pt-1", loop="123.456").to_json()
    first = run_worker(order, proj.env())
    assert first.returncode == 3, first.stderr
    assert first.stdout.count("\n") == 1  # the report, and nothing else
    report = read_report(first.stdout)
    assert isinstance(report, Outcome)
    assert (report.status, report.attempt, report.retry_count) == ("blocked", 1, 1)
    assert json.loads(first.stdout) == {
        "ticket": "pt-1",
        "status": "blocked",
        "attempt": 1,
        "attemptsRun": 1,
        "retryCount": 1,
        "maxRetries": 3,
        "reason": json.loads(first.stdout)["reason"],
    }  # the document `run --json` prints too
    second = run_worker(order, proj.env())
    assert (second.returncode, json.loads(second.stdout)["status"]) == (0, "closed")
    # one attempt per order; the retry is recorded as the loop's
    assert [a["trigger"] for a in proj.state("pt-1")["attempts"]] == ["initial", "ralph_retry"]
    assert "--ralph" not in run_cli("run", "--help").stdout


def test_a_bad_work_order_is_refused_naming_what_is_wrong(proj: Project) -> None:
    proj.ticket("pt-1", plan=FIXABLE)
    order = json.dumps({"root": str(proj.root), "ticket": "pt-1", "loop": "1.2", "worktree": None})
    refused = run_worker(order, proj.env())
    assert refused.returncode == 2
    assert refused.stdout == ""  # no report: the loop reads the exit code and the log
    assert "tf-fsm: error: the work order: key 'parallel' is missing" in refused.stderr
    assert not (proj.root / ".tf" / "knowledge" / "tickets" / "pt-1").exists()  # nothing ran
    torn = run_worker(order[:-9], proj.env())
    assert torn.returncode == 2 and "the work order: not JSON" in torn.stderr


@pytest.mark.parametrize(
    ("output", "problem"),
    [
        ('{"status": "closed"}\n', "the worker's report: key 'ticket' is missing"),
        (
            '{"ticket": "pt-1", "status": "done", "attempt": 1, "attemptsRun": 1, '
            '"retryCount": 0, "maxRetries": 3, "reason": ""}\n',
            "the worker's report: key 'status' is 'done', not one of closed, blocked",
        ),
        (
            '{"ticket": "pt-1", "status": "closed", "attempt": true, "attemptsRun": 1, '
            '"retryCount": 0, "maxRetries": 3, "reason": ""}\n',
            "the worker's report: key 'attempt' must be an integer, not true",
        ),
        ('{"ticket": "pt-1", "stat', "the worker's report: not JSON"),
        ("done\n", "the worker's report: not JSON"),
    ],
)
def test_a_bad_work_report_fails_the_run_naming_what_is_wrong(
    output: str, problem: str, tmp_path: Path
) -> None:
    from tf_fsm.loop.worker import worker_outcome

    outcome, reason = worker_outcome(output, 0, False, tmp_path / "pt-1.log")
    assert outcome == "failed"
    assert reason.startswith(problem), reason


def test_no_report_leaves_the_exit_code_to_tell(tmp_path: Path) -> None:
    from tf_fsm.errors import EXIT_INTERRUPTED, EXIT_LOCKED
    from tf_fsm.loop.worker import LOCKED, worker_outcome

    log = tmp_path / "pt-1.log"
    log.write_text("=== tf-fsm ralph: attempt 1 (initial)\ntf-fsm: error: the disk said no\n")
    assert worker_outcome("", EXIT_LOCKED, False, log) == ("locked", LOCKED)
    assert worker_outcome("", EXIT_INTERRUPTED, False, log)[0] == "interrupted"
    assert worker_outcome("", -signal.SIGKILL, True, log)[0] == "interrupted"
    failed = ("failed", "killed by signal 9: tf-fsm: error: the disk said no")
    assert worker_outcome("", -signal.SIGKILL, False, log) == failed
