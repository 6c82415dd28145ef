"""The merge queue of a repository's base branch: one workflow, reached only by
signal-with-start (tf_fsm.temporal.enqueue), merging one ticket at a time on a worker and
answering each ticket's workflow with a signal. It continues as new every `merges_per_run`
merges, so its history stays bounded, and ends once nothing has waited for `IDLE` (the next
request starts it again)."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from tf_fsm.temporal.orders import (
        MergeOrder,
        MergeQueueStart,
        MergeReport,
        MergeRequest,
        StepView,
    )
    from tf_fsm.temporal.workflow import MERGE_TICKET, PHASE_RETRIES

#: how long an empty queue waits for a request before its run ends
IDLE = timedelta(minutes=10)


def merge_queue_id(workflow_prefix: str, base: str) -> str:
    """The merge queue's workflow id, beside the tickets' (`workflow_prefix`: the
    repository's, tf_fsm.temporal.identity.workflow_prefix)."""
    return f"{workflow_prefix}merge-queue-{base or 'base'}"


@workflow.defn(name="MergeQueueWorkflow")
class MergeQueueWorkflow:
    def __init__(self) -> None:
        self._waiting: list[MergeRequest] = []
        self._current: str | None = None

    @workflow.signal
    def enqueue(self, request: MergeRequest) -> None:
        """A ticket asks for its merge; asked again (its request's activity retried), once."""
        if request.ticket != self._current and all(
            r.ticket != request.ticket for r in self._waiting
        ):
            self._waiting.append(request)

    @workflow.query
    def pending(self) -> list[str]:
        """The tickets waiting, the one merging first."""
        return ([self._current] if self._current else []) + [r.ticket for r in self._waiting]

    @workflow.run
    async def run(self, start: MergeQueueStart) -> int:
        for request in start.pending:
            self.enqueue(request)
        merged = 0
        while True:
            try:
                await workflow.wait_condition(lambda: bool(self._waiting), timeout=IDLE)
            except TimeoutError:
                await workflow.wait_condition(workflow.all_handlers_finished)
                if not self._waiting:
                    return start.merged + merged
            request = self._waiting.pop(0)
            self._current = request.ticket
            report = await self._merge(request)
            self._current = None
            await _answer(request, report)
            merged += 1
            if merged >= request.merges_per_run:
                await workflow.wait_condition(workflow.all_handlers_finished)
                workflow.continue_as_new(
                    MergeQueueStart(
                        start.repository, start.base, list(self._waiting), start.merged + merged
                    )
                )

    async def _merge(self, request: MergeRequest) -> MergeReport:
        order = MergeOrder(request.repository, request.ticket, request.base, request.files)
        try:
            report: MergeReport = await workflow.execute_activity(
                MERGE_TICKET,
                order,
                result_type=MergeReport,
                task_queue=request.task_queue,
                start_to_close_timeout=timedelta(seconds=request.phase_timeout_seconds),
                heartbeat_timeout=timedelta(seconds=request.heartbeat_timeout_seconds),
                retry_policy=PHASE_RETRIES,
            )
            return report
        except ActivityError as exc:  # the ticket's workflow hears of it and stops there
            reason = f"{request.ticket}: the merge failed: {exc.cause or exc}"
            return MergeReport(
                request.ticket, "error", reason, [], request.files, StepView("resume", reason), ""
            )


async def _answer(request: MergeRequest, report: MergeReport) -> None:
    """Tell the ticket's workflow; one that has ended meanwhile (terminated by a person) is
    past hearing, and the queue goes on."""
    handle = workflow.get_external_workflow_handle(request.workflow_id)
    try:
        await handle.signal("merged", report)
    except Exception as exc:  # an ended workflow cannot be signalled
        workflow.logger.warning("%s: merge answer not delivered: %s", request.ticket, exc)
