"""The board's resume action against real processes: a ticket interrupted by a SIGKILL is
resumed from the page (`tf-fsm resume` as the server's child, the real agent script running
again), and nothing the server started outlives it, whether it is stopped or killed."""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import httpx
import pytest

from tests.conftest import wait_for
from tests.ui_server import slow_project, start_run, ui_server
from tf_fsm.storage.lock import lock_holder


def _agents(root: Path) -> list[int]:
    """The fake agents running for this project (their plan file names it)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "fake_agent.py" in text and str(root) in open_environ(cmdline.parent):
            found.append(int(cmdline.parent.name))
    return found


def open_environ(proc: Path) -> str:
    try:
        return (proc / "environ").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _interrupted_ticket(root: Path) -> Path:
    """t-1 killed by SIGKILL in its implement phase: its attempt is open, nobody runs it."""
    state = root / ".tf/knowledge/tickets/t-1"
    run = start_run(root, "t-1")
    wait_for(lambda: (state / "logs/attempt-1").is_dir() and lock_holder(state) != 0, 20, "run")
    run.send_signal(signal.SIGKILL)
    run.wait(timeout=10)
    wait_for(lambda: lock_holder(state) == 0 and not _agents(root), 10, "the killed run's agent")
    return state


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_a_resume_from_the_page_runs_the_cli_and_dies_with_the_server(
    project: Path, stop: signal.Signals
) -> None:
    root = slow_project(project / "p", ("t-1",), seconds=30)
    state = _interrupted_ticket(root)
    with ui_server(root, "--allow-actions") as server:
        page = httpx.get(server.base + "/ticket/t-1").text
        assert "interrupted at implement" in page
        csrf = re.search(r'data-csrf="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        headers = {"X-TF-FSM-Action": csrf}
        started = httpx.post(server.base + "/ticket/t-1/action/resume", headers=headers)
        assert started.status_code == 202
        again = httpx.post(server.base + "/ticket/t-1/action/resume", headers=headers)
        assert again.status_code == 409
        wait_for(
            lambda: lock_holder(state) not in (0, server.proc.pid), 20, "resume holds the lock"
        )
        wait_for(lambda: bool(_agents(root)), 20, "the resumed agent runs")
        board = httpx.get(server.base + "/").text
        assert 'id="card-t-1"' in board.split('id="col-running"')[1].split("</section>")[0]
        if stop == signal.SIGKILL:
            os.kill(server.proc.pid, signal.SIGKILL)
            server.proc.wait(timeout=10)
            server.proc.returncode = 0  # killed on purpose: ui_server's own check is moot
        else:
            server.proc.send_signal(signal.SIGTERM)
            assert server.proc.wait(timeout=15) == 0
    wait_for(lambda: lock_holder(state) == 0, 10, "the resume child ended with the server")
    wait_for(lambda: not _agents(root), 10, "the agent ended with the server")
    events = [json.loads(line) for line in (state / "events.jsonl").read_text().splitlines()]
    resumed = [e for e in events if e["event"] == "AttemptResumed"]
    assert resumed and resumed[-1]["phase"] == "implement"
    assert not [e for e in events if e["event"] == "AttemptStarted" and e.get("attempt") == 2]
