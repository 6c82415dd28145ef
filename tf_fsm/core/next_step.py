"""What `tf-fsm run` does next for a ticket: the one decision `run`, `run --plan`, `status`
and the backlog loop ask (each words it for its own output).

In order: a closed attempt is left alone (or only its tk file's close is repaired, or the
worktree and branch a killed run left after its merge are removed, or, when a person reopened
the tk ticket, a new series starts); an open attempt (in progress or in error) is resumed at
its first incomplete phase (tf_fsm.core.resume), unless it passed its gate and its merge waits
for `tf-fsm merge` (`ralph.parallelAutoMerge` off, or `run --hold-merge`); otherwise a new
attempt starts unless `run` refuses it (the same failure stopped the ticket, `maxRetries` is
0, the retries are spent, the budget is spent). `tf-fsm merge` asks the same question with
`merge_requested`: only a passed attempt's merge may run then, never a phase or a new
attempt. Pure: what costs a read (the tk file, the journal, the artifacts, the budget) comes
in as a callback and is asked only when the decision needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from tf_fsm.core import journal as ev
from tf_fsm.core.escalation import NO_ATTEMPT_ALLOWED, retries_left, stopped
from tf_fsm.core.resume import Look, ResumePoint, merge_began, merge_held, resume_point
from tf_fsm.core.state import Attempt, RetryState
from tf_fsm.core.workspace_events import MergeCompleted, WorkspaceRemoved
from tf_fsm.settings.loaded import LoadedSettings

#: already_closed: nothing to do; close_tk: only the tk file's close is missing;
#: remove_workspace: only the removal of a merged ticket's worktree and branch is missing;
#: awaiting_merge: passed, its merge waits for `tf-fsm merge`; exhausted: `run` refuses
#: (exit 4); nothing_to_merge: `tf-fsm merge` finds no merge to run (exit 2)
Action = Literal[
    "already_closed",
    "close_tk",
    "remove_workspace",
    "resume",
    "awaiting_merge",
    "exhausted",
    "new_attempt",
    "nothing_to_merge",
]
#: the actions for which `run` does nothing at all
REFUSED: frozenset[str] = frozenset(
    {"already_closed", "exhausted", "awaiting_merge", "nothing_to_merge"}
)
#: why `run` refuses a new attempt
Refusal = Literal["same_failure", "no_attempt_allowed", "retries_exhausted", "budget"]

FIRST_ATTEMPT = "first attempt"
CLOSED = "closed (a reopened tk ticket starts again at attempt 1)"
SAME_FAILURE = "same-failure"


class TkFile(Protocol):
    """The tk ticket file as `run` reads it (tf_fsm.tk.tickets.Ticket is one)."""

    @property
    def status(self) -> str: ...

    @property
    def body(self) -> str: ...


@dataclass(frozen=True)
class Facts:
    """What the decision looks at. A ticket as `run --retry-reset` would leave it has no
    state, and its journal ends with the `RetryStateReset` (the budget counts from it)."""

    ticket_id: str
    state: RetryState | None
    settings: LoadedSettings
    tk_file: Callable[[], TkFile]
    journal: Callable[[], Sequence[ev.Event]]
    look: Look  # the ticket's artifacts as they are on disk, for a resume
    gate_decided: Callable[[], bool]  # post-fix-verification.json holds a verdict
    #: the budget's refusal of a new attempt (tf_fsm.engine.accounting), None: it may start
    budget_refusal: Callable[[], str | None]
    retry_trigger: str = "manual_retry"  # how a retry the caller starts is recorded
    merge_requested: bool = False  # `tf-fsm merge`: only a passed attempt's merge may run
    hold_merge: bool = False  # `run --hold-merge`: a passed attempt's merge waits


@dataclass(frozen=True)
class Step:
    """What runs next: the attempt it runs (for `close_tk`, the closed one), with which
    trigger, where a resume picks up, why `run` refuses (`refusal`), and one reason."""

    action: Action
    reason: str
    attempt: int | None = None
    trigger: str | None = None
    resume: ResumePoint | None = None
    refusal: Refusal | None = None

    @property
    def refused(self) -> bool:
        """Does `run` do nothing at all (what status words as `nothing:`, the loop skips)?"""
        return self.action in REFUSED


def close_note(number: int, started: str) -> str:
    """The start of the note `run` adds to the tk ticket when attempt `number` closes it. It
    names the attempt, so a ticket a person reopened later is told apart from one whose
    close never reached the tk file."""
    return f"tf-fsm: closed attempt {number} (started {started})"


def same_failure_pair(state: RetryState) -> str:
    cur = state.current
    info = (cur.sameFailure if cur else None) or {}
    number = cur.attemptNumber if cur else "?"
    signature = cur.failureSignature if cur else "?"
    return (
        f"attempts {info.get('previousAttempt', '?')} and {number} failed the same way "
        f"(signature {signature})"
    )


def stop_reason(state: RetryState, ticket_id: str) -> str:
    """Why no attempt follows a same-failure stop."""
    return (
        f"{SAME_FAILURE}: {same_failure_pair(state)}; needs a human; "
        f"`tf-fsm run {ticket_id} --retry-reset` starts over"
    )


def retries_spent(state: RetryState, max_retries: int, ticket_id: str) -> str:
    """Why no attempt follows once the blocked attempts since the last close reach the cap."""
    return (
        f"max retries ({max_retries}) exceeded: blocked after {state.retryCount} attempts; "
        f"`tf-fsm run {ticket_id} --retry-reset` starts over"
    )


def held_by(hold: bool) -> str:
    """What holds a passed attempt's merge for `tf-fsm merge` (`hold`: `run --hold-merge`)."""
    return "--hold-merge" if hold else "ralph.parallelAutoMerge is false"


def awaiting_reason(ticket_id: str, hold: bool = False) -> str:
    """Why `run` does nothing with a passed attempt whose merge waits."""
    return (
        f"passed, waiting for `tf-fsm merge {ticket_id}` ({held_by(hold)}): "
        "not closed in tk until it is merged"
    )


def workspace_left_reason(ticket_id: str) -> str:
    """Why `run` only removes a closed ticket's worktree and branch."""
    return (
        "merged and closed; a run killed before removing its worktree and branch left them: "
        f"`tf-fsm run {ticket_id}` removes them"
    )


def merges_now(
    settings: LoadedSettings, *, requested: bool, began: bool, hold: bool = False
) -> bool:
    """Does a passed attempt in a workspace merge as soon as its gate passes? Yes with
    `ralph.parallelAutoMerge` on, unless the run holds it (`hold`: `run --hold-merge`, which
    is the setting off for that run); else only when `tf-fsm merge` asks (`requested`), or
    once its merge began (`began`: a `tf-fsm merge` refused or cut short is finished by `run`
    too); otherwise it waits in `awaiting_merge`."""
    auto = settings.settings.ralph.parallelAutoMerge and not hold
    return auto or requested or began


def close_tk_reason(number: int) -> str:
    """Why `run` only closes the tk file: the close of attempt `number` never reached it."""
    return (
        f"the retry state records the close of attempt {number}; the tk ticket is closed to match"
    )


def auto_retry_due(events: Sequence[ev.Event], number: int) -> bool:
    """Did the run that blocked attempt `number` mean to start the next one at once (and was
    killed before it did)? Then the next attempt keeps the trigger quality_gate."""
    blocked = [e for e in events if isinstance(e, ev.TicketBlocked) and e.attempt == number]
    return bool(blocked) and blocked[-1].autoRetry


def next_step(facts: Facts) -> Step:
    """What `run` does next with the ticket these facts describe (see the module's order)."""
    state = facts.state
    cur = state.current if state else None
    step = _after(facts, state, cur)
    if facts.merge_requested and not _merges(facts, step):
        return _nothing_to_merge(facts, step)
    return step


def _after(facts: Facts, state: RetryState | None, cur: Attempt | None) -> Step:
    if state is not None and cur is not None:
        if cur.status == "closed":
            after = _after_close(facts, cur)
            if after is not None:
                return after
        elif state.has_open_attempt:
            return _open(facts, cur)
    refused = _refusal(facts, state)
    if refused is not None:
        return refused
    trigger = _trigger(facts, state)
    why = FIRST_ATTEMPT if trigger == "initial" else f"retry after a blocked attempt ({trigger})"
    return Step("new_attempt", why, state.next_attempt_number if state else 1, trigger)


def _open(facts: Facts, cur: Attempt) -> Step:
    """The attempt in progress or in error: resumed, unless it passed and its merge waits."""
    number, events = cur.attemptNumber, facts.journal()
    point = resume_point(number, events, facts.look, facts.gate_decided())
    waits = point.finished and merge_held(events, number)
    hold = facts.hold_merge
    merges = merges_now(facts.settings, requested=facts.merge_requested, began=False, hold=hold)
    if waits and not merges:
        return Step("awaiting_merge", awaiting_reason(facts.ticket_id, hold), number)
    return Step("resume", point.reason, number, cur.trigger, point)


def _merges(facts: Facts, step: Step) -> bool:
    """For `tf-fsm merge`: does `step` run a passed attempt's merge and nothing else (its
    phases all complete, its merge waiting, begun or cut short)?"""
    if step.action != "resume" or step.resume is None or not step.resume.finished:
        return False
    number, events = step.attempt or 0, facts.journal()
    return merge_held(events, number) or merge_began(events, number)


def _nothing_to_merge(facts: Facts, step: Step) -> Step:
    return Step(
        "nothing_to_merge",
        f"nothing to merge: no attempt of {facts.ticket_id} passed its gate and waits for its "
        f"merge; `tf-fsm run {facts.ticket_id}` would do: {step.reason}",
        step.attempt,
    )


def _workspace_left(facts: Facts) -> bool:
    """Did a merge leave the ticket's worktree and branch, not removed since (a run killed
    between its merge and their removal), where the settings have them removed?"""
    if facts.settings.settings.ralph.parallelKeepWorktrees:
        return False
    left = False
    for event in facts.journal():
        if isinstance(event, MergeCompleted | WorkspaceRemoved):
            left = isinstance(event, MergeCompleted)
    return left


def _after_close(facts: Facts, cur: Attempt) -> Step | None:
    """The state's last attempt closed: None when a person reopened the tk ticket since (a
    new series starts at attempt 1)."""
    tk = facts.tk_file()
    if tk.status == "closed":
        if _workspace_left(facts):
            return Step(
                "remove_workspace", workspace_left_reason(facts.ticket_id), cur.attemptNumber
            )
        return Step("already_closed", CLOSED, cur.attemptNumber)
    if close_note(cur.attemptNumber, cur.startedAt) not in tk.body:
        # The run that closed the attempt died before it closed the tk ticket.
        return Step("close_tk", close_tk_reason(cur.attemptNumber), cur.attemptNumber)
    return None


def _refusal(facts: Facts, state: RetryState | None) -> Step | None:
    def refuse(refusal: Refusal, reason: str) -> Step:
        return Step("exhausted", reason, refusal=refusal)

    max_retries = facts.settings.max_retries
    if state is not None and stopped(state):
        return refuse("same_failure", stop_reason(state, facts.ticket_id))
    if max_retries == 0:
        return refuse("no_attempt_allowed", NO_ATTEMPT_ALLOWED)
    if state is not None and retries_left(state, facts.settings) == 0:
        return refuse("retries_exhausted", retries_spent(state, max_retries, facts.ticket_id))
    if (why := facts.budget_refusal()) is not None:
        return refuse("budget", why)
    return None


def _trigger(facts: Facts, state: RetryState | None) -> str:
    cur = state.current if state else None
    if cur is None or cur.status == "closed":
        return "initial"
    if cur.status == "blocked" and auto_retry_due(facts.journal(), cur.attemptNumber):
        return "quality_gate"  # the crashed run was about to start it itself
    return facts.retry_trigger
