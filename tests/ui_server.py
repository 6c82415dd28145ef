"""`tf-fsm ui` as a real server process for the web board's tests, and the projects they
serve: the demo project (`tf-fsm demo`) and one whose tickets run the fake agent slowly."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import tk_ticket

AGENT = Path(__file__).resolve().parent / "fake_agent.py"
URL = re.compile(r"at (http://\S+)")


@dataclass
class Server:
    proc: subprocess.Popen[str]
    url: str  # as printed: with the token when there is one
    first_lines: list[str]

    @property
    def base(self) -> str:
        return self.url.split("?")[0].rstrip("/")


@contextmanager
def ui_server(root: Path, *args: str) -> Iterator[Server]:
    """`tf-fsm ui --port 0` on `root`; stopped with SIGTERM afterwards, which must end it
    cleanly (exit 0) within a few seconds."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "tf_fsm", "--root", str(root), "ui", "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    lines: list[str] = []
    deadline = time.monotonic() + 20
    url = None
    while url is None:
        line = proc.stdout.readline() if proc.stdout else ""
        if not line:
            proc.kill()
            why = proc.stderr.read() if proc.stderr else ""
            raise AssertionError(f"tf-fsm ui ended early: {why}")
        lines.append(line)
        if found := URL.search(line):
            url = found.group(1)
        assert time.monotonic() < deadline, lines
    if "token=" in url:  # the line after the URL warns that the token is in it
        lines.append(proc.stdout.readline() if proc.stdout else "")
    server = Server(proc, url, lines)
    try:
        yield server
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise AssertionError("tf-fsm ui did not stop on SIGTERM within 15 s") from None
        assert code == 0, proc.stderr.read() if proc.stderr else code


def demo_project(where: Path) -> Path:
    """The demo project after its run (`tf-fsm demo`): demo-1 closed on attempt 2."""
    done = subprocess.run(
        [sys.executable, "-m", "tf_fsm", "demo", "--dir", str(where)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return where


def slow_project(
    root: Path,
    tickets: tuple[str, ...],
    seconds: float = 0.6,
    plan: dict[str, object] | None = None,
    max_retries: int = 3,
) -> Path:
    """A project whose tickets run the fake agent, each invocation taking `seconds` (and
    following `plan` besides), with research off so a run is a few seconds."""
    (root / ".tf" / "config").mkdir(parents=True, exist_ok=True)
    phases = ("implement", "review", "fix", "verify", "close")
    pauses = [{"phase": phase, "seconds": seconds} for phase in phases]
    plan_file = root / "agent-plan.json"
    plan_file.write_text(json.dumps({"pause": pauses, **(plan or {})}), encoding="utf-8")
    agent = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    settings = {
        "workflow": {"enableResearcher": False, "escalation": {"maxRetries": max_retries}},
        "executor": {
            "kind": "command",
            "command": [
                "/bin/sh",
                "-c",
                f"FAKE_AGENT_PLAN={shlex.quote(str(plan_file))} exec {agent}",
            ],
        },
    }
    (root / ".tf/config/settings.json").write_text(json.dumps(settings), encoding="utf-8")
    (root / ".tickets").mkdir(exist_ok=True)
    for tid in tickets:
        (root / ".tickets" / f"{tid}.md").write_text(
            tk_ticket(tid, title=f"Ticket {tid}"), encoding="utf-8"
        )
    return root


def start_run(root: Path, ticket: str) -> subprocess.Popen[str]:
    """`tf-fsm run <ticket>` beside the board, as a user would in another terminal."""
    return subprocess.Popen(
        [sys.executable, "-m", "tf_fsm", "--root", str(root), "run", ticket],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
