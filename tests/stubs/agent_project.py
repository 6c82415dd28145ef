"""What the real-agent end-to-end tests share: finding the agent CLI, and a tf_fsm project
run as a real process whose ticket files the test then reads."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

TICKET_ID = "pt-1"


def require_agent(env_var: str, command: str, package: str, version: str) -> str:
    """`$env_var` (a path), else `command` on PATH; the test is skipped, saying how to install
    it, when neither is there."""
    explicit = os.environ.get(env_var)
    found = (explicit if Path(explicit).is_file() else None) if explicit else shutil.which(command)
    if found is None:
        pytest.skip(
            f"{command} not found (neither ${env_var} nor `{command}` on PATH): "
            f"npm install -g {package}@{version}"
        )
    return found


class AgentProject:
    """A project whose ticket `TICKET_ID` is run by `tf-fsm` with a real agent CLI.
    Subclasses say which environment the agent needs (`agent_env`)."""

    project: Path
    dir: Path

    def agent_env(self) -> dict[str, str]:
        raise NotImplementedError

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, **self.agent_env(), "TF_FSM_ROOT": str(self.project), **extra}

    def tf(self, *args: str, timeout: float = 240, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tf_fsm", *args],
            cwd=self.project,
            env=self.env(**env),
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def state(self) -> dict[str, Any]:
        return json.loads((self.dir / "retry-state.json").read_text(encoding="utf-8"))

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        lines = (self.dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
        evs = [json.loads(line) for line in lines if line.strip()]
        return [e for e in evs if name is None or e["event"] == name]

    def status(self) -> dict[str, Any]:
        result = self.tf("status", TICKET_ID, "--json")
        assert result.returncode == 0, result.stderr
        row: dict[str, Any] = json.loads(result.stdout)
        return row
