"""A worker in a process of its own, a "host" a test can kill: polls QUEUE on the server at
ADDRESS, its attempts run in ROOT. Prints `polling` once it polls; runs until killed.

    python worker_process.py ADDRESS ROOT QUEUE
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from temporalio.client import Client

from tf_fsm.temporal.worker import running_worker


async def main(address: str, root: str, queue: str) -> None:
    client = await Client.connect(address)
    async with running_worker(client, Path(root), task_queue=queue):
        print("polling", flush=True)
        await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
