"""A required gate tf_fsm cannot judge test by test (no `junitXml`, and its command does not
look like pytest) is named by `tf-fsm settings`, `tf-fsm doctor` and `tf-fsm run --plan`, text
and --json: one line saying what happens (a failure is never judged pre-existing) and how to fix
it (docs/gates.md, "The baseline"). Real processes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, tk_ticket
from tests.test_plan_gates import no_report

GATES: list[dict[str, Any]] = [
    {"name": "unit", "command": "python -m pytest -q"},  # pytest: tf_fsm adds a report
    {"name": "check", "command": "make check"},  # warned
    {"name": "lint", "command": ["ruff", "check"], "required": False},  # never blocks
    {"name": "go", "command": "go test ./... | go-junit-report > r.xml", "junitXml": "r.xml"},
    {"name": "fail", "command": ["bash", "-c", "exit 1"]},  # warned
]
WARNED = [no_report(1, "check"), no_report(4, "fail")]


def configure(project: Path, **workflow: Any) -> None:
    settings = {"workflow": {"qualityGates": GATES, **workflow}, "executor": {"kind": "scripted"}}
    (project / ".tf/config/settings.json").write_text(json.dumps(settings), encoding="utf-8")
    (project / ".tickets").mkdir(exist_ok=True)
    (project / ".tickets/pt-1.md").write_text(tk_ticket("pt-1"), encoding="utf-8")


def ok(*args: str) -> tuple[str, str]:
    done = run_cli(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout, done.stderr


def test_settings_warns_about_each_gate_without_a_report(project: Path) -> None:
    configure(project)
    _, err = ok("settings")
    assert [ln for ln in err.splitlines() if "junitXml" in ln] == [f"warning: {w}" for w in WARNED]
    out, _ = ok("settings", "--json")
    assert [w for w in json.loads(out)["warnings"] if "junitXml" in w] == WARNED


def test_doctor_warns_about_each_gate_without_a_report(project: Path) -> None:
    configure(project)
    out, _ = ok("doctor")
    assert [ln for ln in out.splitlines() if ln.startswith("warning:")] == [
        f"warning: {w}" for w in WARNED
    ]
    out, _ = ok("doctor", "--json")
    assert json.loads(out)["warnings"] == WARNED


def test_plan_warns_under_each_gate_without_a_report(project: Path) -> None:
    configure(project)
    out, _ = ok("run", "pt-1", "--plan", "--json")
    found = [g["baselineWarning"] for g in json.loads(out)["qualityGates"]]
    assert found == [None, WARNED[0], None, None, WARNED[1]]
    out, _ = ok("run", "pt-1", "--plan")
    lines = out.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("  check "))
    assert lines[at + 1] == f"    warning: {WARNED[0]}"
    assert sum(ln.startswith("    warning: ") for ln in lines) == 2


@pytest.mark.parametrize(
    "off",
    [
        {"enableQualityGate": False, "failOn": ["Critical"]},
        {"qualityGates": GATES[:1] + GATES[2:4]},
    ],
    ids=["gates never block", "no such gate"],
)
def test_nothing_is_warned_when_no_failure_could_be_judged_whole(
    project: Path, off: dict[str, Any]
) -> None:
    configure(project, **off)
    for args in (("settings",), ("doctor",), ("run", "pt-1", "--plan")):
        out, err = ok(*args)
        assert "junitXml" not in out + err, args
    out, _ = ok("doctor", "--json")
    assert json.loads(out)["warnings"] == []
