"""The same-failure short-circuit: signatures (pure), the decision (pure, table + property),
and the three modes end to end through run_ticket with the scripted agent."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import run_cli, tk_ticket
from tf_fsm.core.escalation import (
    SameFailure,
    TriedAttempt,
    next_tier,
    resolve,
    same_failure,
    tier_models,
)
from tf_fsm.core.journal import SameFailureDetected
from tf_fsm.core.signature import failure_signature, finding_key, normalize
from tf_fsm.core.state import RetryState
from tf_fsm.engine.orchestrator import RunOptions, run_ticket
from tf_fsm.settings.load import load_settings, settings_from_dict
from tf_fsm.storage.backends import open_store
from tf_fsm.storage.store import TicketStore
from tf_fsm.views.status import ticket_status

FAIL_ON = ["Critical", "Major"]


def sig(findings: dict[str, list[str]], gates: tuple[str, ...] = (), **counts: int) -> str | None:
    full = {s: len(v) for s, v in findings.items()} | counts
    signature = failure_signature(FAIL_ON, findings, full, gates)
    return signature.digest if signature else None


# -- signatures -------------------------------------------------------------------------------

SAME = [
    # line numbers drift as code moves
    ({"Major": ["`src/parser.py:42` - unbounded recursion"]},
     {"Major": ["`src/parser.py:57` - unbounded recursion"]}),
    # the reviewer rewords the finding; the location is the key
    ({"Major": ["`src/parser.py:42` - unbounded recursion"]},
     {"Major": ["`src/parser.py:44` - recursion has no depth limit"]}),
    # case and whitespace
    ({"Critical": ["SQL injection   in Query Builder"]},
     {"Critical": ["sql injection in query builder"]}),
    # order of findings, and findings in non-failOn severities
    ({"Major": ["`a.py:1` - x", "`b.py:2` - y"], "Minor": ["`c.py:3` - z"]},
     {"Major": ["`b.py:9` - y", "`a.py:8` - x"]}),
    # a location without backticks, with a column
    ({"Major": ["lib/io/reader.ts:12:4 leaks a handle"]},
     {"Major": ["lib/io/reader.ts:30:1 leaks a handle"]}),
]  # fmt: skip

DIFFERENT = [
    # another file
    ({"Major": ["`src/parser.py:42` - x"]}, {"Major": ["`src/lexer.py:42` - x"]}),
    # another severity at the same place
    ({"Major": ["`src/parser.py:42` - x"]}, {"Critical": ["`src/parser.py:42` - x"]}),
    # one of two findings at a file fixed: progress
    ({"Major": ["`a.py:1` - x", "`a.py:9` - y"]}, {"Major": ["`a.py:1` - x"]}),
    # no location: the text decides
    ({"Major": ["missing input validation"]}, {"Major": ["missing output encoding"]}),
]


@pytest.mark.parametrize(("one", "two"), SAME)
def test_signatures_equal_after_normalization(one: Any, two: Any) -> None:
    assert sig(one) == sig(two) is not None


@pytest.mark.parametrize(("one", "two"), DIFFERENT)
def test_signatures_differ(one: Any, two: Any) -> None:
    assert sig(one) != sig(two)


def test_gates_and_unlisted_counts_are_part_of_the_signature() -> None:
    findings = {"Major": ["`a.py:1` - x"]}
    assert sig(findings, ("tests",)) != sig(findings)
    assert sig(findings, ("tests",)) == sig(findings, ("Tests",))
    # a statistics-only review (counts, no list) is still told apart by its counts
    assert sig({}, Major=2) != sig({}, Major=1)
    assert sig({}) is None  # nothing blocks: no signature
    assert sig({"Minor": ["`a.py:1` - x"]}) is None


def test_finding_key_corpus() -> None:
    assert finding_key("Major", "`src/Parser.py:42` - X") == "major src/parser.py:#"
    assert finding_key("Major", "e.g. use v3.10 here") == "major e.g. use v#.# here"
    assert finding_key("Minor", "in README.md the  table") == "minor readme.md"
    assert normalize("  A\t12  b ") == "a # b"


@given(st.text(max_size=80), st.lists(st.integers(0, 10**6), min_size=1, max_size=4))
def test_renumbering_never_changes_a_finding_key(text: str, numbers: list[int]) -> None:
    one = text + " " + " ".join(map(str, numbers))
    two = text + " " + " ".join(str(n + 7) for n in numbers)
    assert finding_key("Major", one) == finding_key("Major", two)


# -- the decision -----------------------------------------------------------------------------

BASE: tuple[tuple[str, str | None], ...] = (
    ("fixer", None),
    ("reviewerSecondOpinion", None),
    ("worker", None),
)
FIX = (("fixer", "S"), ("reviewerSecondOpinion", None), ("worker", None))
ALL = (("fixer", "S"), ("reviewerSecondOpinion", "S"), ("worker", "S"))
CURVE = {1: BASE, 2: FIX, 3: ALL}


def tried(number: int, tier: int, models: Any, signature: str | None = "X") -> TriedAttempt:
    return TriedAttempt(number, tier, signature, models)


@pytest.mark.parametrize(
    ("mode", "prev", "last", "tiers", "action", "next_tier"),
    [
        # the step from tier 1 to 2 did not help: the curve escalates anyway
        ("skip-tier", tried(1, 1, BASE), tried(2, 2, FIX), CURVE, "escalate", 3),
        # the top tier failed like tier 2: it gets its second attempt
        ("skip-tier", tried(2, 2, FIX), tried(3, 3, ALL), CURVE, "retry-top", 3),
        # the top tier failed the same way twice: nowhere to go
        ("skip-tier", tried(3, 3, ALL), tried(4, 3, ALL), CURVE, "stop", None),
        # tier 2 changes nothing (no fixer model): tiers 1 and 2 spent, tier 3 next
        (
            "skip-tier",
            tried(1, 1, BASE),
            tried(2, 2, BASE),
            {1: BASE, 2: BASE, 3: ALL},
            "skip-tier",
            3,
        ),
        # nothing escalates at all: the same models twice is the top tier twice
        (
            "skip-tier",
            tried(1, 1, BASE),
            tried(2, 2, BASE),
            {1: BASE, 2: BASE, 3: BASE},
            "stop",
            None,
        ),
        # stop mode stops on any repeat
        ("stop", tried(1, 1, BASE), tried(2, 2, FIX), CURVE, "stop", None),
    ],
)
def test_decision_table(
    mode: Any, prev: TriedAttempt, last: TriedAttempt, tiers: Any, action: str, next_tier: Any
) -> None:
    decision = same_failure(prev, last, mode, tiers)
    assert decision is not None
    assert (decision.action, decision.next_tier) == (action, next_tier)
    assert (decision.previous, decision.attempt) == (prev.number, last.number)


def test_no_decision_when_off_or_different() -> None:
    assert same_failure(tried(1, 1, BASE), tried(2, 2, FIX), "off", CURVE) is None
    assert same_failure(tried(1, 1, BASE, "X"), tried(2, 2, FIX, "Y"), "skip-tier", CURVE) is None
    assert same_failure(tried(1, 1, BASE, None), tried(2, 2, FIX, None), "stop", CURVE) is None


MODELS = st.sampled_from([BASE, FIX, ALL])


@given(
    st.sampled_from(["skip-tier", "stop", "off"]),
    st.integers(1, 3),
    st.integers(1, 3),
    MODELS,
    MODELS,
    st.sampled_from(["X", "Y", None]),
    st.fixed_dictionaries({1: MODELS, 2: MODELS, 3: MODELS}),
)
def test_decision_properties(
    mode: Any, t1: int, t2: int, m1: Any, m2: Any, s2: str | None, tiers: Any
) -> None:
    decision: SameFailure | None = same_failure(tried(1, t1, m1), tried(2, t2, m2, s2), mode, tiers)
    if mode == "off" or s2 != "X":
        assert decision is None
        return
    assert decision is not None
    if decision.action == "skip-tier":
        # a skip goes up, to a tier whose models differ from the ones that failed twice
        assert decision.next_tier is not None and decision.next_tier > t2
        assert tiers[decision.next_tier] != m2 and m1 == m2
    if decision.action == "stop" and mode == "skip-tier":
        # skip-tier only stops when the same models failed twice and nothing higher differs
        assert m1 == m2 and all(tiers[t] == m2 for t in tiers if t > t2)


def test_resolve_at_a_skipped_tier() -> None:
    settings = settings_from_dict(
        {
            "workflow": {
                "escalation": {"enabled": True, "models": {"fixer": "fixer", "worker": "worker"}}
            }
        }
    )
    assert resolve(2, settings).tier == 2
    skipped = resolve(2, settings, tier=3)
    assert (skipped.tier, sorted(skipped.escalated_roles)) == (3, ["fixer", "worker"])
    assert tier_models(settings)[1] != tier_models(settings)[3]


# -- end to end -------------------------------------------------------------------------------

STRONG = "openai-codex/gpt-5.3-codex"
NEVER = {"id": "N", "severity": "Major", "text": "`a.py:2` - never fixed", "fixedBy": []}


def setup(project: Path, mode: str, models: dict[str, str | None], max_retries: int = 5) -> None:
    (project / ".tickets").mkdir(exist_ok=True)
    (project / ".tickets/pt-1.md").write_text(tk_ticket("pt-1"))
    (project / "scenario.json").write_text(json.dumps({"findings": [NEVER]}))
    settings = {
        "metaModels": {"strong": {"model": STRONG, "thinking": "high"}},
        "workflow": {
            "escalation": {
                "enabled": True,
                "maxRetries": max_retries,
                "models": models,
                "sameFailure": mode,
            },
        },
        "executor": {"kind": "scripted", "scenario": "scenario.json"},
    }
    (project / ".tf/config/settings.json").write_text(json.dumps(settings))


ALL_STRONG = {"fixer": "strong", "reviewerSecondOpinion": "strong", "worker": "strong"}


def loaded(project: Path) -> tuple[TicketStore, RetryState]:
    store = open_store(project, load_settings(project), "pt-1")
    state = store.load_retry_state()
    assert state is not None
    return store, state


def test_skip_tier_stops_after_the_top_tier_fails_the_same_way_twice(project: Path) -> None:
    setup(project, "skip-tier", ALL_STRONG)
    outcome = run_ticket(project, "pt-1", RunOptions())
    assert (outcome.status, outcome.attempt, outcome.attempts_run) == ("exhausted", 4, 4)
    assert outcome.reason.startswith("same-failure: attempts 3 and 4 failed the same way")
    store, state = loaded(project)
    # the counter is not reset; the stop is recorded next to it
    assert (state.status, state.stopReason, state.retryCount) == ("blocked", "same-failure", 4)
    assert [a.tier for a in state.attempts] == [1, 2, 3, 3]
    assert len({a.failureSignature for a in state.attempts}) == 1
    assert [(a.sameFailure or {}).get("action") for a in state.attempts] == [
        None,
        "escalate",
        "retry-top",
        "stop",
    ]
    events = [e for e in store.read_events().events if isinstance(e, SameFailureDetected)]
    assert [(e.previousAttempt, e.attempt, e.action) for e in events] == [
        (1, 2, "escalate"),
        (2, 3, "retry-top"),
        (3, 4, "stop"),
    ]
    assert events[-1].entries == ["major a.py:#"] and events[-1].signature
    ticket = (project / ".tickets/pt-1.md").read_text()
    assert "needs a human: the same failure twice at the top tier" in ticket
    # status shows it; a later run is refused before any agent runs
    row = ticket_status(project, load_settings(project), "pt-1")
    assert row["sameFailure"]["action"] == "stop" and row["stopReason"] == "same-failure"
    assert row["skip"] is True and row["next"].startswith("nothing: same-failure")
    again = run_ticket(project, "pt-1", RunOptions())
    assert (again.status, again.attempts_run) == ("exhausted", 0)
    assert again.reason.startswith("same-failure")
    # --plan (a real process) says so too, with exit code 0
    plan = run_cli("run", "pt-1", "--plan", "--json")
    assert plan.returncode == 0, plan.stderr
    data = json.loads(plan.stdout)
    assert data["action"] == "exhausted" and data["sameFailure"]["attempts"] == [3, 4]
    # and `run` itself exits 4 naming the reason
    done = run_cli("run", "pt-1")
    assert done.returncode == 4 and "same failure" in done.stderr


def test_stop_mode_stops_on_the_first_repeat(project: Path) -> None:
    setup(project, "stop", ALL_STRONG)
    outcome = run_ticket(project, "pt-1", RunOptions())
    assert (outcome.status, outcome.attempt) == ("exhausted", 2)
    _, state = loaded(project)
    assert state.stopReason == "same-failure" and state.retryCount == 2
    assert "the same failure twice in a row" in (project / ".tickets/pt-1.md").read_text()
    # the loop skips it for that reason, not for retries it has not used up (2 of 5)
    loop = run_cli("ralph", "--dry-run")
    said = loop.stdout + loop.stderr
    assert loop.returncode == 0, said
    assert "skip pt-1: same-failure: attempts 1 and 2" in said and "max retries" not in said


def test_off_runs_every_retry(project: Path) -> None:
    setup(project, "off", ALL_STRONG)
    outcome = run_ticket(project, "pt-1", RunOptions())
    assert (outcome.status, outcome.attempt, outcome.attempts_run) == ("exhausted", 5, 5)
    store, state = loaded(project)
    assert state.stopReason is None and [a.tier for a in state.attempts] == [1, 2, 3, 3, 3]
    assert not any(isinstance(e, SameFailureDetected) for e in store.read_events().events)
    assert all(a.failureSignature for a in state.attempts)  # recorded, not acted on


def test_skip_tier_over_a_tier_that_changes_nothing(project: Path) -> None:
    # no fixer model: tier 2 runs tier 1's models, so attempts 1 and 2 spend the same tier
    setup(
        project, "skip-tier", {"fixer": None, "reviewerSecondOpinion": "strong", "worker": "strong"}
    )
    outcome = run_ticket(project, "pt-1", RunOptions(once=True))
    assert outcome.status == "blocked"
    run_ticket(project, "pt-1", RunOptions(once=True))
    _, state = loaded(project)
    assert (state.attempts[-1].sameFailure or {})["action"] == "skip-tier"
    assert next_tier(state, load_settings(project)) == 3
    row = ticket_status(project, load_settings(project), "pt-1")
    assert "skip-tier after attempts 1 and 2" in row["next"]
    run_ticket(project, "pt-1", RunOptions(once=True))
    _, state = loaded(project)
    assert state.attempts[-1].tier == 3 and state.attempts[-1].escalation is not None
    assert state.attempts[-1].escalation.worker == STRONG


def test_escalation_disabled_keeps_todays_behaviour(project: Path) -> None:
    setup(project, "stop", ALL_STRONG)
    data = json.loads((project / ".tf/config/settings.json").read_text())
    data["workflow"]["escalation"]["enabled"] = False
    (project / ".tf/config/settings.json").write_text(json.dumps(data))
    for _ in range(3):
        assert run_ticket(project, "pt-1", RunOptions()).status in ("blocked", "exhausted")
    _, state = loaded(project)
    assert state.stopReason is None and state.retryCount == 3
