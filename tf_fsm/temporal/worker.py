"""A worker of the clone at `root`: it polls the shared task queue and its host's own
(`<queue>@<host>`, so that a workflow can send an attempt's later phases where its first ran),
runs at most `slots` activities at once across both (tf_fsm.temporal.slots), and on `stop`
stops polling, lets the running activities finish for a grace period, then cancels
them: a cancelled activity's run is ended (its process group; tf_fsm.process) and the phase
handed back as a retryable failure, so that it is retried elsewhere and resumes at its last
checkpoint."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    PollerBehaviorSimpleMaximum,
    Worker,
)

from tf_fsm.temporal.dispatch import registered
from tf_fsm.temporal.identity import default_host
from tf_fsm.temporal.orders import TASK_QUEUE, PhaseReport
from tf_fsm.temporal.slots import Slots, tuner
from tf_fsm.temporal.workflow import host_queue

#: how long running activities may go on once the worker is told to stop
GRACE_SECONDS = 30.0
#: how long a workflow task waits on the queue of the worker that ran the workflow's last
#: task (its cache; Temporal's "sticky" queue) before any worker may take it: Temporal's
#: 10 s default would add 10 s to every takeover whose dead worker had run that last task
STICKY_PICKUP = timedelta(seconds=1)
#: the error type a workflow sees when a stopping worker handed its activity back (retried)
WORKER_STOPPED = "WorkerStopped"


class _GuardInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, guard: _Guard) -> None:
        super().__init__(next)
        self.guard = guard

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        try:
            done = await super().execute_activity(input)
        except (asyncio.CancelledError, CancelledError):
            if not self.guard.stopping:
                raise  # the workflow cancelled it: it stays cancelled
            # cancelled at the end of the grace period: retried elsewhere, not cancelled
            raise ApplicationError(
                "the worker stopped before the activity ended: handed back",
                type=WORKER_STOPPED,
            ) from None
        if isinstance(done, PhaseReport) and done.status == "paused":
            self.guard.slots.keep_for_next_phase()
        return done


class _Guard(Interceptor):
    """Hands back what a stopping worker's grace period cut short, and keeps a slot for the
    next phase of an attempt a phase here paused (tf_fsm.temporal.slots)."""

    def __init__(self, slots: Slots) -> None:
        self.slots = slots
        self.stopping = False

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _GuardInbound(next, self)


async def serve(
    client: Client,
    root: Path,
    queue: str,
    host: str,
    slots: int,
    stop: asyncio.Event,
    grace: float = GRACE_SECONDS,
    polling: Callable[[], None] = lambda: None,
) -> None:
    """Poll `queue` (workflows and activities) and `host`'s own queue (activities) until
    `stop` is set, then shut down as the module says; `polling` is called once both poll."""
    workflows, activities = registered(root, host)
    kept = Slots(slots)
    guard = _Guard(kept)
    with ThreadPoolExecutor(max_workers=slots, thread_name_prefix="tf-fsm activity") as pool:
        common: dict[str, Any] = {
            "activities": activities,
            "activity_executor": pool,
            "interceptors": [guard],
            "graceful_shutdown_timeout": timedelta(seconds=grace),
            "activity_task_poller_behavior": PollerBehaviorSimpleMaximum(1),
        }
        shared = Worker(
            client,
            task_queue=queue,
            workflows=workflows,
            tuner=tuner(kept, False),
            sticky_queue_schedule_to_start_timeout=STICKY_PICKUP,
            **common,
        )
        mine = Worker(client, task_queue=host_queue(queue, host), tuner=tuner(kept, True), **common)
        runs: asyncio.Future[Any] = asyncio.gather(shared.run(), mine.run())
        polling()
        stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait([runs, stopped], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            guard.stopping = True
            await asyncio.gather(shared.shutdown(), mine.shutdown())
        await runs  # a worker's fatal error, raised


@contextlib.asynccontextmanager
async def running_worker(
    client: Client,
    root: Path,
    task_queue: str = TASK_QUEUE,
    slots: int = 1,
    host: str | None = None,
    grace: float = 0.0,
) -> AsyncIterator[None]:
    """`serve` while the block runs (a worker in this process, as the tests start one): it
    polls once the block starts; on leaving, it stops as `serve` does (`grace` 0: running
    activities are handed back at once)."""
    stop, polling = asyncio.Event(), asyncio.Event()
    served = asyncio.ensure_future(
        serve(client, root, task_queue, host or default_host(root), slots, stop, grace, polling.set)
    )
    ready = asyncio.ensure_future(polling.wait())
    await asyncio.wait([served, ready], return_when=asyncio.FIRST_COMPLETED)
    ready.cancel()
    if served.done():
        await served  # it failed before polling: its error
    try:
        yield
    finally:
        stop.set()
        await served
