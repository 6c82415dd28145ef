"""What a worker of the repository runs: its workflows and activities, registered alike on
every host."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.worker import Worker

from tf_fsm.temporal.activities import TicketActivities
from tf_fsm.temporal.enqueue import enqueue_merge
from tf_fsm.temporal.merge_queue import MergeQueueWorkflow
from tf_fsm.temporal.orders import TASK_QUEUE
from tf_fsm.temporal.workflow import TicketWorkflow


def registered(root: Path, host: str | None = None) -> tuple[list[type], list[Callable[..., Any]]]:
    """The workflows and activities a worker of the clone at `root` runs: the one list every
    worker registers (a workflow or activity missing from a worker would never run there)."""
    found = TicketActivities(root, host)
    return [TicketWorkflow, MergeQueueWorkflow], [
        found.run_phase,
        found.merge_ticket,
        enqueue_merge,
    ]


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
