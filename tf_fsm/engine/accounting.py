"""Usage, cost and failure class per attempt and per ticket, read from the journal; the budget.

The journal is the record: every invocation's `InvocationFinished` carries what its CLI
reported, restarts and failed ones included (their tokens were spent too). Sums count from the
last `RetryStateReset`, so `--retry-reset` also starts a fresh budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tf_fsm.core import journal as ev
from tf_fsm.core.artifacts import invocations
from tf_fsm.core.state import Attempt, RetryState
from tf_fsm.core.ticket_rules import attempt_events, attempt_failure_class, since_reset
from tf_fsm.engine.api import Outcome
from tf_fsm.executors.failures import BUDGET
from tf_fsm.executors.usage import Usage
from tf_fsm.settings.load import LoadedSettings

if TYPE_CHECKING:
    from tf_fsm.engine.api import RunContext


def usage_of(events: Sequence[ev.Event]) -> Usage | None:
    """The summed usage of these events' invocations; None when no invocation reported any."""
    reported = [
        Usage.from_json(e.usage)
        for e in events
        if isinstance(e, ev.InvocationFinished) and e.usage is not None
    ]
    return sum(reported, Usage()) if reported else None


def ticket_usage(events: Sequence[ev.Event]) -> Usage | None:
    return usage_of(since_reset(events))


def replace_current(state: RetryState, attempt: Attempt) -> RetryState:
    return state.model_copy(update={"attempts": [*state.attempts[:-1], attempt]})


def with_accounting(run: RunContext, state: RetryState, status: str) -> RetryState:
    """The attempt's usage and failure class put into its record (optional fields), for the
    caller's one save of the finished attempt."""
    cur = state.current
    if cur is None:
        return state
    events = attempt_events(run.store.read_events().events, cur.attemptNumber)
    usage, cls = usage_of(events), attempt_failure_class(events, status)
    data = cur.to_json_dict()
    if usage is not None:
        data["usage"] = usage.to_json()
    if cls is not None:
        data["failureClass"] = cls
    else:
        data.pop("failureClass", None)  # a resumed attempt that then closed failed no more
    if data == cur.to_json_dict():
        return state
    # Rebuilt, not copied, so that a cleared failureClass is absent rather than null.
    return replace_current(state, Attempt.model_validate(data))


def budget_reason(spent: float, budget: float) -> str:
    return (
        f"budget: ${spent:.4f} of ${budget:.4f} spent (workflow.escalation.maxCostUsd); no "
        "further attempt or escalation; raise the budget, or --retry-reset starts a fresh one"
    )


def forecast(run: RunContext, state: RetryState | None) -> float:
    """The most the next attempt can cost, when the executor knows its prices (an optional
    `estimate_cost(phase, role, model)`; the simulation's agent has one, agent CLIs do not):
    every invocation it may make, the fix included. 0.0 when any price is unknown."""
    estimate = getattr(run.executor, "estimate_cost", None)
    if estimate is None:
        return 0.0
    attempt = run.new_attempt_context(state, "quality_gate")
    wf = run.settings.workflow
    total = 0.0
    runs = invocations(
        attempt.facts.runs, wf.enableReviewers, wf.enableCloser, rereview=wf.rereviews
    )
    for phase, role, _ in runs:
        price = estimate(phase, role, attempt.resolution.roles[role].model)
        if price is None:
            return 0.0
        total += float(price)
    return total


@dataclass(frozen=True)
class BudgetCheck:
    """The ticket's budget before a new attempt: spent so far, the most the next attempt may
    cost (0.0: unknown), and why it may not start (None: it may)."""

    spent: float
    budget: float
    need: float
    refusal: str | None


def budget_verdict(
    settings: LoadedSettings,
    state: RetryState | None,
    events: Sequence[ev.Event],
    need: float,
) -> BudgetCheck | None:
    """The budget rule, on the journal (`events`, counted from the last `RetryStateReset`) and
    the most the next attempt may cost (`need`; 0.0: unknown). None when no budget is set.
    Refuses when the ticket's budget is spent, or when `need` could overrun it."""
    budget = settings.workflow.escalation.maxCostUsd
    if budget is None:
        return None
    spent = (ticket_usage(events) or Usage()).cost_usd
    refusal = None
    if state is None and need == 0.0:
        pass  # nothing has run since the last reset, and no price is known
    elif spent >= budget:
        refusal = budget_reason(spent, budget)
    elif spent + need > budget:
        refusal = (
            f"budget: ${spent:.4f} of ${budget:.4f} spent and the next attempt may cost up to "
            f"${need:.4f} (the executor's prices; workflow.escalation.maxCostUsd); no further "
            "attempt or escalation; raise the budget, or --retry-reset starts a fresh one"
        )
    return BudgetCheck(spent, budget, need, refusal)


def unpriced_refusal(
    settings: LoadedSettings, state: RetryState | None, events: Callable[[], Sequence[ev.Event]]
) -> str | None:
    """The budget's refusal of a new attempt for a caller with no executor to price it
    (`status`, the backlog loop): what `run` decides with an agent CLI, whose prices are
    unknown. The journal is read only when a budget is set."""
    if settings.workflow.escalation.maxCostUsd is None:
        return None
    check = budget_verdict(settings, state, events(), 0.0)
    return check.refusal if check is not None else None


def budget_check(
    run: RunContext, state: RetryState | None, events: Sequence[ev.Event] | None = None
) -> BudgetCheck | None:
    """`budget_verdict` with the executor's forecast, on the ticket's journal (or `events`,
    as a plan sees it). Journals nothing: a blocked attempt asks it to say truthfully whether
    a retry follows."""
    if run.settings.workflow.escalation.maxCostUsd is None:
        return None
    need = forecast(run, state)
    seen = run.store.read_events().events if events is None else events
    return budget_verdict(run.settings, state, seen, need)


class BudgetProbe:
    """The budget's answer before a new attempt, for the decision of what runs next
    (tf_fsm.core.next_step), which asks only when a new attempt would start; the check is
    kept (`check`) for the caller's report."""

    def __init__(
        self, run: RunContext, state: RetryState | None, events: Sequence[ev.Event] | None
    ) -> None:
        self.run, self.state, self.events = run, state, events
        self.check: BudgetCheck | None = None

    def __call__(self) -> str | None:
        self.check = budget_check(self.run, self.state, self.events)
        return self.check.refusal if self.check is not None else None


def refused_by_budget(run: RunContext, state: RetryState | None, check: BudgetCheck) -> Outcome:
    """The outcome of a run the budget refused (`check`) before an attempt started or
    escalated, journaled once per refusal."""
    reason = check.refusal or ""
    cur = state.current if state else None
    run.event(
        ev.BudgetExhausted,
        cur.attemptNumber if cur else None,
        spentUsd=round(check.spent, 6),
        maxCostUsd=check.budget,
        reason=reason,
    )
    if state is None:
        return Outcome(run.ticket_id, "exhausted", 0, 0, 0, run.settings.max_retries, reason)
    return run.outcome(state, "exhausted", 0, reason)


__all__ = [
    "BUDGET",
    "BudgetCheck",
    "BudgetProbe",
    "budget_check",
    "budget_reason",
    "budget_verdict",
    "forecast",
    "refused_by_budget",
    "ticket_usage",
    "unpriced_refusal",
    "usage_of",
    "with_accounting",
]
