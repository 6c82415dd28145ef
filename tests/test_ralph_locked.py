"""A loop that can run nothing because other processes hold every ready ticket says so plainly
(exit 75), and one started right after a killed loop waits for that loop's workers, which are
stopping by themselves, instead of skipping their tickets as locked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.test_ralph import Project

REPO = Path(__file__).resolve().parents[1]
#: a process that holds one ticket's lock as a loop's worker would, until told (or for N s)
HOLDER = """
import sys, time
from pathlib import Path
from tf_fsm.storage.store import TicketStore
store = TicketStore(Path(sys.argv[1]), sys.argv[2])
with store.lock(loop=sys.argv[3] or None):
    print("READY", flush=True)
    time.sleep(float(sys.argv[4]))
"""


@pytest.fixture
def proj(project: Path) -> Project:
    return Project(project)


def hold(proj: Project, tid: str, loop: str, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            HOLDER,
            str(proj.root / ".tf" / "knowledge"),
            tid,
            loop,
            str(seconds),
        ],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "READY"
    return proc


def test_every_ready_ticket_locked_is_not_a_drain(proj: Project) -> None:
    proj.ticket("pt-1")
    proj.ticket("pt-2")
    holders = [hold(proj, tid, "", 60) for tid in ("pt-1", "pt-2")]
    try:
        done = proj.ralph()
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
    assert done.returncode == 75, done.stderr
    said = done.stdout + done.stderr
    assert "every ready ticket is locked by another process; nothing was run" in said
    for holder in holders:
        assert f"locked by another process (pid {holder.pid})" in said
    assert "no ticket left to run" not in said
    assert not proj.log.exists()  # no agent ran


def test_one_locked_ticket_beside_others_is_a_normal_end(proj: Project) -> None:
    proj.ticket("pt-1")
    proj.ticket("pt-2", tags=("component:b",))
    holder = hold(proj, "pt-1", "", 60)
    try:
        done = proj.ralph()
    finally:
        holder.kill()
        holder.wait()
    assert done.returncode == 0, done.stderr
    assert f"locked by another process (pid {holder.pid})" in done.stdout + done.stderr


def test_a_new_loop_waits_for_the_workers_of_a_killed_loop(proj: Project) -> None:
    """The holder names a loop that is no longer running (a pid with another start time): the
    next loop says it waits for it, and runs the ticket once it has let go."""
    proj.ticket("pt-1")
    holder = hold(proj, "pt-1", f"{os.getpid()}.1", 1.5)
    try:
        done = proj.ralph()
    finally:
        holder.wait(timeout=30)
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    assert (
        "waiting up to 15s for 1 worker(s) of a loop that is no longer running to stop: "
        f"pt-1 (pid {holder.pid})" in said
    )
    assert [a["status"] for a in proj.state("pt-1")["attempts"]] == ["closed"]
