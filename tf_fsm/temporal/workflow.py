"""A ticket's workflow: its attempts one after another, each run by a worker as an activity,
until the decision of what runs next has nothing more to run.

Workflow code is replayed from the history on any worker, so it is deterministic: it reads no
file, clock or network, and decides only on what its activities returned. It drives the ticket
as the backlog loop does (one attempt per run, `--once`; a blocked ticket runs again while the
decision, tf_fsm.core.next_step, allows a new attempt) and asks the core's own answer of
whether `run` would do nothing (`Step.refused`)."""

from __future__ import annotations

from datetime import timedelta
from typing import cast

from temporalio import workflow
from temporalio.common import RetryPolicy

# Imported once, outside the sandbox: the core is pure and its models are pydantic's, which
# the sandbox would otherwise import again for every workflow run.
with workflow.unsafe.imports_passed_through():
    from tf_fsm.core.next_step import Action, Step
    from tf_fsm.temporal.orders import AttemptReport, StepView, TicketOrder

#: the activities' names, as the workers register them (tf_fsm.temporal.activities)
RUN_ATTEMPT = "tf_fsm.run_attempt"
NEXT_STEP = "tf_fsm.next_step"
RUN_PHASE = "tf_fsm.run_phase"
MERGE_TICKET = "tf_fsm.merge_ticket"
#: a worker's error that retrying cannot cure (a bad order, a ticket that cannot be read)
NOT_RETRYABLE = "TfFsmRefused"
#: an attempt is resumable: a worker that died is replaced, a few times, by another
ATTEMPT_RETRIES = RetryPolicy(maximum_attempts=3, non_retryable_error_types=[NOT_RETRYABLE])


def refused(view: StepView) -> bool:
    """Would `run` do nothing with the ticket (already closed, exhausted, waiting for its
    merge)? The core's answer, asked of the step the worker read."""
    return Step(cast(Action, view.action), view.reason).refused


@workflow.defn(name="TicketWorkflow")
class TicketWorkflow:
    def __init__(self) -> None:
        self._reports: list[AttemptReport] = []

    @workflow.run
    async def run(self, order: TicketOrder) -> AttemptReport:
        report = await self._attempt(order)
        while report.status == "blocked":
            view: StepView = await workflow.execute_activity(
                NEXT_STEP,
                order,
                result_type=StepView,
                start_to_close_timeout=timedelta(minutes=2),
                retry_policy=ATTEMPT_RETRIES,
            )
            if refused(view):
                break
            report = await self._attempt(order)
        return report

    @workflow.query
    def reports(self) -> list[AttemptReport]:
        """The work reports of the runs so far, oldest first."""
        return list(self._reports)

    async def _attempt(self, order: TicketOrder) -> AttemptReport:
        report: AttemptReport = await workflow.execute_activity(
            RUN_ATTEMPT,
            order,
            result_type=AttemptReport,
            start_to_close_timeout=timedelta(seconds=order.phase_timeout_seconds),
            heartbeat_timeout=timedelta(seconds=order.heartbeat_timeout_seconds),
            retry_policy=ATTEMPT_RETRIES,
        )
        self._reports.append(report)
        return report
