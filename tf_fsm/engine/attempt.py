"""One attempt through the lifecycle machine: its phases in order, then how it ends (closed,
blocked, error, or waiting for a hand-off), with the retry state saved at the end.

TicketRun (tf_fsm.engine.orchestrator) decides which attempt runs and whether another follows; this
module runs the one it is given.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from tf_fsm.core import journal as ev
from tf_fsm.core.machine import (
    AWAITING_MERGE,
    BLOCKED,
    INITIAL,
    MERGE_PHASE,
    MERGING,
    lifecycle,
    phase_of,
    state_of_attempt,
)
from tf_fsm.core.next_step import Step, awaiting_reason, next_step
from tf_fsm.core.resume import merge_held
from tf_fsm.core.state import RetryState, finish_attempt, update_current
from tf_fsm.core.ticket import decision_facts
from tf_fsm.core.ticket_rules import goes_straight_on
from tf_fsm.engine import same_failure
from tf_fsm.engine.accounting import budget_check, with_accounting
from tf_fsm.engine.context import AttemptContext, prior_failure
from tf_fsm.engine.invocation import WAITING
from tf_fsm.engine.phases import PhaseRunner

if TYPE_CHECKING:
    from tf_fsm.engine.api import OutcomeStatus, RunContext


def run_attempt(
    run: RunContext, attempt: AttemptContext, state: RetryState
) -> tuple[RetryState, OutcomeStatus, str]:
    if state.current is None:
        raise ValueError("no attempt to run")
    machine, start_state = lifecycle(), _start_state(run, attempt, state)
    model = machine.take(attempt.facts, start_state)
    try:
        trigger = {INITIAL: "start", BLOCKED: "retry", "error": "resume"}.get(start_state)
        if trigger is not None:
            machine.fire(model, trigger)
        runner = PhaseRunner(run, attempt, state.retryCount)
        if phase_of(start_state) == "close" or attempt.facts.resume_phase == "close":
            runner.restore_gate()
        while (phase := phase_of(model.state)) is not None:
            if phase == "close" and attempt.finished:
                machine.fire(model, "complete")  # close completed before the crash
                continue
            if phase not in attempt.facts.runs:
                run.event(
                    ev.PhaseSkipped,
                    attempt.number,
                    flush=False,
                    phase=phase,
                    reason=attempt.plan[phase][1],
                )
                machine.fire(model, "skip")
                continue
            if _pause_due(run):
                return _paused(run, attempt, state, phase)
            failure = _run_phase(run, runner, state, phase)
            if failure is None:
                run.phases_run.append((attempt.number, phase))
            if failure == WAITING and runner.waiting:
                # Not an error: the attempt stays in progress at this phase.
                waiting = with_accounting(run, update_current(state, phase=phase), "waiting")
                return run.save(waiting), "waiting", runner.waiting
            if failure is not None:
                machine.fire(model, "fail")
                return _failed(run, attempt, state, phase, failure), "error", failure
            machine.fire(model, "complete")
        if model.state == AWAITING_MERGE and attempt.facts.held:  # not closed until merged
            run.hold_merge(attempt)
            held = with_accounting(run, update_current(state, phase=MERGE_PHASE), "awaiting")
            reason = awaiting_reason(run.ticket_id, run.options.hold_merge)
            return run.save(held), "awaiting_merge", reason
        if model.state == AWAITING_MERGE:  # `tf-fsm merge` takes it on
            machine.fire(model, "merge")
        if model.state == MERGING:
            refused = run.merge(attempt, runner.gate_reason)
            if refused is not None and refused.rerun:  # blocked: the next attempt starts over
                attempt.facts.gate_passed, runner.gate_reason = False, refused.reason
                machine.fire(model, "rerun")
                return _finish(run, attempt, state, runner)
            if refused is not None:
                machine.fire(model, "fail")
                failure = refused.reason
                return _failed(run, attempt, state, MERGE_PHASE, failure), "error", failure
            machine.fire(model, "merged")
        return _finish(run, attempt, state, runner)
    finally:
        machine.give_back(model)


def _start_state(run: RunContext, attempt: AttemptContext, state: RetryState) -> str:
    """Where the machine starts: where a resumed attempt stood (`awaiting_merge` when its
    merge waited), else `initial` or, after a blocked attempt, `blocked` (its `retry` edge)."""
    if attempt.resumed_from is not None:
        if attempt.finished and merge_held(run.store.read_events().events, attempt.number):
            return AWAITING_MERGE
        return state_of_attempt(attempt.resumed_from, attempt.facts.resume_phase)
    previous = state.attempts[-2] if len(state.attempts) > 1 else None
    return BLOCKED if previous is not None and previous.status == "blocked" else INITIAL


def _run_phase(run: RunContext, runner: PhaseRunner, state: RetryState, phase: str) -> str | None:
    try:
        return runner.run(phase)
    except KeyboardInterrupt:
        # Where it stopped, for people reading retry-state.json; a resume goes by the journal
        # and the artifacts, so a SIGKILL (no chance to save) is fine.
        run.save(update_current(state, phase=phase))
        raise


def _pause_due(run: RunContext) -> bool:
    """`run --phases N`: have N phases completed in this run, so that it pauses before the
    next one (skipped phases do not count; once every phase is done nothing pauses)?"""
    bound = run.options.phases
    return bound is not None and len(run.phases_run) >= bound


def _paused(
    run: RunContext, attempt: AttemptContext, state: RetryState, phase: str
) -> tuple[RetryState, OutcomeStatus, str]:
    """The run stops before `phase`: the attempt stays in progress, its state saved as a
    Ctrl-C there leaves it, and the next run resumes it at `phase` (tf_fsm.core.resume)."""
    done_in, done = run.phases_run[-1]
    last = done if done_in == attempt.number else f"{done} of attempt {done_in}"
    reason = (
        f"paused after {len(run.phases_run)} phase(s) (--phases): {last} completed; "
        f"{phase} of attempt {attempt.number} runs next (`tf-fsm run {run.ticket_id}`)"
    )
    return run.save(update_current(state, phase=phase)), "paused", reason


def _failed(
    run: RunContext, attempt: AttemptContext, state: RetryState, phase: str, failure: str
) -> RetryState:
    """The attempt ends in error at `phase`: journaled, then the state's image saved."""
    ended = finish_attempt(
        update_current(state, phase=phase),
        status="error",
        counts=None,
        max_retries=run.settings.max_retries,
        now=run.now(),
        reason=failure,
    )
    run.event(
        ev.AttemptFinished,
        attempt.number,
        flush=False,
        status="error",
        counts=None,
        reason=failure,
    )
    return run.save(with_accounting(run, ended, "error"))


def _finish(
    run: RunContext, attempt: AttemptContext, state: RetryState, runner: PhaseRunner
) -> tuple[RetryState, OutcomeStatus, str]:
    closed = attempt.facts.gate_passed is True
    status: Literal["closed", "blocked"] = "closed" if closed else "blocked"
    before = state.retryCount
    ended = finish_attempt(
        update_current(state, phase="close"),
        status=status,
        counts=runner.post_counts,
        max_retries=run.settings.max_retries,
        now=run.now(),
        reason=runner.gate_reason,
    )
    if not closed:  # the failure signature, and the same-failure short-circuit
        ended = same_failure.after_blocked(run, ended, runner.gate_rows, runner.post_counts)
    # The ending's events, then the state's image: a journal cut anywhere in between is
    # finished by the next run, which journals only what is missing (_journal_once).
    # An ended attempt is never resumed, so nothing could re-make its files after a power
    # cut: they are made durable before the journal says it ended. A closed attempt's reports
    # are the ticket's record; a blocked one's implementation.md (and research.md) are what
    # the next attempts build on (they skip those phases), its prompts and logs its record.
    run.store.durable_point()
    if closed:
        _journal_once(run, attempt, ev.TicketClosed, retryCountBefore=before)
    else:
        auto = goes_straight_on(run.settings, run.options.once, _after_blocked(run, ended))
        summary = prior_failure(
            ended, run.store.read_artifact, list(run.settings.workflow.failOn), run.store.redactor
        )
        _journal_once(
            run,
            attempt,
            ev.TicketBlocked,
            reason=runner.gate_reason,
            retryCount=ended.retryCount,
            maxRetries=run.settings.max_retries,
            autoRetry=auto,
            priorFailure=summary,
        )
    _journal_once(
        run,
        attempt,
        ev.AttemptFinished,
        status=status,
        counts=runner.post_counts,
        reason=runner.gate_reason,
    )
    state = run.save(with_accounting(run, ended, status))
    if closed:  # tk is told last (edit_ticket makes the journal durable first)
        run.close_tk(attempt.number, ended.attempts[-1].startedAt, runner.gate_reason)
    return state, status, runner.gate_reason


def _after_blocked(run: RunContext, ended: RetryState) -> Step:
    """What runs after the attempt that just blocked (its ending not journaled yet)."""
    facts = decision_facts(
        run.store,
        run.settings,
        ended,
        tk_file=lambda: run.ticket,
        journal=lambda: run.store.read_events().events,
        budget_refusal=lambda: getattr(budget_check(run, ended), "refusal", None),
        retry_trigger=run.options.retry_trigger,
    )
    return next_step(facts)


def _journal_once(
    run: RunContext, attempt: AttemptContext, cls: type[ev.Event], **fields: object
) -> None:
    """Journal one of the attempt's ending events, unless a run cut short after writing it
    already did (since the attempt's start; an AttemptFinished only with the same status: an
    attempt resumed after an error has one of those already)."""
    for event in reversed(run.store.read_events().events):
        if event.attempt != attempt.number:
            continue
        if isinstance(event, cls) and getattr(event, "status", None) == fields.get("status"):
            return
        if isinstance(event, ev.AttemptStarted):
            break
    run.event(cls, attempt.number, flush=False, **fields)
