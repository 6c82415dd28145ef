"""One answer per question: what runs next for a ticket (tf_fsm.core.next_step) and whether
its counts block (tf_fsm.core.gate), asked by every caller. For each state of a ticket, `run
--plan`, `status`, the backlog loop's `assess` and what `tf-fsm run` then does agree; and
`tf-fsm gate` reports what the run decided for the same files. Real files, real processes
(the scripted agent builds the states in-process; the CLI is a real process)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, tk_ticket
from tests.e2e.conftest import STRONG, Harness, finding
from tests.test_orchestrator import setup as orchestrator_setup
from tf_fsm.cli.run import worker_main
from tf_fsm.core.journal import InvocationFinished, timestamp
from tf_fsm.engine.orchestrator import RunOptions, run_ticket
from tf_fsm.loop.ralph import Loop
from tf_fsm.loop.records import LoopOptions, Plan, Skip
from tf_fsm.loop.view import Reporter
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.tk import tickets

TICKET = tk_ticket("pt-1", title="Add a depth limit", body="Body.")
NEVER = {"id": "N", "severity": "Major", "text": "`a.py:2` - never", "fixedBy": []}
BOOM = {"phase": "review", "role": "reviewer-spec-audit", "message": "boom"}


def setup(project: Path, scenario: dict[str, Any], **escalation: Any) -> None:
    """tests/test_orchestrator.py's project, with these escalation settings on top."""
    esc = {"enabled": True, "maxRetries": 3, "models": {"fixer": "strong"}, **escalation}
    orchestrator_setup(project, scenario, {"escalation": esc})


def run(project: Path, **options: Any) -> str:
    return run_ticket(project, "pt-1", RunOptions(**options)).status


def state_file(project: Path) -> Path:
    return open_store(project, load_settings(project), "pt-1").retry_state_path


def edit_state(project: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = state_file(project)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def journal(project: Path) -> list[dict[str, Any]]:
    path = open_store(project, load_settings(project), "pt-1").journal_path
    return [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []


# --- the states -------------------------------------------------------------------------------


def no_state(project: Path) -> None:
    setup(project, {})


def in_error(project: Path) -> None:
    setup(project, {"failures": [BOOM]})
    assert run(project) == "error"


def open_attempt(project: Path) -> None:
    """A run killed mid-attempt: the attempt is still `in_progress`."""
    in_error(project)

    def reopen(data: dict[str, Any]) -> None:
        data["status"], data["attempts"][-1]["status"] = "active", "in_progress"
        data["attempts"][-1].pop("completedAt", None)

    edit_state(project, reopen)


def blocked(project: Path) -> None:
    setup(project, {"findings": [NEVER]})
    assert run(project, once=True) == "blocked"


def blocked_auto_retry_due(project: Path) -> None:
    """Killed between a blocked attempt and the retry its run meant to start at once."""
    blocked(project)
    path = open_store(project, load_settings(project), "pt-1").journal_path
    text = path.read_text()
    assert text.count('"autoRetry":false') == 1
    path.write_text(text.replace('"autoRetry":false', '"autoRetry":true'))


def exhausted(project: Path) -> None:
    setup(project, {"findings": [NEVER]})
    assert run(project) == "exhausted"


def same_failure_stop(project: Path) -> None:
    setup(project, {"findings": [NEVER]}, sameFailure="stop")
    assert run(project) == "exhausted"


def closed(project: Path) -> None:
    setup(project, {})
    assert run(project) == "closed"


def closed_tk_open(project: Path) -> None:
    """retry-state.json records the close; the run died before it closed the tk ticket."""
    closed(project)
    (project / ".tickets/pt-1.md").write_text(TICKET)


def reopened(project: Path) -> None:
    """Closed, then a person reopened the tk ticket: a new series starts at attempt 1."""
    closed(project)
    path = project / ".tickets/pt-1.md"
    path.write_text(path.read_text().replace("status: closed", "status: open"))


def budget_spent(project: Path) -> None:
    blocked(project)
    store = open_store(project, load_settings(project), "pt-1")
    usage = {"inputTokens": 1000, "outputTokens": 100, "costUsd": 0.75}
    store.append_event(
        InvocationFinished(
            ts=timestamp(datetime.now(UTC)),
            ticket="pt-1",
            attempt=1,
            phase="review",
            role="reviewer-general",
            model="m",
            artifact="review-general.md",
            sha256=None,
            ok=True,
            durationMs=1,
            usage=usage,
        )
    )
    path = project / ".tf/config/settings.json"
    settings = json.loads(path.read_text())
    settings["workflow"]["escalation"]["maxCostUsd"] = 0.5
    path.write_text(json.dumps(settings))


def max_retries_0(project: Path) -> None:
    setup(project, {}, maxRetries=0)


# --- what each caller says --------------------------------------------------------------------


@dataclass
class Seen:
    plan: dict[str, Any]
    status: dict[str, Any]
    loop: Plan | Skip
    outcome: dict[str, Any]
    new_events: list[dict[str, Any]]
    tk_status: str


def assess(project: Path) -> Plan | Skip:
    settings = load_settings(project)
    options = LoopOptions(workers=1, max_iterations=1, resume_errors=True)
    loop = Loop(project, settings, options, Reporter(None), worker=worker_main)
    record = tickets.scan(tickets.tickets_dir(project)).records["pt-1"]
    return loop.assess(record)


def observe(project: Path) -> Seen:
    planned = run_cli("run", "pt-1", "--plan", "--json", cwd=project)
    assert planned.returncode == 0, planned.stderr
    status = run_cli("status", "pt-1", "--json", cwd=project)
    assert status.returncode == 0, status.stderr
    loop = assess(project)
    before = len(journal(project))
    ran = run_cli("run", "pt-1", "--once", "--json", cwd=project)
    assert ran.stdout, ran.stderr
    return Seen(
        json.loads(planned.stdout),
        json.loads(status.stdout),
        loop,
        json.loads(ran.stdout),
        journal(project)[before:],
        tickets.read(project, "pt-1").status,
    )


def check_refused(seen: Seen) -> str:
    """Every caller refuses, with the same reason, and `run` starts nothing."""
    why = seen.plan["why"]
    assert seen.plan["action"] in ("exhausted", "already_closed"), seen.plan
    assert (seen.status["skip"], seen.status["next"]) == (True, f"nothing: {why}")
    assert seen.loop == Skip(why)
    assert seen.outcome["status"] in ("exhausted", "already_closed"), seen.outcome
    assert seen.outcome["reason"] == why and seen.outcome["attemptsRun"] == 0
    assert not [e for e in seen.new_events if e["event"] == "AttemptStarted"], seen.new_events
    return str(why)


def check_new_attempt(seen: Seen, number: int, trigger: str) -> None:
    """`trigger` as `tf-fsm run` records it (a manual retry); the loop's worker would record
    its own retry trigger, `ralph_retry`."""
    assert seen.plan["action"] == "new_attempt", seen.plan
    assert (seen.plan["attempt"], seen.plan["trigger"]) == (number, trigger)
    assert seen.status["skip"] is False
    both = "manual_retry; ralph_retry from the backlog loop"
    named = both if trigger == "manual_retry" else trigger
    assert seen.status["next"] == f"attempt {number} ({named})", seen.status["next"]
    looped = "ralph_retry" if trigger == "manual_retry" else trigger
    assert isinstance(seen.loop, Plan), seen.loop
    assert (seen.loop.attempt, seen.loop.trigger) == (number, looped)
    started = [e for e in seen.new_events if e["event"] == "AttemptStarted"]
    assert [(e["attempt"], e["trigger"]) for e in started][:1] == [(number, trigger)], started


def check_resumed(seen: Seen, number: int, phase: str) -> None:
    assert seen.plan["action"] == "resume" and seen.plan["attempt"] == number, seen.plan
    assert seen.plan["phases"][0]["phase"] == phase
    assert seen.status["skip"] is False
    assert seen.status["next"].startswith(f"resume attempt {number} at {phase}: "), seen.status
    assert isinstance(seen.loop, Plan) and (seen.loop.attempt, seen.loop.trigger) == (
        number,
        "resume",
    )
    resumed = [e for e in seen.new_events if e["event"] == "AttemptResumed"]
    assert [(e["attempt"], e["phase"]) for e in resumed] == [(number, phase)], seen.new_events


REFUSED = {
    "exhausted": (
        exhausted,
        "max retries (3) exceeded: blocked after 3 attempts; "
        "`tf-fsm run pt-1 --retry-reset` starts over",
    ),
    "same failure stop": (same_failure_stop, "same-failure: attempts 1 and 2 failed the same way"),
    "closed": (closed, "closed (a reopened tk ticket starts again at attempt 1)"),
    "budget spent": (budget_spent, "budget: $0.7500 of $0.5000 spent"),
    "maxRetries 0": (max_retries_0, "workflow.escalation.maxRetries is 0: no attempt may run"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_every_caller_refuses_with_one_reason(project: Path, case: str) -> None:
    build, start = REFUSED[case]
    build(project)
    why = check_refused(observe(project))
    assert why.startswith(start), why


@pytest.mark.parametrize(
    ("build", "number", "trigger"),
    [
        (no_state, 1, "initial"),
        (blocked, 2, "manual_retry"),
        (blocked_auto_retry_due, 2, "quality_gate"),
        (reopened, 1, "initial"),
    ],
)
def test_every_caller_starts_the_same_attempt(
    project: Path, build: Callable[[Path], None], number: int, trigger: str
) -> None:
    build(project)
    check_new_attempt(observe(project), number, trigger)


@pytest.mark.parametrize("build", [open_attempt, in_error])
def test_every_caller_resumes_the_same_attempt_at_the_same_phase(
    project: Path, build: Callable[[Path], None]
) -> None:
    build(project)
    check_resumed(observe(project), 1, "review")


def test_a_close_the_tk_file_missed_is_repaired_and_nothing_refuses_it(project: Path) -> None:
    closed_tk_open(project)
    seen = observe(project)
    why = seen.plan["why"]
    assert seen.plan["action"] == "already_closed" and "phases" not in seen.plan
    assert why == (
        "the retry state records the close of attempt 1; the tk ticket is closed to match"
    )
    # not a refusal: `run` has something to do, so the loop runs it and status does not skip
    assert (seen.status["skip"], seen.status["next"]) == (False, why)
    assert isinstance(seen.loop, Plan)
    assert (seen.loop.attempt, seen.loop.trigger) == (1, "close_tk")
    assert (seen.outcome["status"], seen.outcome["reason"]) == ("already_closed", why)
    assert seen.tk_status == "closed"
    assert not [e for e in seen.new_events if e["event"] == "AttemptStarted"]


def test_the_loop_keeps_its_own_policy_on_top_of_the_decision(project: Path) -> None:
    in_error(project)
    settings = load_settings(project)
    loop = Loop(
        project,
        settings,
        LoopOptions(workers=1, max_iterations=1),
        Reporter(None),
        worker=worker_main,
    )
    record = tickets.scan(tickets.tickets_dir(project)).records["pt-1"]
    assert loop.assess(record) == Skip(
        "attempt 1 failed in review (error); --resume-errors resumes it"
    )


def test_plan_with_retry_reset_is_the_run_after_the_reset(project: Path) -> None:
    exhausted(project)
    planned = json.loads(run_cli("run", "pt-1", "--plan", "--retry-reset", "--json").stdout)
    assert (planned["action"], planned["attempt"], planned["trigger"]) == (
        "new_attempt",
        1,
        "initial",
    )
    assert planned["retryReset"]["backup"].startswith("retry-state.json.bak.")
    assert "sameFailure" not in planned
    assert state_file(project).exists()  # the plan moved nothing
    ran = run_ticket(project, "pt-1", RunOptions(retry_reset=True, once=True))
    assert (ran.attempt, ran.status) == (1, "blocked")


# --- the gate: `tf-fsm gate` says what the run decided ---------------------------------------


def decided(e2e: Harness) -> tuple[bool, str]:
    """What the run decided: the ending retry-state.json records, or, for an attempt that
    stopped after its verify phase, post-fix-verification.json (which a resume closes with)."""
    last = e2e.read_state()["attempts"][-1]
    if last["status"] in ("blocked", "closed"):
        return last["status"] == "blocked", last["reason"]
    data = json.loads((e2e.dir / "post-fix-verification.json").read_text())
    return not data["verification_passed"], data["reason"]


def gate(e2e: Harness) -> dict[str, Any]:
    result = run_cli("gate", "pt-1", "--json", cwd=e2e.project)
    assert result.returncode == 0, result.stderr
    return dict(json.loads(result.stdout))


def check_gate_agrees(e2e: Harness) -> dict[str, Any]:
    row = gate(e2e)
    was_blocked, reason = decided(e2e)
    assert row["blocked"] is was_blocked, (row, reason)
    return row


@pytest.mark.parametrize("gate_enabled", [True, False])
@pytest.mark.parametrize("fixable", [True, False])
def test_gate_reports_what_the_run_recorded(
    e2e: Harness, gate_enabled: bool, fixable: bool
) -> None:
    e2e.settings(enableQualityGate=gate_enabled, escalation={"enabled": False})
    e2e.plan(findings=[finding("f1", "*" if fixable else [])])
    result = e2e.run()
    assert result.returncode == (0 if fixable or not gate_enabled else 3), result.stderr
    check_gate_agrees(e2e)


def test_gate_follows_the_verify_decision_when_the_gate_is_off(e2e: Harness) -> None:
    e2e.settings(enableQualityGate=False, escalation={"enabled": False})
    e2e.plan(findings=[finding("f1", [])], noOutput=[{"phase": "close"}])
    assert e2e.run().returncode == 5  # verify decided; the closer wrote nothing
    row = check_gate_agrees(e2e)
    assert row["reason"] == "workflow.enableQualityGate is false: nothing blocks"
    e2e.plan(findings=[finding("f1", [])])
    assert e2e.run().returncode == 0
    check_gate_agrees(e2e)


def test_gate_ignores_an_earlier_attempts_close_summary(e2e: Harness) -> None:
    e2e.plan(findings=[finding("f1", [STRONG])], noOutput=[{"phase": "close", "attempt": 2}])
    assert e2e.run("--once").returncode == 3  # attempt 1 blocked: close-summary says BLOCKED
    assert e2e.run("--once").returncode == 5  # attempt 2 passed verify, its closer failed
    row = check_gate_agrees(e2e)
    assert row["blocked"] is False and row["source"] == "post-fix-verification"
    assert any("close-summary.md is older" in note for note in row["notes"]), row
    e2e.plan(findings=[finding("f1", [STRONG])])
    assert e2e.run().returncode == 0
    assert check_gate_agrees(e2e)["source"] == "close-summary.md"


def test_gate_counts_a_failing_required_gate_command_as_the_run_did(e2e: Harness) -> None:
    e2e.settings(
        qualityGates=[{"name": "tests", "command": "false", "maxRetries": 0}],
        escalation={"enabled": False},
    )
    e2e.plan(noOutput=[{"phase": "close"}])
    assert e2e.run().returncode == 5
    row = check_gate_agrees(e2e)
    assert row["blocked"] is True and row["reason"] == decided(e2e)[1]
