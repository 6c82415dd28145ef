from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from tf_fsm.core.state import (
    SEVERITIES,
    EscalationRecord,
    RetryState,
    derived_retry_count,
    finish_attempt,
    new_state,
    normalize_severity,
    reopen_attempt,
    start_attempt,
    update_current,
)

T0 = datetime(2026, 2, 10, 13, 0, 0, tzinfo=UTC)

# A real pi-ticketflow file's shape: repeated attemptNumber, legacy trigger, unknown extra key.
PI_FILE: dict[str, Any] = {
    "version": 1,
    "ticketId": "abc-123",
    "attempts": [
        {
            "attemptNumber": 1,
            "startedAt": "2026-02-10T13:50:04Z",
            "completedAt": "2026-02-10T13:50:04Z",
            "status": "blocked",
            "trigger": "manual",
            "qualityGate": {
                "failOn": ["Critical", "Major"],
                "counts": {"Critical": 0, "Major": 3, "Minor": 3, "Warnings": 2, "Suggestions": 6},
            },
            "escalation": {"fixer": None, "reviewerSecondOpinion": None, "worker": None},
            "closeSummaryRef": "close-summary.md",
        },
        {
            "attemptNumber": 2,
            "startedAt": "2026-02-10T13:52:38Z",
            "completedAt": "2026-02-10T13:52:38Z",
            "status": "closed",
            "trigger": "manual",
            "qualityGate": {"failOn": ["Critical", "Major"], "counts": {"Critical": 0, "Major": 0}},
            "escalation": {
                "fixer": "openai-codex/gpt-5.3-codex",
                "reviewerSecondOpinion": None,
                "worker": None,
            },
            "closeSummaryRef": "close-summary.md",
        },
        {
            "attemptNumber": 1,
            "startedAt": "2026-02-14T02:37:05Z",
            "status": "in_progress",
            "trigger": "implementation",
            "note": "kept",
        },
    ],
    "lastAttemptAt": "2026-02-14T02:37:05Z",
    "status": "active",
    "retryCount": 0,
}


def test_pi_ticketflow_file_round_trips_unchanged() -> None:
    state = RetryState.model_validate(json.loads(json.dumps(PI_FILE)))
    assert state.to_json_dict() == PI_FILE
    # and key order survives too, so a rewrite produces the same text
    assert json.dumps(state.to_json_dict(), indent=2) == json.dumps(PI_FILE, indent=2)
    assert state.current is not None and state.current.trigger == "implementation"
    assert state.has_open_attempt


@pytest.mark.parametrize(
    "trigger",
    [
        "initial",
        "quality_gate",
        "manual_retry",
        "ralph_retry",
        "manual",
        "implementation",
        "retry",
        "auto",
    ],
)
def test_all_known_triggers_load(trigger: str) -> None:
    data = {**PI_FILE, "attempts": [{**PI_FILE["attempts"][0], "trigger": trigger}]}
    assert RetryState.model_validate(data).attempts[0].trigger == trigger


def test_statuses_parsed_case_insensitively_and_stored_lower() -> None:
    data = {
        **PI_FILE,
        "status": "ACTIVE",
        "attempts": [{**PI_FILE["attempts"][0], "status": "Blocked"}],
    }
    state = RetryState.model_validate(data)
    assert state.status == "active"
    assert state.attempts[0].status == "blocked"


@pytest.mark.parametrize(
    ("patch", "where"),
    [
        ({"status": "exploded"}, "status"),
        ({"retryCount": -1}, "retryCount"),
        ({"version": 2}, "version"),
        ({"lastAttemptAt": "yesterday"}, "lastAttemptAt"),
        (
            {
                "attempts": [
                    {
                        "attemptNumber": 0,
                        "startedAt": "2026-02-10T13:50:04Z",
                        "status": "blocked",
                        "trigger": "manual",
                    }
                ]
            },
            "attemptNumber",
        ),
        (
            {
                "attempts": [
                    {
                        "attemptNumber": 1,
                        "startedAt": "2026-02-10T13:50:04Z",
                        "status": "done",
                        "trigger": "manual",
                    }
                ]
            },
            "status",
        ),
        (
            {
                "attempts": [
                    {
                        "attemptNumber": 1,
                        "startedAt": "2026-02-10T13:50:04Z",
                        "status": "blocked",
                        "trigger": "Bad Trigger",
                    }
                ]
            },
            "trigger",
        ),
        ({"retryCount": "2"}, "retryCount"),  # a hand edit: not silently a count
        ({"retryCount": True}, "retryCount"),
        ({"stopReason": "tired"}, "stopReason"),  # only same-failure stops a ticket
        (
            {
                "attempts": [
                    {
                        "attemptNumber": 1,
                        "startedAt": "2026-02-10T13:50:04Z",
                        "status": "blocked",
                        "trigger": "manual",
                        "tier": 99,
                    }
                ]
            },
            "tier",
        ),
        (
            {
                "attempts": [
                    {
                        "attemptNumber": "1",
                        "startedAt": "2026-02-10T13:50:04Z",
                        "status": "blocked",
                        "trigger": "manual",
                    }
                ]
            },
            "attemptNumber",
        ),
    ],
)
def test_invalid_state_rejected(patch: dict[str, Any], where: str) -> None:
    with pytest.raises(ValidationError) as info:
        RetryState.model_validate({**PI_FILE, **patch})
    assert any(where in ".".join(map(str, e["loc"])) for e in info.value.errors())


def test_missing_retry_count_is_derived_not_reset() -> None:
    data = {k: v for k, v in PI_FILE.items() if k != "retryCount"}
    data["attempts"] = [PI_FILE["attempts"][0], {**PI_FILE["attempts"][0], "attemptNumber": 2}]
    assert RetryState.model_validate(data).retryCount == 2


def test_counter_rules_blocked_increments_close_resets() -> None:
    state = new_state("pt-1", T0)
    assert state.next_attempt_number == 1
    fail_on = ["Critical", "Major"]
    for n in (1, 2):
        state = start_attempt(
            state,
            trigger="initial" if n == 1 else "quality_gate",
            escalation=EscalationRecord.of(),
            fail_on=fail_on,
            now=T0 + timedelta(seconds=n),
        )
        assert state.current is not None and state.current.attemptNumber == n
        state = finish_attempt(state, status="blocked", counts={"Major": 2}, max_retries=3, now=T0)
        assert state.retryCount == n
        assert state.status == "active"  # retries left: still active
    state = start_attempt(
        state,
        trigger="quality_gate",
        escalation=EscalationRecord.of(fixer="x/y"),
        fail_on=fail_on,
        now=T0,
    )
    state = finish_attempt(state, status="closed", counts={}, max_retries=3, now=T0)
    assert (state.retryCount, state.status) == (0, "closed")
    assert state.next_attempt_number == 1  # a reopened ticket starts at the base tier again
    last = state.attempts[-1]
    assert last.qualityGate is not None
    assert last.qualityGate.counts == dict.fromkeys(SEVERITIES, 0)
    assert last.closeSummaryRef == "close-summary.md"
    assert derived_retry_count(state.attempts) == 0


def test_exhausted_retries_make_the_ticket_blocked() -> None:
    state = new_state("pt-1", T0)
    for _ in range(2):
        state = start_attempt(
            state, trigger="initial", escalation=EscalationRecord.of(), fail_on=[], now=T0
        )
        state = finish_attempt(state, status="blocked", counts=None, max_retries=2, now=T0)
    assert (state.status, state.retryCount) == ("blocked", 2)


def test_error_keeps_counter_and_attempt_resumes_with_same_number() -> None:
    state = new_state("pt-1", T0)
    state = start_attempt(
        state, trigger="initial", escalation=EscalationRecord.of(), fail_on=[], now=T0
    )
    state = update_current(state, phase="review")
    state = finish_attempt(
        state, status="error", counts=None, max_retries=3, now=T0, reason="review crashed"
    )
    assert state.retryCount == 0 and state.status == "active"
    assert state.current is not None and state.current.closeSummaryRef is None
    with pytest.raises(ValueError, match="resume"):
        start_attempt(
            state, trigger="manual_retry", escalation=EscalationRecord.of(), fail_on=[], now=T0
        )
    state = reopen_attempt(state, T0 + timedelta(minutes=1))
    cur = state.current
    assert cur is not None
    assert (cur.attemptNumber, cur.status, cur.phase, cur.completedAt, cur.reason) == (
        1,
        "in_progress",
        "review",
        None,
        None,
    )
    assert len(state.attempts) == 1


def test_same_second_attempts_keep_file_order() -> None:
    state = new_state("pt-1", T0)
    for _ in range(3):
        state = start_attempt(
            state, trigger="initial", escalation=EscalationRecord.of(), fail_on=[], now=T0
        )
        state = finish_attempt(state, status="blocked", counts=None, max_retries=5, now=T0)
    assert [a.attemptNumber for a in state.attempts] == [1, 2, 3]
    assert len({a.startedAt for a in state.attempts}) == 1


def test_written_file_satisfies_pi_ticketflow_loader_required_keys() -> None:
    state = new_state("pt-1", T0)
    state = start_attempt(
        state, trigger="initial", escalation=EscalationRecord.of(), fail_on=["Critical"], now=T0
    )
    data = state.to_json_dict()
    # pi-ticketflow's RetryState._validate_schema requires exactly these
    assert {"version", "ticketId", "attempts", "lastAttemptAt", "status"} <= data.keys()
    assert data["retryCount"] == 0
    assert data["attempts"][0]["escalation"] == {
        "fixer": None,
        "reviewerSecondOpinion": None,
        "worker": None,
    }
    assert data["lastAttemptAt"].endswith("Z")


@pytest.mark.parametrize(
    ("name", "canonical"),
    [
        ("critical", "Critical"),
        ("WARNING", "Warnings"),
        ("Suggestion", "Suggestions"),
        ("**Major**", "Major"),
        ("minor:", "Minor"),
        ("blocker", None),
        ("", None),
    ],
)
def test_normalize_severity(name: str, canonical: str | None) -> None:
    assert normalize_severity(name) == canonical


@given(st.lists(st.sampled_from(["blocked", "closed", "error"]), max_size=20), st.integers(1, 6))
def test_retry_count_always_matches_history(outcomes: list[str], max_retries: int) -> None:
    state = new_state("pt-1", T0)
    for outcome in outcomes:
        if state.has_open_attempt:
            state = reopen_attempt(state, T0)
        else:
            state = start_attempt(
                state, trigger="initial", escalation=EscalationRecord.of(), fail_on=[], now=T0
            )
        state = finish_attempt(state, status=outcome, counts=None, max_retries=max_retries, now=T0)  # type: ignore[arg-type]
        assert state.retryCount == derived_retry_count(state.attempts)
        assert state.retryCount >= 0
        # round-trips through JSON at every step
        assert RetryState.model_validate(json.loads(json.dumps(state.to_json_dict()))) == state
