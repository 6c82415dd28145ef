from __future__ import annotations

import pytest
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from tf_fsm.core.machine import (
    AWAITING_MERGE,
    BLOCKED,
    CLOSED,
    ERROR,
    INITIAL,
    MERGING,
    PHASES,
    STATES,
    TRANSITIONS,
    TRIGGERS,
    AttemptFacts,
    Edge,
    Lifecycle,
    TicketModel,
    check_structure,
    lifecycle,
    phase_of,
    phase_state,
    retries_left,
    state_of_attempt,
)
from tf_fsm.errors import TfFsmError, TransitionError


def test_structure_is_valid() -> None:
    report = check_structure()
    assert report.ok, report
    assert STATES[0] == INITIAL
    assert set(TRIGGERS) == {
        "start",
        "retry",
        "complete",
        "skip",
        "fail",
        "resume",
        "merge",
        "merged",
        "rerun",
    }


def test_every_phase_has_error_edge_and_resume_back() -> None:
    for phase in PHASES:
        state = phase_state(phase)
        assert any(
            e.source == state and e.dest == ERROR and e.trigger == "fail" for e in TRANSITIONS
        )
        assert any(
            e.source == ERROR and e.dest == state and e.trigger == "resume" for e in TRANSITIONS
        )


@pytest.mark.parametrize(
    ("table", "field", "expected"),
    [
        # drop every edge into 'closed': it becomes unreachable
        ([e for e in TRANSITIONS if e.dest != CLOSED], "unreachable", [CLOSED]),
        # drop error's way out: error becomes a trap
        ([e for e in TRANSITIONS if e.source != ERROR], "traps", [ERROR]),
        # drop fix's error edge
        (
            [e for e in TRANSITIONS if not (e.source == phase_state("fix") and e.dest == ERROR)],
            "phases_without_error_edge",
            [phase_state("fix")],
        ),
        ([*TRANSITIONS, Edge("oops", INITIAL, "limbo")], "unknown_states", ["limbo"]),
    ],
)
def test_structure_check_catches_broken_tables(
    table: list[Edge], field: str, expected: list[str]
) -> None:
    report = check_structure(table)
    assert getattr(report, field) == expected
    assert not report.ok
    with pytest.raises(ValueError, match=f"malformed.*{field}"):  # and no machine is built on it
        Lifecycle(tuple(table))


def _walk(facts: AttemptFacts, triggers: list[str], start: str = INITIAL) -> TicketModel:
    machine = lifecycle()
    model = TicketModel(facts, start)
    machine.attach(model)
    try:
        for trigger in triggers:
            machine.fire(model, trigger)
    finally:
        machine.detach(model)
    return model


def test_happy_path_and_skip() -> None:
    facts = AttemptFacts("pt-1", runs=frozenset(PHASES) - {"fix"}, gate_passed=True)
    model = _walk(
        facts, ["start", "complete", "complete", "complete", "skip", "complete", "complete"]
    )
    assert model.state == CLOSED
    assert [t for _, t, _ in model.path] == [
        "start",
        "complete",
        "complete",
        "complete",
        "skip",
        "complete",
        "complete",
    ]


def test_guards_refuse_and_name_themselves() -> None:
    facts = AttemptFacts("pt-1", retries_left=0)
    with pytest.raises(TransitionError) as info:
        _walk(facts, ["start"])
    assert info.value.refused_by == ("retries_left",)
    assert "refused by retries_left" in str(info.value)
    # a skip of a phase that runs is refused by its own guard
    with pytest.raises(TransitionError, match="skips_research"):
        _walk(AttemptFacts("pt-1"), ["start", "skip"])


def test_invalid_trigger_is_our_error_not_machine_error() -> None:
    with pytest.raises(TransitionError) as info:
        _walk(AttemptFacts("pt-1"), ["complete"])
    assert isinstance(info.value, TfFsmError)
    assert "not possible from state 'initial'" in str(info.value)
    with pytest.raises(TransitionError):
        _walk(AttemptFacts("pt-1"), ["no_such_trigger"])


def test_gate_decides_close() -> None:
    facts = AttemptFacts("pt-1", gate_passed=False)
    model = _walk(facts, ["start", *["complete"] * 6])
    assert model.state == BLOCKED
    facts.gate_passed = None
    with pytest.raises(TransitionError, match=r"gate_passed.*gate_failed"):
        _walk(facts, ["start", *["complete"] * 6])


def test_a_passed_ticket_in_a_workspace_merges_before_it_closes() -> None:
    facts = AttemptFacts("pt-1", gate_passed=True, merges=True)
    model = _walk(facts, ["start", *["complete"] * 6])
    assert model.state == MERGING
    with pytest.raises(TransitionError):  # no way around the merge to closed
        _walk(facts, ["start", *["complete"] * 7])
    assert _walk(facts, ["start", *["complete"] * 6, "merged"]).state == CLOSED
    assert _walk(facts, ["start", *["complete"] * 6, "fail"]).state == ERROR
    facts.merges = False
    assert _walk(facts, ["start", *["complete"] * 6]).state == CLOSED


def test_a_passed_ticket_whose_merge_waits_closes_only_through_its_merge() -> None:
    """ralph.parallelAutoMerge off: the passed attempt waits in awaiting_merge, and its only
    way on is `tf-fsm merge` (the `merge` trigger) into merging."""
    facts = AttemptFacts("pt-1", gate_passed=True, held=True)
    model = _walk(facts, ["start", *["complete"] * 6])
    assert model.state == AWAITING_MERGE
    for trigger in ("complete", "merged", "fail", "resume"):
        with pytest.raises(TransitionError):
            _walk(facts, ["start", *["complete"] * 6, trigger])
    merged = _walk(facts, ["start", *["complete"] * 6, "merge", "merged"])
    assert merged.state == CLOSED
    assert [step[1] for step in merged.path[-2:]] == ["merge", "merged"]


def test_resume_returns_to_failed_phase() -> None:
    facts = AttemptFacts("pt-1", resume_phase="review")
    model = _walk(facts, ["resume"], start=ERROR)
    assert model.state == phase_state("review")


def test_one_machine_serves_many_tickets() -> None:
    machine = lifecycle()
    assert lifecycle() is machine
    models = [TicketModel(AttemptFacts(f"t-{i}")) for i in range(50)]
    for m in models:
        machine.attach(m)
        machine.fire(m, "start")
    assert {m.state for m in models} == {phase_state("research")}
    for m in models:
        machine.detach(m)


def test_a_model_given_back_is_taken_again_as_new() -> None:
    machine = Lifecycle()
    first = machine.take(AttemptFacts("t-1", gate_passed=True), INITIAL)
    machine.fire(first, "start")
    machine.give_back(first)
    facts = AttemptFacts("t-2", runs=frozenset())
    again = machine.take(facts, BLOCKED)
    assert again is first  # reused: no second binding of the machine's triggers
    assert (again.facts, again.state, again.path) == (facts, BLOCKED, [])
    machine.fire(again, "retry")  # moves from the state it was given, with its new facts
    assert again.path == [(BLOCKED, "retry", phase_state("research"))]
    other = machine.take(AttemptFacts("t-3"), INITIAL)  # none idle: a new one
    assert other is not again
    with pytest.raises(ValueError, match="unknown lifecycle state"):
        machine.take(AttemptFacts("t-4"), "nowhere")


@pytest.mark.parametrize(
    ("status", "phase", "state"),
    [
        (None, None, INITIAL),
        ("in_progress", "fix", phase_state("fix")),
        ("in_progress", None, phase_state("research")),
        ("blocked", "close", BLOCKED),
        ("closed", "close", CLOSED),
        ("error", "review", ERROR),
    ],
)
def test_state_of_attempt(status: str | None, phase: str | None, state: str) -> None:
    assert state_of_attempt(status, phase) == state


def test_guard_functions_are_named() -> None:
    names = {g.__name__ for e in TRANSITIONS for g in e.guards}
    assert {
        "retries_left",
        "gate_passed",
        "gate_failed",
        "runs_fix",
        "skips_fix",
        "resumes_at_close",
    } <= names
    assert retries_left(AttemptFacts("x", retries_left=1))


class LifecycleRules(RuleBasedStateMachine):
    """Random legal and illegal triggers: the machine never lands outside STATES, and a refused
    trigger never moves it."""

    def __init__(self) -> None:
        super().__init__()
        self.facts = AttemptFacts("pt-h")
        self.model = TicketModel(self.facts)
        lifecycle().attach(self.model)

    def teardown(self) -> None:
        lifecycle().detach(self.model)

    @rule(
        trigger=st.sampled_from(TRIGGERS),
        passed=st.sampled_from([True, False, None]),
        left=st.integers(0, 2),
        runs=st.sets(st.sampled_from(PHASES)),
        resume=st.sampled_from([None, *PHASES]),
    )
    def fire(
        self, trigger: str, passed: bool | None, left: int, runs: set[str], resume: str | None
    ) -> None:
        self.facts.gate_passed, self.facts.retries_left = passed, left
        self.facts.runs, self.facts.resume_phase = frozenset(runs), resume
        before = self.model.state
        try:
            after = lifecycle().fire(self.model, trigger)
        except TransitionError:
            assert self.model.state == before
            return
        if after == CLOSED:
            assert passed is True
        if trigger in ("start", "retry"):
            assert left > 0

    @precondition(lambda self: phase_of(self.model.state) is not None)
    @rule()
    def fail(self) -> None:
        assert lifecycle().fire(self.model, "fail") == ERROR

    @invariant()
    def known_state(self) -> None:
        assert self.model.state in STATES


TestLifecycleRules = LifecycleRules.TestCase
TestLifecycleRules.settings = hsettings(max_examples=60, stateful_step_count=30, deadline=None)
