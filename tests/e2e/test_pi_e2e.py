"""The real `pi` CLI through a whole tf_fsm lifecycle, against a stub model server on loopback.

tf_fsm runs `pi -p --mode json ...` (the pi preset) for every phase; the stub's scripted replies
make pi write each phase artifact with its own `write` tool. Usage and cost come from pi's
`message_end` events. Skipped, with the reason, only when pi cannot be found; CI installs it.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.stubs.openai_stub import (
    COMPLETION_TOKENS,
    PROMPT_TOKENS,
    Request,
    StubModelServer,
    Text,
    lifecycle_script,
)
from tests.stubs.pi_env import API_KEY, MODELS, REPLY_COST, TICKET_ID, PiProject, require_pi

MAJOR = "`src/parser.py:42` - parse_expr recurses without bound on nested input"
#: research, implement, 3 reviews, fix, 3 post-fix reviews, close
INVOCATIONS = 10


@pytest.fixture
def pi() -> str:
    return require_pi()


def test_pi_runs_a_whole_lifecycle_with_usage_and_cost(
    pi: str, project: Path, tmp_path: Path
) -> None:
    script = lifecycle_script(TICKET_ID, majors=[MAJOR])

    def leaky(request: Request) -> Text | object:
        reply = script(request)
        # The model echoes the API key in its last words: pi prints them in its JSON output,
        # which tf_fsm keeps in the invocation's log. The key must not survive there.
        return Text(f"Done; I used key {API_KEY}.") if isinstance(reply, Text) else reply

    with StubModelServer(leaky) as stub:
        proj = PiProject(project, tmp_path, pi, stub.base_url)
        doctor = proj.tf("doctor")
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        assert re.search(r"-> \S+ \(\d+\.\d+\.\d+\)", doctor.stdout), doctor.stdout
        assert "--model stub/coder --thinking low" in doctor.stdout
        result = proj.tf("run", TICKET_ID)
        requests = list(stub.requests)
    assert result.returncode == 0, result.stdout + result.stderr

    # pi wrote every artifact with its write tool, as the stub told it to.
    assert "Added the depth limit" in (proj.dir / "implementation.md").read_text()
    assert MAJOR in (proj.dir / "review-general.md").read_text()
    assert MAJOR in (proj.dir / "fixes.md").read_text()
    assert "**CLOSED**" in (proj.dir / "close-summary.md").read_text()
    # Each invocation is two model calls: the write, then the final answer after the result.
    assert len(requests) == 2 * INVOCATIONS
    assert {r.body["model"] for r in requests} == {
        MODELS[m]
        for m in (
            "research",
            "worker",
            "review-general",
            "review-spec",
            "review-secop",
            "fixer",
            "fast",
        )
    }

    # The preset's exact argv is in each log.
    log = (proj.dir / "logs" / "attempt-1" / "implement-worker.log").read_text()
    argv = shlex.split(log.splitlines()[0].removeprefix("$ "))
    assert argv == [
        pi,
        "-p",
        "--mode",
        "json",
        "--no-session",
        "--model",
        "stub/coder",
        "--thinking",
        "low",
    ]

    # Usage per invocation in the journal, per attempt in retry-state, per ticket in status.
    finished = proj.events("InvocationFinished")
    assert len(finished) == INVOCATIONS
    per_call = {
        "inputTokens": 2 * PROMPT_TOKENS,
        "outputTokens": 2 * COMPLETION_TOKENS,
        "costUsd": round(2 * REPLY_COST, 6),
    }
    assert all(e["ok"] and e["usage"] == per_call for e in finished), finished
    total = {
        "inputTokens": INVOCATIONS * 2 * PROMPT_TOKENS,
        "outputTokens": INVOCATIONS * 2 * COMPLETION_TOKENS,
        "costUsd": round(INVOCATIONS * 2 * REPLY_COST, 6),
    }
    attempt = proj.state()["attempts"][0]
    assert (attempt["status"], attempt["usage"]) == ("closed", total)
    assert "failureClass" not in attempt
    status = proj.status()
    assert (status["usage"], status["costUsd"], status["failureClass"]) == (
        total,
        total["costUsd"],
        None,
    )

    # The environment passed through (pi authenticated with the key), but no file tf_fsm
    # wrote holds it: logs, prompts, journal, state.
    assert all(r.headers.get("authorization") == f"Bearer {API_KEY}" for r in requests)
    written = [p for p in proj.dir.rglob("*") if p.is_file() and not p.name.endswith(".md")]
    written += list((proj.dir / "prompts").rglob("*.md"))
    assert any(p.suffix == ".log" for p in written)
    for path in written:
        assert API_KEY not in path.read_text(encoding="utf-8", errors="replace"), path


def test_pi_budget_stops_escalation(pi: str, project: Path, tmp_path: Path) -> None:
    """Attempt 1 is blocked (the fixer cannot clear the finding) and has spent the budget, so
    the escalated attempt 2 never starts."""
    script = lifecycle_script(TICKET_ID, majors=[MAJOR], verify_majors=[MAJOR])
    with StubModelServer(script) as stub:
        proj = PiProject(project, tmp_path, pi, stub.base_url)
        escalation = {
            "enabled": True,
            "maxRetries": 3,
            "maxCostUsd": 0.005,
            "models": {"fixer": "strong"},
        }
        proj.settings(
            escalation=escalation,
            enableResearcher=False,
            enableCloser=False,
            enableReviewers=["reviewer-general"],
        )
        result = proj.tf("run", TICKET_ID)
        calls = len(stub.requests)
    assert result.returncode == 4, result.stdout + result.stderr
    assert "budget: $0.0096 of $0.0050 spent" in result.stderr
    assert calls == 8  # implement, review, fix, verify: 2 model calls each; no attempt 2
    state = proj.state()
    assert [(a["attemptNumber"], a["status"]) for a in state["attempts"]] == [(1, "blocked")]
    assert state["attempts"][0]["failureClass"] == "quality"
    (refusal,) = proj.events("BudgetExhausted")
    assert (refusal["spentUsd"], refusal["maxCostUsd"]) == (0.0096, 0.005)
    status = proj.status()
    assert (status["failureClass"], status["costUsd"], status["budgetLeftUsd"]) == (
        "budget",
        0.0096,
        0.0,
    )
    again = proj.tf("run", TICKET_ID)  # refused before any agent runs
    assert again.returncode == 4 and "budget:" in again.stderr
    assert len(proj.events("AttemptStarted")) == 1
