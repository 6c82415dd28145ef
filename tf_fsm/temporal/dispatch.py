"""Starting a ticket's workflow, and a worker that runs tickets' workflows and attempts.

A dispatcher starts each ticket's workflow under its one id (tf_fsm.temporal.identity) with
the "use existing" conflict policy: a second start, from this host or another, while the
ticket runs gets the running workflow's handle and starts nothing."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.worker import Worker

from tf_fsm.temporal.activities import TicketActivities
from tf_fsm.temporal.identity import repository_identity, workflow_id
from tf_fsm.temporal.orders import TASK_QUEUE, AttemptReport, TicketOrder
from tf_fsm.temporal.workflow import TicketWorkflow


async def start_ticket(
    client: Client, root: Path, ticket: str, task_queue: str = TASK_QUEUE, **order: Any
) -> WorkflowHandle[TicketWorkflow, AttemptReport]:
    """The ticket's workflow: started, or the one already running (`order`: TicketOrder's
    timeouts)."""
    placed = TicketOrder(repository_identity(root), ticket, **order)
    return await client.start_workflow(
        TicketWorkflow.run,
        placed,
        id=workflow_id(placed.repository, ticket),
        task_queue=task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )


def registered(root: Path, host: str | None = None) -> tuple[list[type], list[Callable[..., Any]]]:
    """The workflows and activities a worker of the clone at `root` runs: the one list every
    worker registers (a workflow or activity missing from a worker would never run there)."""
    found = TicketActivities(root, host)
    return [TicketWorkflow], [found.run_phase, found.merge_ticket]


@contextlib.asynccontextmanager
async def running_worker(
    client: Client, root: Path, task_queue: str = TASK_QUEUE, slots: int = 1
) -> AsyncIterator[Worker]:
    """A worker polling `task_queue` while the block runs, its activities run in `root` (a
    clone of the repository), at most `slots` at once. On leaving, it stops polling and
    waits for the activities it runs (Temporal's graceful shutdown)."""
    workflows, activities = registered(root)
    with ThreadPoolExecutor(max_workers=slots, thread_name_prefix="tf-fsm activity") as pool:
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=workflows,
            activities=activities,
            activity_executor=pool,
            max_concurrent_activities=slots,
        )
        async with worker:
            yield worker
