"""The ticket lock survives the deletion of its file: a second run is still refused (exit 75).

`git clean`, an agent or a person may delete `<ticket>/.lock` (with its owner note, or the
whole ticket directory) while a run holds it. The lock is also a kernel object that no file
operation removes (tf_fsm.storage.lock), so agents are never run twice, events never doubled,
and the ticket gets one close note.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Harness

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the lock's socket is Linux's")


def _first_run(e2e: Harness) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "FAKE_AGENT_PLAN": str(e2e.plan_file),
        "FAKE_AGENT_LOG": str(e2e.log_file),
        "TF_FSM_ROOT": str(e2e.project),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "tf_fsm", "run", "pt-1"],
        cwd=e2e.project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not e2e.agent_calls(phase="implement"):  # it holds the lock, mid-attempt
        assert time.monotonic() < deadline and proc.poll() is None, "the first run never started"
        time.sleep(0.02)
    return proc


def _remove_tree(path: Path) -> None:
    """`rm -rf` of a directory the run is still writing into (its agent's log may get a line
    while it goes): again until it is gone, as a person would."""
    deadline = time.monotonic() + 10
    while path.exists():
        shutil.rmtree(path, ignore_errors=time.monotonic() < deadline)


@pytest.mark.parametrize("deleted", ["lock", "lock and owner note", "ticket directory"])
def test_a_second_run_is_refused_after_the_lock_file_is_deleted(e2e: Harness, deleted: str) -> None:
    # the first run's agent waits inside implement until the test lets it go: the second run
    # meets a held lock however slowly it starts
    go = e2e.agent_dir / "go"
    e2e.plan(pause=[{"phase": "implement", "until": str(go), "seconds": 120}])
    first = _first_run(e2e)
    try:
        if deleted == "ticket directory":
            _remove_tree(e2e.dir)
        else:
            (e2e.dir / ".lock").unlink()
            if deleted == "lock and owner note":
                (e2e.dir / ".lock.owner").unlink()

        second = e2e.run()
        assert second.returncode == 75, second.stderr
        assert f"pid {first.pid}" in second.stderr, second.stderr  # named even without the note
    finally:
        go.touch()

    _, err = first.communicate(timeout=60)
    assert "internal error" not in err, err
    if deleted != "ticket directory":  # its state went with the directory: it cannot close
        assert first.returncode == 0, err
        assert len(e2e.agent_calls(phase="implement")) == 1
        assert e2e.names().count("TicketClosed") == 1
        assert e2e.ticket_file.read_text().count("tf-fsm: closed attempt 1") == 1
