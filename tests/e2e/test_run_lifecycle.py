"""`tf-fsm run` end to end, through the gate: close, block, escalate, cap, redact.

The agent is tests/fake_agent.py, run by the `command` executor as a real process; the harness
is in conftest.py. Failures (crash, timeout, lock, corrupt state, bad ids) are in
test_run_failures.py.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

from tests.conftest import run_cli

from .conftest import (
    BASE_FIXER,
    BASE_SECOND_OPINION,
    FAIL_ON,
    FIXER_ESCALATED,
    NO_ESCALATION,
    REVIEWERS,
    STRONG,
    TICKET_ID,
    TICKET_TEXT,
    Harness,
    check_attempt,
    counts,
    finding,
    frontmatter,
    phases,
)

ROLES = {"researcher", "worker", *REVIEWERS, "fixer", "closer"}
PHASES = {"research", "implement", "review", "fix", "verify", "close"}
SECRET = "sk-ant-api03-" + "A" * 40


def expected_calls(*, research: bool, implement: bool, fix: bool) -> Counter[tuple[str, str]]:
    """Agent invocations of one attempt: every reviewer reviews, and re-reviews after a fix."""
    calls = Counter({("review", r): 1 for r in REVIEWERS} | {("close", "closer"): 1})
    calls.update({("research", "researcher")} if research else ())
    calls.update({("implement", "worker")} if implement else ())
    if fix:
        calls.update({("fix", "fixer"): 1} | {("verify", r): 1 for r in REVIEWERS})
    return calls


def close_status(e2e: Harness) -> str:
    lines = (e2e.dir / "close-summary.md").read_text(encoding="utf-8").splitlines()
    after = lines[lines.index("## Status") + 1 :]
    return next(line for line in after if line.strip())


def test_closes_on_first_attempt(e2e: Harness) -> None:
    result = e2e.run()
    assert result.returncode == 0, result.stderr

    state = e2e.read_state()
    assert (state["version"], state["ticketId"]) == (1, TICKET_ID)
    assert (state["status"], state["retryCount"]) == ("closed", 0)
    [attempt] = state["attempts"]
    check_attempt(attempt, 1, "closed", "initial", NO_ESCALATION, counts())

    chain = e2e.chain()
    assert (chain["ticketId"], chain["attempt"], chain["trigger"]) == (TICKET_ID, 1, "initial")
    assert (chain["tier"], chain["escalatedRoles"]) == (1, [])
    assert set(chain["models"]) == ROLES
    assert set(chain["phases"]) == PHASES
    fixer = chain["models"]["fixer"]
    assert (fixer["model"], fixer["escalated"]) == (BASE_FIXER, False)
    assert fixer["baseModel"] == BASE_FIXER
    assert chain["phases"]["research"]["runs"] is True
    assert chain["flags"]["once"] is False
    assert Path(chain["artifactDir"]).resolve() == e2e.dir.resolve()

    # Journal: no fix (nothing to fix), verify decides the gate without re-reviewing.
    assert e2e.phase_trace(1) == phases(fix=False)
    e2e.assert_attempt_frame(1, "GateEvaluated", "TicketClosed")
    assert e2e.event("AttemptStarted", 1)["escalation"] == NO_ESCALATION
    assert e2e.event("AttemptStarted", 1)["trigger"] == "initial"
    assert e2e.event("PhaseSkipped", 1, phase="fix")["reason"]
    gate = e2e.event("GateEvaluated", 1)
    assert (gate["passed"], gate["counts"], gate["failOn"]) == (True, counts(), FAIL_ON)
    assert e2e.event("TicketClosed", 1)["retryCountBefore"] == 0
    assert e2e.event("AttemptFinished", 1)["status"] == "closed"
    assert "EscalationApplied" not in e2e.names()
    assert "ResearchSkippedOnRetry" not in e2e.names()
    finished = [ev for ev in e2e.events(1) if ev["event"] == "InvocationFinished"]
    assert Counter((ev["phase"], ev["role"]) for ev in finished) == e2e.call_counts(1)
    assert all(ev["ok"] for ev in finished)

    # The fake agent saw exactly these invocations (no verify: the fix did not run).
    assert e2e.call_counts(1) == expected_calls(research=True, implement=True, fix=False)
    assert e2e.agent_calls(phase="verify") == []
    for call in e2e.agent_calls():
        name = f"{call['phase']}-{call['role']}"
        assert (e2e.dir / "prompts" / "attempt-1" / f"{name}.md").is_file()
        assert (e2e.dir / "logs" / "attempt-1" / f"{name}.log").is_file()
    for name in ("research.md", "implementation.md", "review.md", "close-notes.md"):
        assert (e2e.dir / name).is_file(), name
    assert (e2e.dir / "post-fix-verification.md").is_file()
    assert (e2e.dir / "post-fix-verification.json").is_file()
    assert close_status(e2e) == "**CLOSED**"

    # The tk ticket: only the status line changed, a note was appended, tk can still read it.
    text = e2e.ticket_file.read_text(encoding="utf-8")
    original = frontmatter(TICKET_TEXT)
    expected = ["status: closed" if ln.startswith("status:") else ln for ln in original]
    assert frontmatter(text) == expected
    assert TICKET_TEXT.split("---\n", 2)[2] in text
    lines = text.split("\n")
    notes = lines[lines.index("## Notes") + 1 :]
    assert any(re.fullmatch(r"\*\*\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\*\*", ln) for ln in notes)


def test_blocked_then_closed_after_escalation(e2e: Harness) -> None:
    e2e.plan(findings=[finding("f1", [STRONG])])
    result = e2e.run()
    assert result.returncode == 0, result.stderr

    state = e2e.read_state()
    assert (state["status"], state["retryCount"]) == ("closed", 0)
    first, second = state["attempts"]
    check_attempt(first, 1, "blocked", "initial", NO_ESCALATION, counts(Major=1))
    check_attempt(second, 2, "closed", "quality_gate", FIXER_ESCALATED, counts())

    # chain-context.json per attempt, as each agent invocation saw it
    for attempt, trigger, escalated in ((1, "initial", []), (2, "quality_gate", ["fixer"])):
        seen = e2e.chains_seen(attempt)
        assert seen, attempt
        for ctx in seen:
            assert (ctx["trigger"], ctx["tier"], ctx["escalatedRoles"]) == (
                trigger,
                attempt,
                escalated,
            )
    chain = e2e.chain()
    assert (chain["attempt"], chain["trigger"], chain["tier"]) == (2, "quality_gate", 2)
    assert chain["escalatedRoles"] == ["fixer"]
    fixer = chain["models"]["fixer"]
    assert (fixer["model"], fixer["thinking"], fixer["escalated"]) == (STRONG, "high", True)
    assert fixer["baseModel"] == BASE_FIXER
    assert chain["models"]["worker"]["escalated"] is False
    assert chain["phases"]["research"]["runs"] is False
    assert chain["phases"]["implement"]["runs"] is False

    # Attempt 1: the base fixer cannot fix it, the re-review still sees it: blocked.
    assert e2e.phase_trace(1) == phases()
    e2e.assert_attempt_frame(1, "GateEvaluated", "TicketBlocked")
    gate = e2e.event("GateEvaluated", 1)
    assert (gate["passed"], gate["counts"]) == (False, counts(Major=1))
    blocked = e2e.event("TicketBlocked", 1)
    assert (blocked["retryCount"], blocked["maxRetries"]) == (1, 3)
    assert e2e.event("AttemptFinished", 1)["status"] == "blocked"
    assert "EscalationApplied" not in e2e.names(1)

    # Attempt 2 starts at once: escalated fixer, no research, no implement (worker not escalated).
    assert e2e.phase_trace(2) == phases(research=False, implement=False)
    e2e.assert_attempt_frame(
        2, "EscalationApplied", "ResearchSkippedOnRetry", "GateEvaluated", "TicketClosed"
    )
    started = e2e.event("AttemptStarted", 2)
    assert (started["trigger"], started["escalation"]) == ("quality_gate", FIXER_ESCALATED)
    applied = e2e.event("EscalationApplied", 2)
    assert (applied["roles"], applied["tier"]) == ({"fixer": STRONG}, 2)
    skipped = e2e.event("ResearchSkippedOnRetry", 2)
    assert (skipped["attemptCount"], skipped["lastFailureKind"]) == (1, "quality_gate")
    assert e2e.event("GateEvaluated", 2)["passed"] is True
    assert e2e.event("TicketClosed", 2)["retryCountBefore"] == 1
    assert e2e.event("InvocationFinished", 2, role="fixer")["model"] == STRONG

    assert e2e.models("fixer") == [(1, BASE_FIXER), (2, STRONG)]
    assert e2e.call_counts(1) == expected_calls(research=True, implement=True, fix=True)
    assert e2e.call_counts(2) == expected_calls(research=False, implement=False, fix=True)
    assert close_status(e2e) == "**CLOSED**"


def test_blocked_until_the_retry_cap(e2e: Harness) -> None:
    e2e.plan(findings=[finding("f1", [])])  # nobody can fix it
    result = e2e.run()
    assert result.returncode == 4, result.stderr

    state = e2e.read_state()
    assert (state["status"], state["retryCount"]) == ("blocked", 3)
    a1, a2, a3 = state["attempts"]
    check_attempt(a1, 1, "blocked", "initial", NO_ESCALATION, counts(Major=1))
    check_attempt(a2, 2, "blocked", "quality_gate", FIXER_ESCALATED, counts(Major=1))
    # Tier 3 escalates the second-opinion reviewer and the worker too, but neither is configured.
    check_attempt(a3, 3, "blocked", "quality_gate", FIXER_ESCALATED, counts(Major=1))
    status = json.loads(run_cli("status", "pt-1", "--json", cwd=e2e.project).stdout)
    assert status["skip"] is True and status["next"] == (
        "nothing: max retries (3) exceeded: blocked after 3 attempts; "
        "`tf-fsm run pt-1 --retry-reset` starts over"
    )

    chain = e2e.chain()
    assert (chain["attempt"], chain["trigger"], chain["tier"]) == (3, "quality_gate", 3)
    assert chain["escalatedRoles"] == ["fixer"]
    second = chain["models"]["reviewer-second-opinion"]
    assert (second["model"], second["escalated"]) == (BASE_SECOND_OPINION, False)
    assert chain["models"]["worker"]["escalated"] is False
    assert chain["phases"]["implement"]["runs"] is False

    for n, trigger in ((1, "initial"), (2, "quality_gate"), (3, "quality_gate")):
        assert e2e.event("AttemptStarted", n)["trigger"] == trigger
        blocked = e2e.event("TicketBlocked", n)
        assert (blocked["retryCount"], blocked["maxRetries"]) == (n, 3)
    assert e2e.phase_trace(3) == phases(research=False, implement=False)
    exhausted = e2e.event("RetriesExhausted")
    assert (exhausted["retryCount"], exhausted["maxRetries"]) == (3, 3)
    assert e2e.models("fixer") == [(1, BASE_FIXER), (2, STRONG), (3, STRONG)]
    assert {model for _, model in e2e.models("reviewer-second-opinion")} == {BASE_SECOND_OPINION}
    assert [c["attempt"] for c in e2e.agent_calls(phase="implement")] == [1]
    assert close_status(e2e).startswith("**BLOCKED**")

    # Blocked for good: refused before any agent runs.
    calls = e2e.log_file.read_bytes()
    again = e2e.run()
    assert again.returncode == 4, again.stderr
    assert re.search(r"max(imum)?[ _-]?retries|retries exhausted", again.stderr, re.I)
    assert e2e.log_file.read_bytes() == calls
    assert len(e2e.read_state()["attempts"]) == 3
    assert e2e.names().count("AttemptStarted") == 3
    ticket = e2e.ticket_file.read_text(encoding="utf-8")
    assert "status: closed" not in frontmatter(ticket)
    assert "## Notes" in ticket.split("\n")


def test_once_stops_after_one_attempt_then_manual_retry(e2e: Harness) -> None:
    e2e.plan(findings=[finding("f1", [STRONG])])
    result = e2e.run("--once")
    assert result.returncode == 3, result.stderr

    state = e2e.read_state()
    assert (state["status"], state["retryCount"]) == ("active", 1)
    [attempt] = state["attempts"]
    check_attempt(attempt, 1, "blocked", "initial", NO_ESCALATION, counts(Major=1))
    assert e2e.chain()["flags"]["once"] is True
    assert {c["attempt"] for c in e2e.agent_calls()} == {1}
    assert close_status(e2e).startswith("**BLOCKED**")

    again = e2e.run()
    assert again.returncode == 0, again.stderr
    state = e2e.read_state()
    assert (state["status"], state["retryCount"]) == ("closed", 0)
    check_attempt(state["attempts"][1], 2, "closed", "manual_retry", FIXER_ESCALATED, counts())
    chain = e2e.chain()
    assert (chain["attempt"], chain["trigger"]) == (2, "manual_retry")
    assert chain["escalatedRoles"] == ["fixer"]
    assert chain["flags"]["once"] is False
    assert e2e.event("AttemptStarted", 2)["trigger"] == "manual_retry"
    assert e2e.phase_trace(2) == phases(research=False, implement=False)
    assert e2e.models("fixer") == [(1, BASE_FIXER), (2, STRONG)]


def test_secrets_are_redacted_in_everything_tf_fsm_writes(e2e: Harness) -> None:
    leak = finding("s1", "*", text=f"`config.py:3` - hard-coded API key {SECRET}")
    e2e.plan(secret=SECRET, findings=[leak])
    result = e2e.run()
    assert result.returncode == 0, result.stderr
    # the agent wrote the key into its own review: tf_fsm took it out of that file too
    assert "hard-coded API key [REDACTED" in (e2e.dir / "review-general.md").read_text()
    every = [p for p in e2e.dir.rglob("*") if p.is_file()]
    assert {"review-general.md", "implementation.md", "fixes.md"} <= {p.name for p in every}
    for path in every:
        assert SECRET not in path.read_text(encoding="utf-8", errors="replace"), path

    names = [
        "review.md",
        "post-fix-review.md",
        "post-fix-verification.md",
        "post-fix-verification.json",
        "close-summary.md",
        "events.jsonl",
        "chain-context.json",
        "retry-state.json",
    ]
    logs = [p for p in (e2e.dir / "logs").rglob("*") if p.is_file()]
    prompts = [p for p in (e2e.dir / "prompts").rglob("*") if p.is_file()]
    assert logs
    assert prompts
    for path in [*(e2e.dir / n for n in names), *logs, *prompts, e2e.ticket_file]:
        text = path.read_text(encoding="utf-8", errors="replace")
        assert SECRET not in text, path
        assert SECRET[-24:] not in text, f"{path}: partly redacted"
