"""`tf-fsm run TICKET --plan` names the quality-gate commands its verify phase would run, in
order, with their working directory, whether each is required (and blocks), its fix rounds,
and a gate that cannot start; and names none when the plan runs no verify phase. Real
processes; nothing is run."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from tests.conftest import run_cli, tk_ticket

AGENT = Path(__file__).resolve().parent / "fake_agent.py"
GATES = [
    {"name": "lint", "command": "ruff check . | tee lint.txt"},
    {"name": "tests", "command": ["sh", "-c", "exit 0"], "maxRetries": 2, "timeoutSeconds": 600},
    {"name": "docs", "command": "make docs", "required": False, "cwd": "docs"},
]


def no_report(index: int, name: str) -> str:
    """The warning of a required gate tf_fsm cannot judge test by test (docs/gates.md)."""
    return (
        f"workflow.qualityGates[{index}] ({name}) is required, has no junitXml and does not look "
        "like pytest, so tf_fsm cannot add a per-test report: a failure of it is never judged "
        "pre-existing, it blocks even when the gate fails on the base commit too; set its "
        "junitXml to the JUnit XML report its command writes "
        "(docs/gates.md#the-baseline-what-a-ticket-makes-worse)"
    )


def write_settings(project: Path, **workflow: Any) -> None:
    settings = {"workflow": workflow, "executor": {"kind": "scripted"}}
    (project / ".tf/config/settings.json").write_text(json.dumps(settings), encoding="utf-8")
    (project / ".tickets").mkdir(exist_ok=True)
    (project / ".tickets/pt-1.md").write_text(tk_ticket("pt-1"), encoding="utf-8")
    (project / "docs").mkdir(exist_ok=True)


def plan_json(*extra: str) -> dict[str, Any]:
    result = run_cli("run", "pt-1", "--plan", "--json", *extra)
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    return data


def test_plan_json_lists_the_gates_in_order(project: Path) -> None:
    write_settings(project, qualityGates=GATES)
    root = str(project.resolve())
    assert plan_json()["qualityGates"] == [
        {
            "name": "lint",
            "argv": ["bash", "-c", "ruff check . | tee lint.txt"],
            "cwd": root,
            "required": True,
            "blocks": True,
            "feedbackRounds": 3,
            "timeoutSeconds": 180,
            "cannotStart": None,
            "baselineWarning": no_report(0, "lint"),
        },
        {
            "name": "tests",
            "argv": ["sh", "-c", "exit 0"],
            "cwd": root,
            "required": True,
            "blocks": True,
            "feedbackRounds": 2,
            "timeoutSeconds": 600,
            "cannotStart": None,
            "baselineWarning": no_report(1, "tests"),
        },
        {
            "name": "docs",
            "argv": ["bash", "-c", "make docs"],
            "cwd": f"{root}/docs",
            "required": False,
            "blocks": False,
            "feedbackRounds": 0,  # only a failing required gate sends the fixer back
            "timeoutSeconds": 180,
            "cannotStart": None,
            "baselineWarning": None,  # optional: never blocks
        },
    ]


def test_plan_text_lists_the_gates(project: Path) -> None:
    write_settings(project, qualityGates=GATES)
    root = project.resolve()
    result = run_cli("run", "pt-1", "--plan")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    at = lines.index("quality gates, run by verify in this order (workflow.qualityGates):")
    assert lines[at + 1 : at + 6] == [
        f"  lint     required, up to 3 fix rounds; cwd {root}: "
        + shlex.join(["bash", "-c", "ruff check . | tee lint.txt"]),
        f"    warning: {no_report(0, 'lint')}",
        f"  tests    required, up to 2 fix rounds; cwd {root}: sh -c 'exit 0'",
        f"    warning: {no_report(1, 'tests')}",
        f"  docs     optional (reported, never blocks); cwd {root}/docs: bash -c 'make docs'",
    ]


def test_with_the_quality_gate_off_gates_are_reported_never_block(project: Path) -> None:
    write_settings(project, qualityGates=GATES[:1], enableQualityGate=False, failOn=[])
    (gate,) = plan_json()["qualityGates"]
    assert (gate["required"], gate["blocks"], gate["feedbackRounds"]) == (True, False, 0)
    text = run_cli("run", "pt-1", "--plan").stdout
    assert (
        "  lint     required (reported, never blocks: workflow.enableQualityGate is false)" in text
    )


def test_without_the_fixer_there_are_no_fix_rounds(project: Path) -> None:
    write_settings(project, qualityGates=GATES[:1], enableFixer=False)
    (gate,) = plan_json()["qualityGates"]
    assert (gate["blocks"], gate["feedbackRounds"]) == (True, 0)
    assert "  lint     required, no fix rounds; cwd" in run_cli("run", "pt-1", "--plan").stdout


def test_a_gate_that_cannot_start_is_named(project: Path) -> None:
    write_settings(project, qualityGates=[{"name": "x", "command": "true", "cwd": "nope"}])
    (gate,) = plan_json()["qualityGates"]
    missing = project.resolve() / "nope"
    assert gate["cannotStart"] == f"its cwd {missing} does not exist"
    text = run_cli("run", "pt-1", "--plan").stdout
    assert f"    cannot start: its cwd {missing} does not exist (run exits 2)" in text


def test_no_gates_configured_lists_none(project: Path) -> None:
    write_settings(project)
    assert "qualityGates" not in plan_json()
    assert "quality gates" not in run_cli("run", "pt-1", "--plan").stdout


def test_no_attempt_no_gates(project: Path) -> None:
    write_settings(project, qualityGates=GATES[:1], escalation={"maxRetries": 0})
    data = plan_json()
    assert data["action"] == "exhausted" and "qualityGates" not in data


def test_a_resume_past_verify_lists_no_gates(project: Path) -> None:
    """The closer crashes: the attempt is resumed at close, its verify phase is done."""
    plan = project.parent / "plan.json"
    plan.write_text(json.dumps({"crash": [{"phase": "close", "exitCode": 3}]}), encoding="utf-8")
    agent = f"FAKE_AGENT_PLAN={shlex.quote(str(plan))} exec {sys.executable} {AGENT}"
    settings = {
        "workflow": {
            "enableResearcher": False,
            "enableReviewers": ["reviewer-general"],
            "qualityGates": [{"name": "ok", "command": "true"}],
        },
        "executor": {"kind": "command", "command": ["/bin/sh", "-c", agent], "maxRestarts": 0},
    }
    (project / ".tf/config/settings.json").write_text(json.dumps(settings), encoding="utf-8")
    (project / ".tickets").mkdir()
    (project / ".tickets/pt-1.md").write_text(tk_ticket("pt-1"), encoding="utf-8")
    assert run_cli("run", "pt-1").returncode == 5
    data = plan_json()
    assert data["action"] == "resume" and [p["phase"] for p in data["phases"]] == ["close"]
    assert "qualityGates" not in data
