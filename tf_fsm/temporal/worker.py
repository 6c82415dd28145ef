"""A worker of the clone at `root`: it polls the shared task queue and its host's own
(`<queue>@<host>`, so that a workflow can send an attempt's later phases where its first ran),
runs at most `slots` activities at once across both, and on `stop` stops polling, lets the
running activities finish for a grace period, then cancels them: a cancelled activity's run is
ended (its process group; tf_fsm.process) and the phase handed back as a retryable failure,
so that it is retried elsewhere and resumes at its last checkpoint."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.exceptions import ApplicationError, CancelledError
from temporalio.worker import (
    ActivityInboundInterceptor,
    CustomSlotSupplier,
    ExecuteActivityInput,
    FixedSizeSlotSupplier,
    Interceptor,
    PollerBehaviorSimpleMaximum,
    SlotMarkUsedContext,
    SlotPermit,
    SlotReleaseContext,
    SlotReserveContext,
    Worker,
    WorkerTuner,
)

from tf_fsm.temporal.dispatch import registered
from tf_fsm.temporal.orders import TASK_QUEUE

#: how long running activities may go on once the worker is told to stop
GRACE_SECONDS = 30.0
#: a worker full when a task reached it hands the task back; Temporal retries it after this
BUSY_RETRY_SECONDS = 1.0
#: the error types a workflow sees when a worker handed its activity back (both retryable)
WORKER_BUSY = "WorkerBusy"
WORKER_STOPPED = "WorkerStopped"
#: how often a poller waiting for a free slot looks again
_SLOT_WAIT_SECONDS = 0.05
#: the SDK's defaults for the task kinds a tf-fsm worker does not limit
_OTHER_SLOTS = 100


def default_host(root: Path) -> str:
    """The name of a worker's host: the machine and its clone, so that two clones on one
    machine (two "hosts" of a test) have queues of their own."""
    return f"{socket.gethostname()}:{root.resolve()}"


def host_queue(queue: str, host: str) -> str:
    """The task queue only the workers of `host` poll."""
    return f"{queue}@{host}"


@dataclass
class _Running:
    """The activities running in this worker, across its queues (event loop only)."""

    slots: int
    count: int = 0
    stopping: bool = False


class _Slots(CustomSlotSupplier):
    """A poller polls only while fewer than `slots` activities run. Two queues each keep a
    poll open, so a task can still reach a full worker: `_Guard` hands it back."""

    def __init__(self, running: _Running) -> None:
        self.running = running

    async def reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit:
        while self.running.count >= self.running.slots:
            await asyncio.sleep(_SLOT_WAIT_SECONDS)
        return SlotPermit()

    def try_reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit | None:
        return SlotPermit() if self.running.count < self.running.slots else None

    def mark_slot_used(self, ctx: SlotMarkUsedContext) -> None:
        pass

    def release_slot(self, ctx: SlotReleaseContext) -> None:
        pass


class _GuardInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, running: _Running) -> None:
        super().__init__(next)
        self.running = running

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        if self.running.count >= self.running.slots:
            raise ApplicationError(
                f"this worker runs {self.running.slots} activities already: handed back",
                type=WORKER_BUSY,
                next_retry_delay=timedelta(seconds=BUSY_RETRY_SECONDS),
            )
        self.running.count += 1
        try:
            return await super().execute_activity(input)
        except (asyncio.CancelledError, CancelledError):
            if not self.running.stopping:
                raise  # the workflow cancelled it: it stays cancelled
            # cancelled at the end of the grace period: retried elsewhere, not cancelled
            raise ApplicationError(
                "the worker stopped before the activity ended: handed back",
                type=WORKER_STOPPED,
            ) from None
        finally:
            self.running.count -= 1


class _Guard(Interceptor):
    def __init__(self, running: _Running) -> None:
        self.running = running

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _GuardInbound(next, self.running)


def _tuner(running: _Running) -> WorkerTuner:
    others = FixedSizeSlotSupplier(_OTHER_SLOTS)
    return WorkerTuner.create_composite(
        workflow_supplier=others,
        activity_supplier=_Slots(running),
        local_activity_supplier=others,
        nexus_supplier=others,
    )


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
    running = _Running(slots)
    with ThreadPoolExecutor(max_workers=slots, thread_name_prefix="tf-fsm activity") as pool:
        common: dict[str, Any] = {
            "activities": activities,
            "activity_executor": pool,
            "interceptors": [_Guard(running)],
            "graceful_shutdown_timeout": timedelta(seconds=grace),
            "activity_task_poller_behavior": PollerBehaviorSimpleMaximum(1),
        }
        shared = Worker(
            client, task_queue=queue, workflows=workflows, tuner=_tuner(running), **common
        )
        mine = Worker(client, task_queue=host_queue(queue, host), tuner=_tuner(running), **common)
        runs: asyncio.Future[Any] = asyncio.gather(shared.run(), mine.run())
        polling()
        stopped: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait([runs, stopped], return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            running.stopping = True
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
