"""The orchestrator in-process with the scripted agent: settings variants, triggers, resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, tk_ticket
from tf_fsm.core.journal import InvocationFinished
from tf_fsm.core.state import RetryState
from tf_fsm.engine.orchestrator import Outcome, RunOptions, run_ticket
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.storage.store import TicketStore
from tf_fsm.tk.tickets import read
from tf_fsm.views.status import ticket_status

TICKET = tk_ticket("pt-1", title="Add a depth limit", body="Body.")
STRONG = "openai-codex/gpt-5.3-codex"
MAJOR_HARD = {"id": "M", "severity": "Major", "text": "`a.py:1` - hard", "fixedBy": [STRONG]}
MAJOR_NEVER = {"id": "N", "severity": "Major", "text": "`a.py:2` - never", "fixedBy": []}
MINOR_EASY = {
    "id": "m",
    "severity": "Minor",
    "text": "`a.py:3` - easy",
    "reviewer": "reviewer-second-opinion",
}


def setup(project: Path, scenario: dict[str, Any], workflow: dict[str, Any] | None = None) -> None:
    (project / ".tickets").mkdir(exist_ok=True)
    (project / ".tickets/pt-1.md").write_text(TICKET)
    (project / "scenario.json").write_text(json.dumps(scenario))
    settings = {
        "metaModels": {"strong": {"model": STRONG, "thinking": "high"}},
        "workflow": {
            "failOn": ["Critical", "Major"],
            "escalation": {"enabled": True, "maxRetries": 3, "models": {"fixer": "strong"}},
            **(workflow or {}),
        },
        "executor": {"kind": "scripted", "scenario": "scenario.json"},
    }
    (project / ".tf/config/settings.json").write_text(json.dumps(settings))


def run(project: Path, **options: Any) -> Outcome:
    return run_ticket(project, "pt-1", RunOptions(**options))


def store(project: Path) -> TicketStore:
    return open_store(project, load_settings(project), "pt-1")


def state(project: Path) -> RetryState:
    loaded = store(project).load_retry_state()
    assert loaded is not None
    return loaded


def events(project: Path, attempt: int | None = None) -> list[str]:
    return [
        e.event
        for e in store(project).read_events().events
        if attempt is None or e.attempt == attempt
    ]


def context(project: Path) -> dict[str, Any]:
    return json.loads((store(project).dir / "chain-context.json").read_text())


def test_escalated_fixer_closes_on_attempt_2(project: Path) -> None:
    setup(project, {"findings": [MAJOR_HARD, MINOR_EASY]})
    outcome = run(project)
    assert (outcome.status, outcome.attempt, outcome.attempts_run) == ("closed", 2, 2)
    s = state(project)
    assert [(a.status, a.trigger) for a in s.attempts] == [
        ("blocked", "initial"),
        ("closed", "quality_gate"),
    ]
    assert s.attempts[0].qualityGate is not None and s.attempts[0].qualityGate.counts["Major"] == 1
    assert s.attempts[1].escalation is not None and s.attempts[1].escalation.fixer == STRONG
    ctx = context(project)
    assert ctx["attempt"] == 2 and ctx["escalatedRoles"] == ["fixer"]
    assert ctx["models"]["fixer"] == {
        **ctx["models"]["fixer"],
        "model": STRONG,
        "baseModel": "zai/glm-5",
        "escalated": True,
    }
    assert (
        ctx["phases"]["research"]["runs"] is False and ctx["phases"]["implement"]["runs"] is False
    )
    assert "ResearchSkippedOnRetry" in events(project, 2)
    assert read(project, "pt-1").status == "closed"


def test_max_retries_0_runs_no_attempt(project: Path) -> None:
    # a ticket is skipped with retryCount >= maxRetries; with 0 that is every ticket
    setup(project, {"findings": []})
    path = project / ".tf/config/settings.json"
    data = json.loads(path.read_text())
    data["workflow"]["escalation"]["maxRetries"] = 0
    path.write_text(json.dumps(data))
    outcome = run(project)
    assert (outcome.status, outcome.attempts_run) == ("exhausted", 0)
    assert "maxRetries is 0" in outcome.reason
    assert not store(project).retry_state_path.exists()
    assert "status: open" in (project / ".tickets/pt-1.md").read_text()
    result = run_cli("run", "pt-1", "--json", cwd=project)
    assert result.returncode == 4 and json.loads(result.stdout)["status"] == "exhausted"
    plan = json.loads(run_cli("run", "pt-1", "--plan", "--json", cwd=project).stdout)
    assert plan["action"] == "exhausted" and "maxRetries is 0" in plan["why"]
    row = ticket_status(project, load_settings(project), "pt-1")
    assert row["next"].startswith("nothing: workflow.escalation.maxRetries is 0") and row["skip"]


def test_fixes_mode_subtracts_fixed_counts(project: Path) -> None:
    setup(project, {"findings": [MAJOR_HARD, MINOR_EASY]}, {"postFixVerification": "fixes"})
    outcome = run(project, once=True)
    assert outcome.status == "blocked"
    pfv = json.loads((store(project).dir / "post-fix-verification.json").read_text())
    assert pfv["mode"] == "fixes"
    assert pfv["pre_fix_counts"]["Minor"] == 1 and pfv["post_fix_counts"]["Minor"] == 0
    assert pfv["post_fix_counts"]["Major"] == 1 and pfv["verification_passed"] is False
    assert not (store(project).dir / "post-fix-review.md").exists()  # no re-review in this mode


def test_disabled_quality_gate_closes_despite_findings(project: Path) -> None:
    setup(project, {"findings": [MAJOR_NEVER]}, {"enableQualityGate": False})
    outcome = run(project)
    assert outcome.status == "closed"
    assert "enableQualityGate is false" in outcome.reason
    assert state(project).attempts[0].qualityGate.counts["Major"] == 1  # type: ignore[union-attr]


def test_fixer_disabled_blocks_without_fix(project: Path) -> None:
    setup(
        project,
        {"findings": [MAJOR_HARD]},
        {"enableFixer": False, "escalation": {"enabled": False}},
    )
    outcome = run(project)
    assert outcome.status == "blocked" and outcome.attempts_run == 1
    assert not (store(project).dir / "fixes.md").exists()
    assert "PhaseSkipped" in events(project, 1)


def test_no_reviewers_means_nothing_to_block(project: Path) -> None:
    setup(project, {"findings": [MAJOR_NEVER]}, {"enableReviewers": []})
    assert run(project).status == "closed"
    assert not (store(project).dir / "review.md").exists()


def test_closer_disabled_still_writes_close_summary(project: Path) -> None:
    setup(project, {}, {"enableCloser": False})
    assert run(project).status == "closed"
    assert not (store(project).dir / "close-notes.md").exists()
    assert "**CLOSED**" in (store(project).dir / "close-summary.md").read_text()


def test_with_research_forces_research_on_retry(project: Path) -> None:
    setup(project, {"findings": [MAJOR_HARD]})
    run(project, research=True)
    assert context(project)["phases"]["research"] == {"runs": True, "reason": "--with-research"}
    assert "ResearchSkippedOnRetry" not in events(project, 2)
    assert [e for e in events(project, 2) if e == "PhaseStarted"]  # research ran on attempt 2


def test_escalated_worker_reimplements_on_attempt_3(project: Path) -> None:
    setup(project, {"findings": [MAJOR_NEVER]})
    settings = json.loads((project / ".tf/config/settings.json").read_text())
    settings["workflow"]["escalation"]["models"]["worker"] = "strong"
    (project / ".tf/config/settings.json").write_text(json.dumps(settings))
    outcome = run(project)
    assert (outcome.status, outcome.attempts_run) == ("exhausted", 3)
    s = state(project)
    assert [a.escalation.worker for a in s.attempts] == [None, None, STRONG]  # type: ignore[union-attr]
    assert context(project)["phases"]["implement"]["runs"] is True
    assert s.status == "blocked" and s.retryCount == 3
    note = read(project, "pt-1").body
    assert "blocked after 3 attempts" in note


def test_disabled_escalation_stops_and_manual_retry_continues(project: Path) -> None:
    setup(project, {"findings": [MAJOR_HARD]}, {"escalation": {"enabled": False}})
    assert run(project).status == "blocked"
    assert run(project, retry_trigger="ralph_retry").status == "blocked"
    assert [a.trigger for a in state(project).attempts] == ["initial", "ralph_retry"]
    assert all(a.escalation.fixer is None for a in state(project).attempts)  # type: ignore[union-attr]


def test_exhausted_refused_before_any_agent(project: Path) -> None:
    setup(project, {"findings": [MAJOR_NEVER]})
    assert run(project).status == "exhausted"
    before = (store(project).dir / "events.jsonl").read_bytes()
    again = run(project)
    assert again.status == "exhausted" and again.attempts_run == 0
    assert "max retries (3) exceeded" in again.reason
    assert (store(project).dir / "events.jsonl").read_bytes() == before


def test_retry_reset_starts_over_and_keeps_backup(project: Path) -> None:
    setup(project, {"findings": [MAJOR_NEVER]})
    run(project)
    outcome = run(project, retry_reset=True, once=True)
    assert outcome.attempt == 1
    backups = list(store(project).dir.glob("retry-state.json.bak.*"))
    assert len(backups) == 1 and json.loads(backups[0].read_text())["retryCount"] == 3
    assert "RetryStateReset" in events(project)


def test_already_closed_is_a_no_op_and_reopened_starts_fresh(project: Path) -> None:
    setup(project, {})
    assert run(project).status == "closed"
    assert run(project).status == "already_closed"
    path = project / ".tickets/pt-1.md"
    path.write_text(path.read_text().replace("status: closed", "status: open"))
    outcome = run(project)
    assert outcome.status == "closed"
    s = state(project)
    assert [(a.attemptNumber, a.trigger) for a in s.attempts] == [(1, "initial"), (1, "initial")]


def test_failure_then_resume_same_attempt(project: Path) -> None:
    setup(
        project,
        {"failures": [{"phase": "review", "role": "reviewer-spec-audit", "message": "boom"}]},
    )
    outcome = run(project)
    assert outcome.status == "error" and "boom" in outcome.reason
    cur = state(project).current
    assert cur is not None and (cur.status, cur.phase) == ("error", "review")
    setup(project, {})  # the agent works again
    assert run(project).status == "closed"
    s = state(project)
    assert len(s.attempts) == 1 and s.attempts[0].status == "closed"
    ev = events(project, 1)
    assert ev.count("AttemptStarted") == 1 and ev.count("AttemptResumed") == 1
    assert ev.index("AttemptResumed") < len(ev) - ev[::-1].index("PhaseStarted")
    assert (
        ev.count("PhaseCompleted") == 6 - 1 + 0
    )  # research, implement, review, verify, close (fix skipped)


def test_resume_at_close_uses_the_decided_gate(project: Path) -> None:
    setup(project, {"failures": [{"phase": "close", "message": "closer crashed"}]})
    assert run(project).status == "error"
    setup(project, {})
    outcome = run(project)
    assert outcome.status == "closed"
    ev = [e for e in store(project).read_events().events if isinstance(e, InvocationFinished)]
    assert [e.phase for e in ev].count("review") == 3  # review not re-run


@pytest.mark.parametrize("phase", ["research", "implement", "fix", "verify"])
def test_resume_from_each_phase_finishes(project: Path, phase: str) -> None:
    setup(project, {"findings": [MAJOR_HARD], "failures": [{"phase": phase, "attempt": 1}]})
    assert run(project).status == "error"
    setup(project, {"findings": [MAJOR_HARD]})
    outcome = run(project)
    assert outcome.status == "closed"
    assert [a.status for a in state(project).attempts] == ["blocked", "closed"]


class PricedAgent:
    """The scripted agent with a price list: what a budget forecast needs (the simulation's
    agent has one; agent CLIs do not)."""

    def __init__(self, project: Path, price: float) -> None:
        from tf_fsm.executors import make_executor

        self.inner, self.price = make_executor(load_settings(project), project), price

    def check(self) -> None:
        self.inner.check()

    def invoke(self, inv: Any) -> Any:
        return self.inner.invoke(inv)

    def estimate_cost(self, phase: str, role: str, model: str) -> float:
        return self.price


@pytest.mark.parametrize("budget", [1.0, 0.05])
def test_the_plan_shows_the_budget_and_refuses_as_run_does(project: Path, budget: float) -> None:
    from tf_fsm.engine.orchestrator import QuietObserver, TicketRun
    from tf_fsm.views.plan import plan

    setup(project, {"findings": []}, {"escalation": {"maxCostUsd": budget}})
    settings = load_settings(project)
    agent = PricedAgent(project, 0.01)
    planned = plan(TicketRun(project, "pt-1", RunOptions(), settings, agent, QuietObserver()))
    invocations = sum(len(p["invocations"]) for p in planned.get("phases", []))
    # attempt 1 with the default workflow: research, implement, 3 reviews, fix, 3 post-fix
    # reviews, close
    assert planned["budget"] == {"maxCostUsd": budget, "spentUsd": 0.0, "nextAttemptUpToUsd": 0.1}
    outcome = run_ticket(project, "pt-1", RunOptions(), settings=settings, executor=agent)
    if budget == 1.0:
        assert planned["action"] == "new_attempt" and invocations > 0
        assert outcome.status == "closed"
    else:
        assert planned["action"] == "exhausted"
        assert planned["why"].startswith("budget: $0.0000 of $0.0500 spent and the next attempt")
        assert (outcome.status, outcome.reason) == ("exhausted", planned["why"])
        assert not store(project).dir.joinpath("implementation.md").exists()


def test_the_machine_s_retry_guard_sees_the_retries_really_left(project: Path) -> None:
    """`retries_left` on the `start`/`retry` edges is fed the count the state leaves (it was
    always 1): after one blocked attempt of three allowed, two are left."""
    from tf_fsm.engine.api import QuietObserver
    from tf_fsm.engine.orchestrator import TicketRun
    from tf_fsm.executors import make_executor

    setup(project, {"findings": [MAJOR_HARD]})
    assert run(project, once=True).status == "blocked"
    settings = load_settings(project)
    ticket = TicketRun(
        project, "pt-1", RunOptions(), settings, make_executor(settings, project), QuietObserver()
    )
    blocked = state(project)
    assert ticket.new_attempt_context(blocked, "manual_retry").facts.retries_left == 2
    spent = blocked.model_copy(update={"retryCount": 3})
    assert ticket.new_attempt_context(spent, "manual_retry").facts.retries_left == 0
