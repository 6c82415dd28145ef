"""The demo the README's quick start runs: `tf-fsm demo` in a new directory, its output shown
(the lifecycle of one ticket on the bundled offline agent), then checked: attempt 1 is blocked
by a Major finding the base fixer cannot clear, attempt 2 escalates the fixer and closes.

    .venv/bin/python -m pytest tests/test_demo.py
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.test_cli_commands import STRONG, ticket_dir


def test_demo_blocks_then_closes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    where = tmp_path / "project"
    result = run_cli("demo", "--dir", str(where), env={"TF_FSM_ROOT": ""})
    with capsys.disabled():  # the README's demo command shows the lifecycle, then the verdict
        print(f"\n{result.stdout}{result.stderr}", end="")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    first = [ln for ln in lines if ln.startswith("attempt 1 ")]
    second = [ln for ln in lines if ln.startswith("attempt 2 ")]
    assert len(first) == len(second) == 1
    assert re.match(r"attempt 1 \(initial\): BLOCKED\b", first[0])
    assert "post-fix findings: Major 1" in first[0]
    assert re.match(r"attempt 2 \(quality_gate\): CLOSED\b", second[0])
    assert "escalated: fixer" in second[0]
    assert not any(ln.startswith("attempt 3 ") for ln in lines)
    assert f"the demo project is in {where.resolve()}" in result.stdout

    state = json.loads((ticket_dir(where, "demo-1") / "retry-state.json").read_text("utf-8"))
    attempts = state["attempts"]
    assert [(a["attemptNumber"], a["status"], a["trigger"]) for a in attempts] == [
        (1, "blocked", "initial"),
        (2, "closed", "quality_gate"),
    ]
    assert attempts[0]["escalation"]["fixer"] is None
    assert attempts[1]["escalation"]["fixer"] == STRONG
    assert attempts[0]["qualityGate"]["counts"]["Major"] == 1
    assert attempts[1]["qualityGate"]["counts"]["Major"] == 0
    assert state["status"] == "closed"
    assert state["retryCount"] == 0
    ticket = (where / ".tickets" / "demo-1.md").read_text(encoding="utf-8")
    assert "\nstatus: closed\n" in ticket
    assert "\n## Notes\n" in ticket
