"""End-to-end: the gate baseline in worktree mode (docs/gates.md, "The baseline"). A test
suite with a test already failing on the base commit, a real pytest as the required gate with
its JUnit report, real `tf-fsm run --worktree` processes and real agent processes: a ticket
that makes nothing worse closes on its first attempt, and a ticket that breaks another test is
blocked by that test alone.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from tests.e2e.workspace_project import Project
from tests.gitrepo import status

#: the projects' pytest gates start without this venv's plugins (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("plain_pytest")

#: the project's test suite: one test broken before any ticket, one a ticket can break
SUITE = """\
from pathlib import Path


def test_broken_before_any_ticket():
    assert False, "broken on the base commit"


def test_parser_depth():
    assert not Path("parser-broken.txt").exists(), "the parser no longer limits depth"
"""
#: the gate's report and pytest's byproducts are the project's to ignore, as in any project
IGNORED = "report.xml\n__pycache__/\n"
GATE = {
    "name": "tests",
    "command": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "--junitxml=report.xml", "suite"],
    "junitXml": "report.xml",
    "timeoutSeconds": 120,
}  # fmt: skip
SETTINGS: dict[str, Any] = {
    "workflow": {"qualityGates": [GATE], "qualityGateMaxRetries": 1},
    "workspace": {"mode": "worktree"},
}
BROKEN_ON_BASE = "suite.test_suite::test_broken_before_any_ticket"
BROKEN_BY_TICKET = "suite.test_suite::test_parser_depth"


def verification(proj: Project, tid: str) -> dict[str, Any]:
    path = proj.root / ".tf" / "knowledge" / "tickets" / tid / "post-fix-verification.json"
    report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return next(g for g in report["gates"] if g["name"] == "tests")


def make(proj: Project) -> None:
    files = {"suite/test_suite.py": SUITE, "suite/__init__.py": "", ".gitignore": IGNORED}
    proj.create(["pt-1", "pt-2"], SETTINGS, files)
    proj.plan(
        edits=[
            {"phase": "implement", "file": "{ticket}.txt", "text": "done by {ticket}"},
            {"phase": "implement", "ticket": "pt-2", "file": "parser-broken.txt"},
        ]
    )


def test_a_ticket_that_makes_nothing_worse_closes_on_its_first_attempt(proj: Project) -> None:
    make(proj)
    done = proj.cli("run", "pt-1")
    assert done.returncode == 0, done.stdout + done.stderr
    gate = verification(proj, "pt-1")
    assert gate["preexisting"] is True and gate["newFailures"] == []
    assert "base" in gate["baselineNote"] and BROKEN_ON_BASE in gate["baselineNote"]
    assert [e["attempt"] for e in proj.events("pt-1", "AttemptStarted")] == [1]
    assert proj.tk_status("pt-1", "main") == "closed"
    assert [r["ticket"] for r in proj.first_parent() if r["ticket"]] == ["pt-1"]
    assert proj.show("main:pt-1.txt").strip() == "done by pt-1"
    row = proj.status_json()["pt-1"]
    assert row["status"] == "closed" and row["attempt"] == 1
    assert status(proj.root) == ""
    # what the baseline changes: the same gate judged alone calls the old failure a block
    done = proj.cli("gate", "pt-1", "--run", "--no-baseline", "--json")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    tests = next(r for r in rows if r.get("name") == "tests")
    assert tests["passed"] is False and not tests.get("preexisting")


def test_a_ticket_breaking_another_test_is_blocked_by_that_test_alone(proj: Project) -> None:
    make(proj)
    done = proj.cli("run", "pt-2")
    assert done.returncode == 4, done.stdout + done.stderr  # blocked on every attempt
    assert f"failing only here: {BROKEN_BY_TICKET}" in done.stderr
    assert BROKEN_ON_BASE not in done.stderr
    gate = verification(proj, "pt-2")
    assert gate["preexisting"] is False
    assert gate["newFailures"] == [BROKEN_BY_TICKET]
    assert proj.calls(ticket="pt-2", phase="fix"), "the failing gate sent the fixer back"
    assert proj.status_json()["pt-2"]["status"] != "closed"
    verify = (proj.root / ".tf/knowledge/tickets/pt-2/post-fix-verification.md").read_text()
    assert "not fail on the base commit" in verify and BROKEN_BY_TICKET in verify
    new_line = next(ln for ln in verify.splitlines() if "did not fail on the base" in ln)
    assert BROKEN_ON_BASE not in new_line
    assert proj.tk_status("pt-2") != "closed"
    assert [r for r in proj.first_parent() if r["ticket"] == "pt-2"] == []
    # the other ticket is not held up by it: the pre-existing failure blocks nobody; the
    # base commit's gate run is the one pt-2 cached (the same base commit: run once)
    cache = sorted((proj.root / ".tf" / "ralph" / "baseline").glob("*.json"))
    assert len(cache) == 1, cache
    done = proj.cli("run", "pt-1")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [e["attempt"] for e in proj.events("pt-1", "AttemptStarted")] == [1]
    assert "baseline: running" not in done.stderr  # cached from pt-2's run
    assert sorted((proj.root / ".tf" / "ralph" / "baseline").glob("*.json")) == cache
