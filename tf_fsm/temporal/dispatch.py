"""Starting a ticket's workflow, and what a worker registers (its worker: tf_fsm.temporal.worker).

A dispatcher starts each ticket's workflow under its one id (tf_fsm.temporal.identity) with
the "use existing" conflict policy: a second start, from this host or another, while the
ticket runs gets the running workflow's handle and starts nothing."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy

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
    return [TicketWorkflow], [found.run_attempt, found.next_step]
