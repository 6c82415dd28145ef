"""The ticket read model: one typed answer to "where does this ticket stand", built once from
what its store gives, for every reader (`status` and `status --json`, `run --plan`, the board,
`watch`, the backlog loop; `run` builds the decision's facts with the same `decision_facts`).

`read_ticket` reads the retry state and the journal once (a journal line that cannot be
trusted leaves the journal out, except where `run` would stop on it: an open attempt's
resume), and asks each question of its one function (tf_fsm.core.ticket_rules,
tf_fsm.core.next_step). Pure: the store, the tk file, the budget's refusal, the usage sums and
the one look at the disk (the worktree) come in.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from tf_fsm.core import journal as ev
from tf_fsm.core.escalation import retries_left
from tf_fsm.core.journal_codec import JournalRead
from tf_fsm.core.next_step import Facts, Refusal, Step, TkFile, next_step
from tf_fsm.core.resume import Seen, gate_decided, live_phase
from tf_fsm.core.state import RetryState
from tf_fsm.core.ticket_rules import (
    failure_class,
    last_failure,
    lifecycle_state,
    waiting_for_handoff,
)
from tf_fsm.core.ticket_workspace import workspace_of
from tf_fsm.errors import CorruptStateError
from tf_fsm.settings.loaded import LoadedSettings


class TicketSource(Protocol):
    """What the read model reads of a ticket's store (tf_fsm.storage.store.TicketStore is
    one): its retry state, its journal, its artifacts, its lock."""

    @property
    def ticket_id(self) -> str: ...

    def load_retry_state(self) -> RetryState | None: ...

    def read_events(self) -> JournalRead: ...

    def seen(self, name: str) -> Seen | None: ...

    def read_artifact(self, name: str) -> str | None: ...

    def lock_holder(self) -> int | None:
        """None: nobody holds the ticket's lock; else the holder's pid (-1: unknown)."""


class Spend(Protocol):
    """Summed usage (tf_fsm.executors.usage.Usage is one)."""

    @property
    def cost_usd(self) -> float: ...

    def to_json(self) -> dict[str, Any]: ...


#: the budget's refusal of a new attempt, given the state and the journal (None: it may start)
BudgetRefusal = Callable[[RetryState | None, Callable[[], Sequence[ev.Event]]], str | None]


@dataclass(frozen=True)
class Reads:
    """What the read model cannot read itself: the tk file as `run` reads it, the budget's
    refusal, the usage of the journal's invocations, whether a directory exists, and the
    trigger a retry the reader starts is recorded with."""

    tk_file: Callable[[], TkFile]
    budget_refusal: BudgetRefusal
    usage: Callable[[Sequence[ev.Event]], Spend | None]
    exists: Callable[[str], bool]
    retry_trigger: str = "manual_retry"


@dataclass(frozen=True)
class Budget:
    """The ticket's spend since the last reset: `spent` None when no invocation reported a
    cost, `limit` and `left` None without `workflow.escalation.maxCostUsd`."""

    spent: float | None
    limit: float | None
    left: float | None
    usage: dict[str, Any] | None


@dataclass(frozen=True)
class Handoff:
    """The hand-off the current attempt waits for: the artifact (`output`) and its prompt."""

    phase: str
    output: str
    prompt: str


@dataclass(frozen=True)
class TicketView:
    """Where a ticket stands, as every reader sees it."""

    ticket_id: str
    state: str  # the lifecycle state word (tf_fsm.core.ticket_rules.lifecycle_state)
    status: str | None  # retry-state.json's status; None: the ticket never ran
    phase: str | None
    attempt: int | None
    trigger: str | None
    retry_count: int
    max_retries: int
    retries_left: int
    budget: Budget
    escalated_roles: tuple[str, ...]
    tier: int | None
    failure_class: str | None
    last_failure: str | None
    failure_signature: str | None
    #: the short-circuit's decision after the last attempt, when it repeated the one before
    same_failure: dict[str, Any] | None
    stop_reason: str | None
    workspace: dict[str, Any] | None
    step: Step  # what `run` does next (tf_fsm.core.next_step)
    lock_holder: int | None  # None: unlocked; else the holder's pid (-1: unknown)
    handoff: Handoff | None
    retry_state: RetryState | None = field(repr=False, default=None)

    @property
    def skip(self) -> bool:
        """Does `run` do nothing at all with it (the loop skips it, status says `nothing`)?"""
        return self.step.refused

    @property
    def skip_reason(self) -> str | None:
        return self.step.reason if self.step.refused else None

    @property
    def refusal(self) -> Refusal | None:
        """Why `run` refuses a new attempt (same failure, retries, budget), if it does."""
        return self.step.refusal

    @property
    def waiting(self) -> bool:
        """Does the current attempt wait for a hand-off artifact?"""
        return self.handoff is not None


def decision_facts(
    source: TicketSource,
    settings: LoadedSettings,
    state: RetryState | None,
    *,
    tk_file: Callable[[], TkFile],
    journal: Callable[[], Sequence[ev.Event]],
    budget_refusal: Callable[[], str | None],
    retry_trigger: str = "manual_retry",
    merge_requested: bool = False,
    hold_merge: bool = False,
) -> Facts:
    """What the decision of what runs next looks at, from a ticket's store: `run`, `run
    --plan`, `status`, the board and the loop build it here."""
    return Facts(
        source.ticket_id,
        state,
        settings,
        tk_file=tk_file,
        journal=journal,
        look=source.seen,
        gate_decided=lambda: gate_decided(source),
        budget_refusal=budget_refusal,
        retry_trigger=retry_trigger,
        merge_requested=merge_requested,
        hold_merge=hold_merge,
    )


def read_ticket(source: TicketSource, settings: LoadedSettings, reads: Reads) -> TicketView:
    """The ticket's read model. CorruptStateError for a retry state that cannot be trusted,
    and for a bad journal line when an open attempt would resume from it (as `run` stops)."""
    state = source.load_retry_state()
    cur = state.current if state else None
    try:
        events: Sequence[ev.Event] = source.read_events().events
        bad: CorruptStateError | None = None
    except CorruptStateError as exc:  # a report goes on; `run` names the line
        events, bad = [], exc

    def journal() -> Sequence[ev.Event]:
        if bad is not None and state is not None and state.has_open_attempt:
            raise bad
        return events

    facts = decision_facts(
        source,
        settings,
        state,
        tk_file=reads.tk_file,
        journal=journal,
        budget_refusal=lambda: reads.budget_refusal(state, journal),
        retry_trigger=reads.retry_trigger,
    )
    step = next_step(facts)
    phase = live_phase(cur.attemptNumber, cur.status, cur.phase, events) if cur else None
    waiting = waiting_for_handoff(cur, events)
    number = cur.attemptNumber if cur else None
    return TicketView(
        ticket_id=source.ticket_id,
        state=lifecycle_state(cur, phase, events),
        status=state.status if state else None,
        phase=phase,
        attempt=number,
        trigger=cur.trigger if cur else None,
        retry_count=state.retryCount if state else 0,
        max_retries=settings.max_retries,
        retries_left=retries_left(state, settings),
        budget=_budget(settings, reads.usage(events)),
        escalated_roles=tuple(cur.escalation.escalated_roles() if cur and cur.escalation else ()),
        tier=cur.tier if cur else None,
        failure_class=failure_class(state, events),
        last_failure=last_failure(state),
        failure_signature=cur.failureSignature if cur else None,
        same_failure=(
            {**cur.sameFailure, "attempt": cur.attemptNumber} if cur and cur.sameFailure else None
        ),
        stop_reason=state.stopReason if state else None,
        workspace=workspace_of(events, number, reads.exists),
        step=step,
        lock_holder=source.lock_holder(),
        handoff=Handoff(waiting.phase, waiting.output, waiting.promptFile) if waiting else None,
        retry_state=state,
    )


def _budget(settings: LoadedSettings, usage: Spend | None) -> Budget:
    limit = settings.workflow.escalation.maxCostUsd
    spent = usage.cost_usd if usage else 0.0
    return Budget(
        spent=round(spent, 6) if usage else None,
        limit=limit,
        left=None if limit is None else round(max(0.0, limit - spent), 6),
        usage=usage.to_json() if usage else None,
    )
