"""The Store suite, the lock: exclusive within a process and (for a store shared across
processes) across real processes, released however the holder ends, not lost when files are
deleted, not re-entrant; and its probes (tf_fsm.storage.protocol)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tf_fsm.conformance.fixtures import needs
from tf_fsm.conformance.stores import Holders
from tf_fsm.errors import TicketLockedError
from tf_fsm.storage.protocol import Store


def _refused(store: Store, holder_pid: int) -> None:
    with pytest.raises(TicketLockedError) as info, store.lock():
        pytest.fail("acquired a lock another holder holds")
    assert info.value.holder_pid == holder_pid
    assert info.value.ticket_id == store.ticket_id
    assert f"pid {holder_pid}" in str(info.value)
    assert store.lock_holder() == holder_pid  # the probe names the same holder


def test_the_lock_is_exclusive_across_processes(
    spec: str, root: Path, store: Store, holders: Holders
) -> None:
    needs(store, "shared_across_processes")
    proc = holders.start(spec, root, store.ticket_id)
    _refused(store, proc.pid)
    _refused(store, proc.pid)  # a refusal takes nothing: the holder still holds it


def test_lock_holder_names_the_holder_and_takes_nothing(
    spec: str, root: Path, store: Store, holders: Holders
) -> None:
    assert store.lock_holder() is None
    proc = holders.start(spec, root, store.ticket_id)
    assert store.lock_holder() == proc.pid
    _refused(store, proc.pid)  # the probe took nothing
    holders.release(proc)
    assert store.lock_holder() is None


@pytest.mark.parametrize("end", ["release", "kill"])
def test_the_lock_is_free_once_the_holder_releases_it_or_is_sigkilled(
    spec: str, root: Path, store: Store, holders: Holders, end: str
) -> None:
    needs(store, "shared_across_processes")
    proc = holders.start(spec, root, store.ticket_id)
    _refused(store, proc.pid)
    {"release": holders.release, "kill": holders.kill}[end](proc)
    assert store.lock_holder() is None
    with store.lock(f"after {end}"):
        pass


@pytest.mark.skipif(
    sys.platform != "linux", reason="survives deletion through an abstract socket, Linux only"
)
@pytest.mark.parametrize("deleted", ["the ticket's files", "the ticket directory"])
def test_the_lock_survives_deletion_of_the_tickets_files(
    spec: str, root: Path, store: Store, holders: Holders, deleted: str
) -> None:
    needs(store, "shared_across_processes")
    needs(store, "pi_ticketflow_files")
    proc = holders.start(spec, root, store.ticket_id)
    if deleted == "the ticket directory":
        shutil.rmtree(store.files.dir)
    else:
        for entry in store.files.dir.iterdir():  # the lock file among them
            entry.unlink()
    _refused(store, proc.pid)  # named even with the owner's note gone
    holders.release(proc)
    with store.lock():
        pass


def test_the_lock_is_not_reentrant_within_a_process(
    store: Store, make: Callable[[str], Store]
) -> None:
    other = make(store.ticket_id)
    assert store.lock_holder() is None and store.lock_loop() is None
    with store.lock(loop="4242.1"):
        _refused(other, os.getpid())
        assert other.lock_loop() == "4242.1"  # whose worker holds it
    assert other.lock_holder() is None and other.lock_loop() is None
    with other.lock():
        assert store.lock_loop() is None  # held, but by no loop's worker


def test_the_lock_is_released_when_the_body_raises(store: Store) -> None:
    with pytest.raises(RuntimeError), store.lock():
        raise RuntimeError("boom")
    assert store.lock_holder() is None
    with store.lock():
        pass
