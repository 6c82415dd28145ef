"""What a ticket's workflow is given and what its activities answer: plain dataclasses, the
payloads Temporal's history holds (its default converter writes them as JSON). Workflow code
imports this module, so it imports nothing that touches a file, a clock or the network."""

from __future__ import annotations

from dataclasses import dataclass

#: how long one attempt may run before Temporal takes it away from its worker
ATTEMPT_TIMEOUT_SECONDS = 6 * 3600.0
#: a worker that has not heartbeaten for this long is taken for dead; the attempt is retried
#: elsewhere, where the engine resumes it at its last checkpoint
HEARTBEAT_TIMEOUT_SECONDS = 60.0


@dataclass(frozen=True)
class TicketOrder:
    """Run this ticket of this repository until nothing is left to run. `repository` is the
    repository's identity (tf_fsm.temporal.identity): a worker refuses an order for another
    repository than the clone it runs in."""

    repository: str
    ticket: str
    attempt_timeout_seconds: float = ATTEMPT_TIMEOUT_SECONDS
    heartbeat_timeout_seconds: float = HEARTBEAT_TIMEOUT_SECONDS


@dataclass(frozen=True)
class AttemptReport:
    """One `tf-fsm run --once` on a worker: its work report (tf_fsm.loop.work's keys), and the
    host that ran it."""

    ticket: str
    status: str
    attempt: int
    attempts_run: int
    retry_count: int
    max_retries: int
    reason: str
    host: str


@dataclass(frozen=True)
class StepView:
    """The decision of what runs next for a ticket (tf_fsm.core.next_step.Step), as the
    backlog loop asks it, without its resume point (the attempt's run finds that itself)."""

    action: str
    reason: str
    refusal: str | None = None
