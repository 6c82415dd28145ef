"""The same-failure short-circuit inside a run: the blocked attempt's signature, the
decision, and what the ticket and the journal are told. The rule itself is pure
(`escalation.same_failure`); this module only reads the attempt's artifacts and records.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tf_fsm.core import journal as ev
from tf_fsm.core.detection import remaining_findings
from tf_fsm.core.escalation import detect_same_failure, next_tier, should_retry
from tf_fsm.core.next_step import SAME_FAILURE, same_failure_pair, stop_reason
from tf_fsm.core.signature import FailureSignature, failure_signature
from tf_fsm.core.state import RetryState, update_current
from tf_fsm.engine.ticket_file import shown_path
from tf_fsm.tk import tickets

if TYPE_CHECKING:
    from tf_fsm.engine.api import RunContext

HUMAN_NOTE = "needs a human: the same failure twice at the top tier"


def attempt_signature(
    run: RunContext, gate_rows: list[dict[str, Any]], post_counts: dict[str, int]
) -> FailureSignature | None:
    """The blocked attempt's signature: the findings that remain after the fix (the post-fix
    re-review's, else review.md's), its post-fix counts (`post_counts`) and the gate commands
    that failed (from the verify phase's `gate_rows`)."""
    findings = remaining_findings(run.store.read_artifact)
    gates = [
        str(row["name"])
        for row in gate_rows
        if not row.get("passed") and (row.get("blocking") or row.get("required"))
    ]
    fail_on = list(run.settings.workflow.failOn)
    return failure_signature(fail_on, findings, post_counts, gates)


def after_blocked(
    run: RunContext, state: RetryState, gate_rows: list[dict[str, Any]], post_counts: dict[str, int]
) -> RetryState:
    """Record the blocked attempt's signature and, when it repeats the previous attempt's
    and retries are left, the short-circuit's decision (journaled; a stop is persisted as
    `stopReason`, so no later run or backlog loop starts another attempt)."""
    signature = attempt_signature(run, gate_rows, post_counts)
    if signature is None:
        return state
    state = update_current(state, failureSignature=signature.digest)
    if not should_retry(state, run.settings):
        return state  # the retries are spent anyway: RetriesExhausted tells the story
    decision = detect_same_failure(state, run.settings)
    if decision is None:
        return state
    stop = decision.action == "stop"
    tier = None if stop else next_tier(state, run.settings)
    record = {"previousAttempt": decision.previous, "action": decision.action, "nextTier": tier}
    state = update_current(state, sameFailure=record)
    if stop:
        state = state.model_copy(update={"stopReason": SAME_FAILURE, "status": "blocked"})
    run.event(
        ev.SameFailureDetected,
        decision.attempt,
        flush=False,  # durable with the attempt's end: its durable point follows at once
        previousAttempt=decision.previous,
        signature=decision.signature,
        entries=list(signature.entries),
        action=decision.action,
        tier=decision.tier,
        nextTier=tier,
        mode=run.settings.workflow.escalation.sameFailure,
        reason=decision.reason,
    )
    return state


def stop(run: RunContext, state: RetryState) -> str:
    """The run ends on a same-failure stop: a tk note for a person, and the reason."""
    mode = run.settings.workflow.escalation.sameFailure
    what = HUMAN_NOTE if mode == "skip-tier" else "needs a human: the same failure twice in a row"
    summary = shown_path(run, run.store.files.path("close-summary.md"))
    note = f"tf-fsm: {what}: {same_failure_pair(state)}; see {summary}"
    run.edit_ticket(lambda text: tickets.with_note(text, note, run.now()))
    return stop_reason(state, run.ticket_id)
