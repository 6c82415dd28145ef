"""A git tf_fsm ends before its time is killed, never asked to stop (tf_fsm.workspace.git):
on SIGTERM, `git worktree add` deletes its registry entry and then its tree while the checkout
it started still writes there, leaving files no registry names, which a rerun must refuse to
touch. Both ways a git ends early are tried with a `git` that records a SIGTERM: through the
door (a timeout, as Ctrl-C or a stopping run) and by the sweep of what a killed run left
running; an agent is still asked first, as before."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from tf_fsm.process.door import run_process
from tf_fsm.process.strays import OWNER_ENV, end_orphans
from tf_fsm.workspace.git import Git

#: a program that says when it got SIGTERM, then waits to be ended
RECORDS_TERM = """#!/bin/sh
trap 'echo term >> "{log}"; exit 143' TERM
echo $$ > "{pid}"
while true; do sleep 0.05; done
"""
#: an owner mark no live process has (no pid is this high)
DEAD_OWNER = "999999999.1.1"


def program(tmp_path: Path, name: str) -> tuple[Path, Path, Path]:
    """`name` in a directory of its own (its process's name is `name`): it, its log, its pid."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    log, pid = tmp_path / f"{name}.log", tmp_path / f"{name}.pid"
    path = folder / name
    path.write_text(RECORDS_TERM.format(log=log, pid=pid), encoding="utf-8")
    path.chmod(0o755)
    return path, log, pid


def gone(pid: int) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.02)
    return False


def test_a_git_past_its_time_is_killed_through_the_door_while_an_agent_is_asked_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, log, pid = program(tmp_path, "git")
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    result = Git(tmp_path).run("status", check=False, timeout=1)
    assert result.timed_out is True
    assert gone(int(pid.read_text()))
    assert not log.exists(), "git was sent SIGTERM"

    agent, agent_log, agent_pid = program(tmp_path, "agent")
    result = run_process([str(agent)], cwd=tmp_path, timeout=1)
    assert result.timed_out is True
    assert gone(int(agent_pid.read_text()))
    assert agent_log.read_text() == "term\n"  # an agent gets its chance to stop


@pytest.mark.parametrize(("name", "asked"), [("git", False), ("agent", True)])
def test_the_sweep_of_a_killed_runs_processes_kills_git_at_once(
    tmp_path: Path, name: str, asked: bool
) -> None:
    path, log, pid_file = program(tmp_path, name)
    env = {**os.environ, OWNER_ENV: DEAD_OWNER}
    proc = subprocess.Popen([str(path)], env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        said = end_orphans()
        assert said is not None and f"{proc.pid} (" in said
        assert proc.wait(timeout=10) == (143 if asked else -9)
        assert log.exists() == asked
    finally:
        proc.kill()
        proc.wait()
