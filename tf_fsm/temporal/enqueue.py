"""The activity that puts a ticket in its merge queue: a workflow cannot signal-with-start
another, so a worker does it with its client. The queue is started when it is not running,
signalled when it is: never two queues for one repository and base."""

from __future__ import annotations

from temporalio import activity
from temporalio.common import WorkflowIDConflictPolicy

from tf_fsm.temporal.identity import workflow_prefix
from tf_fsm.temporal.merge_queue import MergeQueueWorkflow, merge_queue_id
from tf_fsm.temporal.orders import MergeQueueStart, MergeRequest
from tf_fsm.temporal.workflow import ENQUEUE_MERGE


@activity.defn(name=ENQUEUE_MERGE)
async def enqueue_merge(request: MergeRequest) -> None:
    """Signal-with-start the merge queue of the request's repository and base."""
    await activity.client().start_workflow(
        MergeQueueWorkflow.run,
        MergeQueueStart(request.repository, request.base),
        id=merge_queue_id(workflow_prefix(request.repository), request.base),
        task_queue=request.task_queue,
        start_signal="enqueue",
        start_signal_args=[request],
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
