"""End-to-end: a required gate without `junitXml` is never pre-existing as a whole (docs/gates.md,
"The baseline"). Real git repositories, real pytest suites with a test already failing on the
base commit, real `tf-fsm` processes and real agent processes: a pytest gate is judged test by
test from the report tf_fsm asks pytest for (outside the tree), in verify, in the merge queue's
re-run after a rebase and in `tf-fsm gate --run`; any other failing gate blocks, even when it
fails on the base too, and says how to add a report.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.workspace_project import Project, worktree_of
from tests.gitrepo import git, status

#: the projects' pytest gates start without this venv's plugins (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("plain_pytest")

#: the project's suite: one test broken before any ticket, one a ticket can break, and one
#: that breaks only when a.py and b.py are both raised (each alone is fine)
SUITE = """\
from pathlib import Path

from a import A
from b import B


def test_broken_before_any_ticket():
    assert False, "broken on the base commit"


def test_parser_depth():
    assert not Path("parser-broken.txt").exists(), "the parser no longer limits depth"


def test_limits_together():
    assert A + B <= 3, "a.py and b.py together exceed the limit"
"""
PYTEST = f"{shlex.quote(sys.executable)} -m pytest -q -p no:cacheprovider"
#: a pytest gate as many projects write it: a command line, no junitXml
PYTEST_GATE = {"name": "tests", "command": f"{PYTEST} suite", "timeoutSeconds": 120}
BROKEN_ON_BASE = "suite.test_suite::test_broken_before_any_ticket"
BROKEN_BY_TICKET = "suite.test_suite::test_parser_depth"
BROKEN_TOGETHER = "suite.test_suite::test_limits_together"
HINT = "docs/gates.md#the-baseline-what-a-ticket-makes-worse"


def make(proj: Project, gate: dict[str, Any], tickets: tuple[str, ...] = ("pt-1", "pt-2")) -> None:
    files = {
        "suite/__init__.py": "",
        "suite/test_suite.py": SUITE,
        "a.py": "A = 1\n",
        "b.py": "B = 1\n",
        ".gitignore": "__pycache__/\n",  # pytest's byproduct, the project's to ignore
    }
    settings = {
        "workflow": {"qualityGates": [gate], "qualityGateMaxRetries": 1},
        "workspace": {"mode": "worktree"},
    }
    proj.create(list(tickets), settings, files)
    proj.plan(
        edits=[
            {"phase": "implement", "file": "{ticket}.txt", "text": "done by {ticket}"},
            {"phase": "implement", "ticket": "pt-2", "file": "parser-broken.txt"},
        ]
    )


def verification(proj: Project, tid: str) -> dict[str, Any]:
    path = proj.root / ".tf" / "knowledge" / "tickets" / tid / "post-fix-verification.json"
    report: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return next(g for g in report["gates"] if g["name"] == "tests")


def reports_left(temp: Path) -> list[str]:
    return sorted(p.name for p in temp.iterdir() if p.name.startswith("tf-fsm-report-"))


def xml_files(proj: Project, ref: str = "main") -> list[str]:
    committed = git(proj.root, "ls-tree", "-r", "--name-only", ref).splitlines()
    on_disk = [str(p.relative_to(proj.root)) for p in proj.root.rglob("*.xml")]
    return [n for n in committed if n.endswith(".xml")] + on_disk


def test_a_pytest_gate_without_junitxml_is_judged_test_by_test(
    proj: Project, temp_dir: Path
) -> None:
    make(proj, PYTEST_GATE)
    blocked = proj.cli("run", "pt-2")
    assert blocked.returncode == 4, blocked.stdout + blocked.stderr  # blocked on every attempt
    assert f"failing only here: {BROKEN_BY_TICKET}" in blocked.stderr
    gate = verification(proj, "pt-2")
    assert (gate["preexisting"], gate["newFailures"]) == (False, [BROKEN_BY_TICKET])
    assert BROKEN_ON_BASE not in gate["baselineNote"]
    assert proj.tk_status("pt-2") != "closed"
    assert [r for r in proj.first_parent() if r["ticket"] == "pt-2"] == []

    done = proj.cli("run", "pt-1")  # touches nothing else: the old failure blocks nobody
    assert done.returncode == 0, done.stdout + done.stderr
    assert [e["attempt"] for e in proj.events("pt-1", "AttemptStarted")] == [1]
    gate = verification(proj, "pt-1")
    assert (gate["preexisting"], gate["newFailures"]) == (True, [])
    assert gate["baselineNote"].startswith("all 1 test failed on the base commit ")
    assert gate["baselineNote"].endswith(f" too: {BROKEN_ON_BASE}")
    assert proj.tk_status("pt-1", "main") == "closed"
    assert proj.show("main:pt-1.txt").strip() == "done by pt-1"
    # the reports were never in a tree, and are gone
    assert xml_files(proj) == [] and xml_files(proj, "tf/pt-2") == []
    assert status(proj.root) == "M .tickets/pt-2.md"  # blocked pt-2's tk notes, nothing else
    assert reports_left(temp_dir) == []


def test_the_merge_queue_s_rerun_judges_test_by_test(proj: Project, temp_dir: Path) -> None:
    """pt-1 raises A; while it runs, a person raises B on main. Each alone passes the suite
    (but for the old failure); after the rebase, both together break another test."""
    make(proj, PYTEST_GATE, tickets=("pt-1",))
    proj.plan(
        edits=[{"phase": "implement", "file": "a.py", "text": "A = 2", "mode": "write"}],
        pause=proj.review_pause(),
    )
    run = proj.run_while_a_person_commits("pt-1", "b.py", "B = 2\n", "a person raises B", 120)
    assert run.returncode == 5, proj.status_json()["pt-1"]

    gate = verification(proj, "pt-1")  # verify, before the rebase: nothing made worse
    assert gate["preexisting"] is True and BROKEN_ON_BASE in gate["baselineNote"]
    after = [
        g
        for g in proj.events("pt-1", "GateEvaluated")
        if (g["reason"] or "").startswith("after the rebase: ")
    ]
    assert [(g["name"], g["passed"]) for g in after] == [("tests", False)]
    assert after[0]["reason"] == (
        f"after the rebase: exit code 1, failing only here: {BROKEN_TOGETHER}"
    )
    (refused,) = proj.events("pt-1", "MergeRefused")
    assert refused["failureClass"] == "merge_conflict"
    assert "gate tests fails" in refused["reason"]
    row = proj.status_json()["pt-1"]
    assert row["failureClass"] == "merge_conflict", row
    # the regression did not reach the base branch
    assert [c["subject"] for c in proj.first_parent()] == ["a person raises B", "initial"]
    assert proj.show("main:a.py") == "A = 1\n"
    assert proj.tk_status("pt-1", "main") == "open"
    assert proj.show("tf/pt-1:a.py") == "A = 2\n"  # the ticket's work is kept on its branch
    assert xml_files(proj, "tf/pt-1") == [] and reports_left(temp_dir) == []
    assert not (worktree_of(proj, "pt-1") / "report.xml").exists()


def test_a_failing_gate_without_a_report_blocks_even_when_the_base_fails_too(
    proj: Project, temp_dir: Path
) -> None:
    make(proj, {"name": "tests", "command": ["bash", "-c", "exit 1"]}, tickets=("pt-1",))
    done = proj.cli("run", "pt-1")
    assert done.returncode == 4, done.stdout + done.stderr
    gate = verification(proj, "pt-1")
    assert (gate["preexisting"], gate["blocking"]) == (False, True)
    note = gate["baselineNote"]
    assert note.startswith("it fails on the base commit ") and "too (exit code 1)" in note
    assert "neither run wrote a JUnit report" in note
    assert note.endswith(
        f"set the gate's junitXml to the JUnit XML report its command writes ({HINT})"
    )
    assert proj.calls(ticket="pt-1", phase="fix"), "the failing gate sent the fixer back"
    assert proj.tk_status("pt-1") != "closed"
    assert [r for r in proj.first_parent() if r["ticket"] == "pt-1"] == []
    verify = (proj.root / ".tf/knowledge/tickets/pt-1/post-fix-verification.md").read_text()
    assert "BLOCKING" in verify and "junitXml" in verify
    # turned off for this gate: it is reported, and blocks nothing
    proj.settings(
        {
            "workflow": {
                "qualityGates": [
                    {"name": "tests", "command": ["bash", "-c", "exit 1"], "required": False}
                ]
            },
            "workspace": {"mode": "worktree"},
        }
    )
    done = proj.cli("run", "pt-1", "--retry-reset")
    assert done.returncode == 0, done.stdout + done.stderr
    assert proj.tk_status("pt-1", "main") == "closed"


def test_gate_run_judges_test_by_test_and_blocks_what_it_cannot(
    proj: Project, temp_dir: Path
) -> None:
    make(proj, PYTEST_GATE, tickets=("pt-1",))
    clean = proj.cli("gate", "pt-1", "--run", "--json")
    assert clean.returncode == 0, clean.stdout + clean.stderr
    row = json.loads(clean.stdout)
    assert row["preexisting"] is True and BROKEN_ON_BASE in row["baselineNote"]
    (proj.root / "parser-broken.txt").write_text("x\n")  # an uncommitted change breaks a test
    worse = proj.cli("gate", "pt-1", "--run", "--json")
    assert worse.returncode == 3, worse.stdout + worse.stderr
    row = json.loads(worse.stdout)
    assert (row["preexisting"], row["newFailures"]) == (False, [BROKEN_BY_TICKET])
    (proj.root / "parser-broken.txt").unlink()

    # pytest with its own --junitxml on the command line: tf_fsm's report is not written
    own = {"name": "tests", "command": f"{PYTEST} --junitxml=own.xml suite"}
    proj.settings({"workflow": {"qualityGates": [own]}, "workspace": {"mode": "worktree"}})
    done = proj.cli("gate", "pt-1", "--run")
    assert done.returncode == 3, done.stdout + done.stderr
    (base_line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("    base: ")]
    assert "neither run wrote a JUnit report" in base_line
    assert "a --junitxml on the command line wins over that" in base_line and HINT in base_line
    # named in junitXml, the same report judges test by test again
    proj.settings(
        {
            "workflow": {"qualityGates": [{**own, "junitXml": "own.xml"}]},
            "workspace": {"mode": "worktree"},
        }
    )
    assert proj.cli("gate", "pt-1", "--run").returncode == 0
    assert reports_left(temp_dir) == []
