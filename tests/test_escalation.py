from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tf_fsm.core.curve import TIERED_CURVE, AttemptRecord, escalate_from, escalate_none
from tf_fsm.core.escalation import resolve, retries_left, should_retry
from tf_fsm.core.next_step import Facts, next_step
from tf_fsm.core.state import (
    EscalationRecord,
    RetryState,
    finish_attempt,
    new_state,
    reopen_attempt,
    start_attempt,
)
from tf_fsm.settings.load import LoadedSettings, settings_from_dict

T0 = datetime(2026, 2, 10, tzinfo=UTC)
META = {
    "base-fix": {"model": "p/fix-base", "thinking": "low"},
    "strong": {"model": "p/strong", "thinking": "xhigh"},
}
ALL_MODELS = {
    "fixer": "strong",
    "reviewerSecondOpinion": "p/second-strong",
    "worker": "p/worker-strong",
}


def make(enabled: bool, models: dict[str, Any], max_retries: int = 3) -> LoadedSettings:
    return settings_from_dict(
        {
            "metaModels": META,
            "agents": {"fixer": "base-fix"},
            "workflow": {
                "escalation": {"enabled": enabled, "maxRetries": max_retries, "models": models}
            },
        }
    )


# attempt -> roles escalated, with every escalation model configured
CURVE = {1: set(), 2: {"fixer"}, 3: {"fixer", "reviewer-second-opinion", "worker"}}


@pytest.mark.parametrize("attempt", range(1, 7))
@pytest.mark.parametrize("enabled", [True, False])
@pytest.mark.parametrize("configured", ["all", "none", "fixer-only"])
def test_curve_table(attempt: int, enabled: bool, configured: str) -> None:
    models = {"all": ALL_MODELS, "none": {}, "fixer-only": {"fixer": "strong"}}[configured]
    settings = make(enabled, models)
    res = resolve(attempt, settings)
    expected = set(CURVE[min(attempt, 3)]) if enabled else set()
    if configured == "none":
        expected = set()
    elif configured == "fixer-only":
        expected &= {"fixer"}
    assert set(res.escalated_roles) == expected
    assert res.tier == min(attempt, 3)
    # models follow the flags
    fixer = res.roles["fixer"]
    if "fixer" in expected:
        assert (fixer.model, fixer.thinking, fixer.base_model) == (
            "p/strong",
            "xhigh",
            "p/fix-base",
        )
        assert "workflow.escalation.models.fixer" in fixer.reason
    else:
        assert (fixer.model, fixer.thinking) == ("p/fix-base", "low")
    for role in ("researcher", "reviewer-general", "reviewer-spec-audit", "closer"):
        assert not res.roles[role].escalated
    record = res.escalation_record().to_json_dict()
    assert set(record) == {"fixer", "reviewerSecondOpinion", "worker"}
    assert (record["worker"] is not None) == ("worker" in expected)


def test_reasons_say_why() -> None:
    res = resolve(3, make(True, {"fixer": "strong"}))
    assert "attempt 3, tier 3" in res.roles["fixer"].reason
    assert "workflow.escalation.models.worker is null: base model" in res.roles["worker"].reason
    off = resolve(2, make(False, ALL_MODELS))
    assert "escalation disabled" in off.roles["fixer"].reason
    assert (
        "attempt 1, tier 1: base model" in resolve(1, make(True, ALL_MODELS)).roles["fixer"].reason
    )


def test_policies_compose() -> None:
    custom = escalate_from("worker", 2) | escalate_none()
    assert custom(AttemptRecord(1)) == frozenset()
    assert custom(AttemptRecord(2)) == {"worker"}
    assert TIERED_CURVE(AttemptRecord(2)) == {"fixer"}
    assert "escalate_from('fixer', 2)" in repr(TIERED_CURVE)
    res = resolve(2, make(True, ALL_MODELS), policy=custom)
    assert res.escalated_roles == ["worker"]


@pytest.mark.parametrize(("n", "tier"), [(0, 1), (1, 1), (2, 2), (3, 3), (9, 3)])
def test_tier_of(n: int, tier: int) -> None:
    assert TIERED_CURVE.tier_of(n) == tier


def test_a_curve_carries_its_tiers() -> None:
    """A tier begins where the curve changes what escalates, and is numbered by that attempt."""
    assert (TIERED_CURVE.tiers, TIERED_CURVE.top) == ((1, 2, 3), 3)
    late = escalate_from("fixer", 3) | escalate_from("worker", 5)
    assert (late.tiers, late.top) == ((1, 3, 5), 5)
    assert [late.tier_of(n) for n in (1, 2, 3, 4, 5, 9)] == [1, 1, 3, 3, 5, 5]
    assert (escalate_none().tiers, escalate_none().tier_of(4)) == ((1,), 1)
    assert [late.attempts_of(t) for t in late.tiers] == ["1", "3", "5+"]


def _blocked(state: RetryState, max_retries: int) -> RetryState:
    state = start_attempt(
        state, trigger="initial", escalation=EscalationRecord.of(), fail_on=[], now=T0
    )
    return finish_attempt(state, status="blocked", counts=None, max_retries=max_retries, now=T0)


class _OpenTicket:
    status, body = "open", ""


def should_skip(state: RetryState | None, settings: LoadedSettings) -> bool:
    """Does `run` refuse the ticket (the decision of what runs next), as the loop skips it?"""
    facts = Facts(
        "pt-1",
        state,
        settings,
        tk_file=_OpenTicket,
        journal=list,
        look=lambda name: None,
        gate_decided=lambda: False,
        budget_refusal=lambda: None,
    )
    return next_step(facts).refused


def test_cap_and_skip() -> None:
    settings = make(True, ALL_MODELS, max_retries=2)
    state = new_state("pt-1", T0)
    assert should_retry(None, settings) and not should_skip(None, settings)
    state = _blocked(state, 2)
    assert should_retry(state, settings) and not should_skip(state, settings)
    assert retries_left(state, settings) == 1
    state = _blocked(state, 2)
    assert not should_retry(state, settings)
    assert should_skip(state, settings)
    assert state.status == "blocked"


def test_skip_applies_with_escalation_disabled_too() -> None:
    # The cap is what stops the backlog loop thrashing; it does not depend on escalation.
    settings = make(False, {}, max_retries=1)
    state = _blocked(new_state("pt-1", T0), 1)
    assert should_skip(state, settings)


@given(
    outcomes=st.lists(st.sampled_from(["blocked", "closed", "error"]), max_size=30),
    max_retries=st.integers(0, 6),
)
def test_attempts_in_a_row_never_exceed_max_retries(outcomes: list[str], max_retries: int) -> None:
    """However outcomes fall, no ticket runs more than maxRetries attempts between closes."""
    settings = make(True, ALL_MODELS, max_retries=max_retries)
    state = new_state("pt-1", T0)
    since_close = 0
    for outcome in outcomes:
        if state.has_open_attempt:  # an error is resumed, not counted as a new attempt
            state = reopen_attempt(state, T0)
        elif not should_retry(state, settings):
            assert max_retries == 0 or should_skip(state, settings)
            break
        else:
            state = start_attempt(
                state, trigger="initial", escalation=EscalationRecord.of(), fail_on=[], now=T0
            )
            since_close += 1
        state = finish_attempt(state, status=outcome, counts=None, max_retries=max_retries, now=T0)  # type: ignore[arg-type]
        if outcome == "closed":
            since_close = 0
        assert since_close <= max_retries
