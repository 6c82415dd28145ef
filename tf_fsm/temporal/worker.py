"""A worker of the clone at `root`: it polls the shared task queue and its host's own
(`<queue>@<host>`, so that a workflow can send an attempt's later phases where its first ran),
runs at most `slots` activities at once from the shared queue and one from its own, and on
`stop` stops polling, lets the running activities finish for a grace period, then cancels
them: a cancelled activity's run is ended (its process group; tf_fsm.process) and the phase
handed back as a retryable failure, so that it is retried elsewhere and resumes at its last
checkpoint."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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
from tf_fsm.temporal.workflow import host_queue

#: how long running activities may go on once the worker is told to stop
GRACE_SECONDS = 30.0
#: the error type a workflow sees when a stopping worker handed its activity back (retried)
WORKER_STOPPED = "WorkerStopped"


def default_host(root: Path) -> str:
    """The name of a worker's host: the machine and its clone, so that two clones on one
    machine (two "hosts" of a test) have queues of their own."""
    return f"{socket.gethostname()}:{root.resolve()}"


@dataclass
class _Running:
    """The activities running in this worker, across its queues (event loop only)."""

    slots: int
    count: int = 0
    stopping: bool = False


class _GuardInbound(ActivityInboundInterceptor):
    def __init__(self, next: ActivityInboundInterceptor, running: _Running) -> None:
        super().__init__(next)
        self.running = running

    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
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
    # the host's own queue takes one phase beside the shared queue's `slots`: a phase that
    # goes on with an attempt begun here (a worker never hands a task back, which would spend
    # one of the phase's retries)
    with ThreadPoolExecutor(max_workers=slots + 1, thread_name_prefix="tf-fsm activity") as pool:
        common: dict[str, Any] = {
            "activities": activities,
            "activity_executor": pool,
            "interceptors": [_Guard(running)],
            "graceful_shutdown_timeout": timedelta(seconds=grace),
            "activity_task_poller_behavior": PollerBehaviorSimpleMaximum(1),
        }
        shared = Worker(
            client,
            task_queue=queue,
            workflows=workflows,
            max_concurrent_activities=slots,
            **common,
        )
        mine = Worker(
            client, task_queue=host_queue(queue, host), max_concurrent_activities=1, **common
        )
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
