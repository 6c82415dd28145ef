"""What a worker of the repository registers (its worker: tf_fsm.temporal.worker): the
workflows and activities, alike on every host."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from tf_fsm.temporal.activities import TicketActivities
from tf_fsm.temporal.enqueue import enqueue_merge
from tf_fsm.temporal.merge_queue import MergeQueueWorkflow
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
