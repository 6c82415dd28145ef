"""A ticket's workflow: its phases one after another, each run by a worker as an activity,
its merge through the repository's merge queue, until the decision of what runs next has
nothing more to run.

Workflow code is replayed from the history on any worker, so it is deterministic: it reads no
file, clock or network, and decides only on what its activities returned. What runs next is
the core's decision (tf_fsm.core.next_step), made by the worker that ran the phase from the
ticket's files as the history holds them, and recorded in the history with the phase's
report; the workflow asks the core's own answer of whether `run` would do nothing
(`Step.refused`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import cast

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, TimeoutError, TimeoutType

# Imported once, outside the sandbox: the core is pure and its models are pydantic's, which
# the sandbox would otherwise import again for every workflow run.
with workflow.unsafe.imports_passed_through():
    from tf_fsm.core.next_step import Action, Step
    from tf_fsm.temporal.orders import (
        MergeReport,
        MergeRequest,
        PhaseOrder,
        PhaseReport,
        Progress,
        StepView,
        TicketEnd,
        TicketFiles,
        TicketOrder,
    )

#: the activities' names, as the workers register them (tf_fsm.temporal.dispatch.registered)
RUN_PHASE = "tf_fsm.run_phase"
MERGE_TICKET = "tf_fsm.merge_ticket"
ENQUEUE_MERGE = "tf_fsm.enqueue_merge"
#: a worker's error that retrying cannot cure (a bad order, a ticket that cannot be read)
NOT_RETRYABLE = "TfFsmRefused"
#: a phase is resumable: a worker that died is replaced, a few times, by another
PHASE_RETRIES = RetryPolicy(maximum_attempts=5, non_retryable_error_types=[NOT_RETRYABLE])
#: on the host that ran the attempt's first phase, one try: when it fails or the host does
#: not take it soon, the phase goes to the shared queue at once (a takeover waits for
#: nothing more than the heartbeat timeout)
ON_HOST = RetryPolicy(maximum_attempts=1)
HOST_PICKUP = timedelta(seconds=5)
#: statuses after which the workflow runs nothing more on its own: a failed phase (`error`)
#: and a hand-off waiting for a person (`waiting`) need someone to look
STOPS = frozenset({"error", "waiting"})


def refused(view: StepView) -> bool:
    """Would `run` do nothing with the ticket (already closed, exhausted, waiting for its
    merge)? The core's answer, asked of the step the worker read."""
    return Step(cast(Action, view.action), view.reason).refused


def host_queue(task_queue: str, host: str) -> str:
    """The queue only the workers of `host` poll (`tf-fsm worker` polls it beside the shared
    one): where the later phases of an attempt go first."""
    return f"{task_queue}@{host}"


@workflow.defn(name="TicketWorkflow")
class TicketWorkflow:
    def __init__(self) -> None:
        self._ticket = ""
        self._files = TicketFiles()
        self._last: PhaseReport | None = None
        self._phases = 0
        self._merging = False
        self._merge_report: MergeReport | None = None

    @workflow.run
    async def run(self, order: TicketOrder) -> TicketEnd:
        self._ticket, self._files = order.ticket, order.files
        self._phases = order.phases_before
        try:
            return await self._drive(order)
        except ActivityError as exc:  # retries spent, or a worker's refusal: said, not thrown
            last = self._last
            return TicketEnd(
                order.ticket,
                "error",
                f"a phase failed on the cluster: {exc.cause or exc}",
                last.attempt if last else None,
                self._files,
                self._phases,
            )

    async def _drive(self, order: TicketOrder) -> TicketEnd:
        report = await self._phase(order)
        while True:
            if report.status in STOPS:
                break
            if report.status == "awaiting_merge":  # passed, its merge held (`--hold-merge`)
                merged = await self._merge(order, report)
                report = _as_phase(merged, report)
                if merged.status != "merged" and report.step.action == "awaiting_merge":
                    break  # left to a person (a conflict no agent resolved): asked once
                continue
            if refused(report.step):
                break
            if self._phases - order.phases_before >= order.phases_per_run:
                # the history stays bounded; the next run begins at these files
                paused_on = report.host if report.status == "paused" else None
                workflow.continue_as_new(
                    replace(
                        order, files=self._files, phases_before=self._phases, paused_on=paused_on
                    )
                )
            report = await self._phase(order)
        # a blocked attempt after which the core allows none is the end of the retries
        status = "exhausted" if report.step.action == "exhausted" else report.status
        return TicketEnd(
            order.ticket, status, report.reason, report.attempt, self._files, self._phases
        )

    @workflow.query
    def progress(self) -> Progress:
        """What the workflow has done so far: the dispatchers and `status --temporal` ask."""
        return Progress(self._ticket, self._phases, self._last, self._merging, self._files)

    @workflow.signal
    def merged(self, report: MergeReport) -> None:
        """The merge queue's answer to this ticket's request."""
        self._merge_report = report

    async def _phase(self, order: TicketOrder) -> PhaseReport:
        placed = PhaseOrder(order.repository, order.ticket, self._files)
        last = self._last
        # the attempt goes on (a paused phase, here or in the run before): its host first
        host = last.host if last is not None and last.status == "paused" else None
        if last is None:
            host = order.paused_on
        report: PhaseReport | None = None
        if host is not None:
            report = await self._on_host(order, placed, host)
        if report is None:
            report = await self._execute(order, placed, order.task_queue, PHASE_RETRIES, None)
        self._files, self._last = report.files, report
        self._phases += 1
        return report

    async def _on_host(
        self, order: TicketOrder, placed: PhaseOrder, host: str
    ) -> PhaseReport | None:
        queue = host_queue(order.task_queue, host)
        try:
            return await self._execute(order, placed, queue, ON_HOST, HOST_PICKUP)
        except ActivityError as exc:
            if _refusal(exc):
                raise
            # the host is gone, busy or failed this try: the shared queue takes the phase,
            # from the files the history holds (the failed try published nothing)
            workflow.logger.info("%s: phase not run on %s (%s)", order.ticket, host, exc.cause)
            return None

    async def _execute(
        self,
        order: TicketOrder,
        placed: PhaseOrder,
        queue: str,
        retries: RetryPolicy,
        pickup: timedelta | None,
    ) -> PhaseReport:
        report: PhaseReport = await workflow.execute_activity(
            RUN_PHASE,
            placed,
            result_type=PhaseReport,
            task_queue=queue,
            schedule_to_start_timeout=pickup,
            start_to_close_timeout=timedelta(seconds=order.phase_timeout_seconds),
            heartbeat_timeout=timedelta(seconds=order.heartbeat_timeout_seconds),
            retry_policy=retries,
        )
        return report

    async def _merge(self, order: TicketOrder, report: PhaseReport) -> MergeReport:
        """Ask the merge queue of the ticket's base for the merge, and wait for its answer."""
        self._merging, self._merge_report = True, None
        request = MergeRequest(
            order.repository,
            order.ticket,
            report.base or "",
            workflow.info().workflow_id,
            self._files,
            order.task_queue,
            order.phase_timeout_seconds,
            order.heartbeat_timeout_seconds,
            order.merges_per_run,
        )
        await workflow.execute_activity(
            ENQUEUE_MERGE,
            request,
            start_to_close_timeout=timedelta(minutes=1),
            retry_policy=PHASE_RETRIES,
        )
        await workflow.wait_condition(lambda: self._merge_report is not None)
        merged = cast(MergeReport, self._merge_report)
        self._files, self._merging = merged.files, False
        return merged


def _as_phase(merged: MergeReport, before: PhaseReport) -> PhaseReport:
    """The merge's report as a phase's (what the loop and the progress query read)."""
    return PhaseReport(
        ticket=merged.ticket,
        status=merged.status if merged.status != "merged" else "closed",
        attempt=before.attempt,
        phase="merge",
        reason=merged.reason,
        journal=merged.journal,
        files=merged.files,
        step=merged.step,
        host=merged.host,
        base=before.base,
    )


def _refusal(exc: ActivityError) -> bool:
    """Is this a worker's refusal (no other host would do better), not a timeout or crash?"""
    cause = exc.cause
    if isinstance(cause, TimeoutError):
        return cause.type not in (TimeoutType.SCHEDULE_TO_START, TimeoutType.HEARTBEAT)
    return getattr(cause, "type", None) == NOT_RETRYABLE
