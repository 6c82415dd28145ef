"""A worker's slots: at most `slots` phases at once, across its two queues, without ever
taking a task it would have to hand back (a hand-back spends one of the phase's retries).

A poller holds a slot while it polls, so a slot is never promised twice. The shared queue's
poller takes the free slots. The host's own queue gets a task only in one case: a phase of
this worker ended `paused` and its attempt's next phase is coming (the workflow sends it here
first, for `HOST_PICKUP`). For that long the slot the phase freed is kept for it: the shared
queue does not take it, and the host queue's poller polls with it. A kept slot nobody claims
is free again once the workflow has sent the phase to the shared queue instead."""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field

from temporalio.worker import (
    CustomSlotSupplier,
    FixedSizeSlotSupplier,
    SlotMarkUsedContext,
    SlotPermit,
    SlotReleaseContext,
    SlotReserveContext,
    WorkerTuner,
)

from tf_fsm.temporal.workflow import HOST_PICKUP

#: how long a slot is kept for an attempt's next phase: the workflow's wait for this host, and
#: a second for the two clocks' and the server's delays
KEEP_SECONDS = HOST_PICKUP.total_seconds() + 1.0
#: how often a poller waiting for a slot looks again
_WAIT_SECONDS = 0.05
#: the SDK's defaults for the task kinds a tf-fsm worker does not limit
_OTHER_SLOTS = 100


@dataclass
class Slots:
    """The worker's slots: the shared queue's poller's (polling or running), the host
    queue's, and until when one is kept for a phase to come. Read and written by the SDK's
    threads and the event loop, under `lock`."""

    slots: int
    shared: int = 0
    host: int = 0
    kept_until: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def _kept(self) -> int:
        return 1 if time.monotonic() < self.kept_until else 0

    def take_shared(self) -> bool:
        with self.lock:
            if self.shared + self.host + self._kept() >= self.slots:
                return False
            self.shared += 1
            return True

    def take_host(self) -> bool:
        with self.lock:
            if not self._kept() or self.host > 0:
                return False
            self.host, self.kept_until = 1, 0.0
            return True

    def keep_for_next_phase(self) -> None:
        """A phase of this worker ended `paused`: its attempt's next phase may come here."""
        with self.lock:
            self.kept_until = time.monotonic() + KEEP_SECONDS

    def release_shared(self) -> None:
        with self.lock:
            self.shared -= 1

    def release_host(self) -> None:
        with self.lock:
            self.host -= 1


class _Supplier(CustomSlotSupplier):
    def __init__(self, slots: Slots, on_host: bool) -> None:
        self.slots, self.on_host = slots, on_host

    def _take(self) -> bool:
        return self.slots.take_host() if self.on_host else self.slots.take_shared()

    async def reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit:
        while not self._take():
            await asyncio.sleep(_WAIT_SECONDS)
        return SlotPermit()

    def try_reserve_slot(self, ctx: SlotReserveContext) -> SlotPermit | None:
        return SlotPermit() if self._take() else None

    def mark_slot_used(self, ctx: SlotMarkUsedContext) -> None:
        pass

    def release_slot(self, ctx: SlotReleaseContext) -> None:
        if self.on_host:
            self.slots.release_host()
        else:
            self.slots.release_shared()


def tuner(slots: Slots, on_host: bool) -> WorkerTuner:
    """The tuner of the worker polling the shared queue (`on_host` False) or the host's."""
    others = FixedSizeSlotSupplier(_OTHER_SLOTS)
    return WorkerTuner.create_composite(
        workflow_supplier=others,
        activity_supplier=_Supplier(slots, on_host),
        local_activity_supplier=others,
        nexus_supplier=others,
    )
