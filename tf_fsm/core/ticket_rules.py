"""The answers about a ticket that its retry state and journal give, each decided here once:
its lifecycle state, its failure class, whether the budget stopped it, whether it waits for a
hand-off, whether a run goes straight on to the next attempt, whether tk calls it closed or
ready. `status`, the board, `watch`, the backlog loop and `run` ask these functions; each
words the answer for its own output. Pure: the journal and the state come in.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tf_fsm.core import journal as ev
from tf_fsm.core import workspace_events as wev
from tf_fsm.core.machine import AWAITING_MERGE, MERGING, state_of_attempt
from tf_fsm.core.resume import attempt_events as latest_attempt_events
from tf_fsm.core.resume import merge_held
from tf_fsm.core.state import Attempt, RetryState
from tf_fsm.settings.loaded import LoadedSettings

if TYPE_CHECKING:
    from tf_fsm.core.next_step import Step

#: the class of a blocked attempt's failure (its gate's verdict), and of a run the budget
#: refused (as tf_fsm.executors.failures names them)
QUALITY = "quality"
BUDGET = "budget"


def since_reset(events: Sequence[ev.Event]) -> Sequence[ev.Event]:
    """The journal since the last `--retry-reset` (the budget and the attempts count from it)."""
    resets = [i for i, e in enumerate(events) if isinstance(e, ev.RetryStateReset)]
    return events[resets[-1] + 1 :] if resets else events


def attempt_events(events: Sequence[ev.Event], number: int) -> Sequence[ev.Event]:
    """The events of the latest attempt numbered `number` (numbers restart after a close)."""
    return latest_attempt_events(since_reset(events), number)


def merge_under_way(events: Sequence[ev.Event], number: int) -> bool:
    """Did attempt `number`'s merge begin and not end: its last merge step a MergeStarted or
    a MergeRebased (a run killed in the merge queue, or one merging now)?"""
    steps = (wev.MergeStarted, wev.MergeRebased, wev.MergeCompleted, wev.MergeRefused)
    mine = [e for e in attempt_events(events, number) if isinstance(e, steps)]
    return bool(mine) and isinstance(mine[-1], wev.MergeStarted | wev.MergeRebased)


def lifecycle_state(cur: Attempt | None, phase: str | None, events: Sequence[ev.Event]) -> str:
    """The lifecycle state the ticket's current attempt stands in (derived, never stored):
    `merging` while its merge is under way (or was, when the run was killed in it),
    `awaiting_merge` when it passed and its merge waits for `tf-fsm merge`."""
    state = state_of_attempt(cur.status if cur else None, phase)
    if cur is None or cur.status != "in_progress":
        return state
    if merge_held(events, cur.attemptNumber):
        return AWAITING_MERGE
    return MERGING if merge_under_way(events, cur.attemptNumber) else state


def attempt_failure_class(events: Sequence[ev.Event], status: str) -> str | None:
    """The class of one attempt's ending (`events`: the attempt's), as its record keeps it:
    `quality` when its gate blocked it, the class of its last failed phase or refused merge
    when it ended in error, None otherwise."""
    if status == "blocked":
        return QUALITY
    if status != "error":
        return None
    failed = [e for e in events if isinstance(e, ev.PhaseFailed | wev.MergeRefused)]
    return failed[-1].failureClass if failed else None


def budget_stopped(events: Sequence[ev.Event]) -> bool:
    """Did a run journal the budget's refusal (BudgetExhausted) after the last attempt began
    or ended, since the last reset?"""
    recent = since_reset(events)
    bounds = (ev.AttemptStarted, ev.AttemptFinished)
    last_end = max((i for i, e in enumerate(recent) if isinstance(e, bounds)), default=-1)
    return any(isinstance(e, ev.BudgetExhausted) for e in recent[last_end + 1 :])


def failure_class(state: RetryState | None, events: Sequence[ev.Event]) -> str | None:
    """The class of the ticket's last failure: the last blocked or failed attempt's (a
    blocked one without a recorded class is `quality`), `budget` when a run journaled the
    budget's refusal since, None once the ticket is closed."""
    cur = state.current if state else None
    if cur is not None and cur.status == "closed":
        return None
    if budget_stopped(events):
        return BUDGET
    if state is None:
        return None
    failed = (a for a in reversed(state.attempts) if a.status in ("blocked", "error"))
    last = next(failed, None)
    if last is None:
        return None
    return last.failureClass or (QUALITY if last.status == "blocked" else None)


def last_failure(state: RetryState | None) -> str | None:
    """Why the last blocked or failed attempt ended (None once the ticket is closed)."""
    if state is None or (state.current is not None and state.current.status == "closed"):
        return None
    failed = (a.reason for a in reversed(state.attempts) if a.status in ("blocked", "error"))
    return next((reason for reason in failed if reason), None)


def waiting_for_handoff(cur: Attempt | None, events: Sequence[ev.Event]) -> ev.PhaseWaiting | None:
    """The hand-off the ticket's attempt waits for (its artifact is `output`): the attempt is
    in progress and the last thing it journaled is a PhaseWaiting. None otherwise."""
    if cur is None or cur.status != "in_progress":
        return None
    mine = attempt_events(events, cur.attemptNumber)
    last = mine[-1] if mine else None
    return last if isinstance(last, ev.PhaseWaiting) else None


def chains_attempts(settings: LoadedSettings, once: bool) -> bool:
    """Does a run follow a blocked attempt with the next one at all: escalation on and no
    `--once` (the backlog loop's workers run with `--once`: the loop requeues instead)?"""
    return settings.workflow.escalation.enabled and not once


def goes_straight_on(settings: LoadedSettings, once: bool, step: Step) -> bool:
    """Does a run whose attempt just blocked start the next one at once? When it chains
    attempts at all (`chains_attempts`) and the decision of what runs next (`step`, asked
    with the blocked attempt's state) starts a new attempt: no same-failure stop, retries
    left, the budget not refusing. The run that blocks journals this answer (TicketBlocked's
    `autoRetry`) and then acts on it."""
    return chains_attempts(settings, once) and step.action == "new_attempt"
