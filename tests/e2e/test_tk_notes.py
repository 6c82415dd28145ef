"""End-to-end: the notes tf_fsm writes into tk ticket files name the ticket's files relative
to the project root, never by this machine's absolute path: tk files are committed (with the
merge, in a workspace) and shared. Real `tf-fsm run` processes, the fake agent, real git."""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.workspace_project import Project

NEVER = {"id": "N", "severity": "Major", "text": "`a.py:2` - never fixed", "fixedBy": []}
STORE = ".tf/knowledge/tickets/pt-1"


def test_the_close_note_committed_with_the_merge_names_the_artifacts_relative(
    proj: Project,
) -> None:
    proj.create(["pt-1"], {"workspace": {"mode": "worktree"}})
    proj.plan(edits=[{"phase": "implement", "file": "a.txt"}])
    done = proj.cli("run", "pt-1")
    assert done.returncode == 0, done.stdout + done.stderr
    committed = proj.show("main:.tickets/pt-1.md")
    assert "quality gate passed; " in committed
    assert f". Artifacts: {STORE}\n" in committed
    assert str(proj.root) not in committed
    assert (proj.root / ".tickets" / "pt-1.md").read_text() == committed.rstrip("\n") + "\n"


@pytest.mark.parametrize(
    ("escalation", "note"),
    [
        ({"maxRetries": 1, "sameFailure": "off"}, "blocked after 1 attempts (max retries 1)"),
        ({"maxRetries": 5, "sameFailure": "stop"}, "needs a human: the same failure twice"),
    ],
)
def test_the_notes_of_a_ticket_that_stops_name_its_close_summary_relative(
    proj: Project, escalation: dict[str, Any], note: str
) -> None:
    proj.create(["pt-1"], {"workflow": {"escalation": escalation}}, repository=False)
    proj.plan(findings=[{**NEVER, "reviewer": "reviewer-general"}])
    done = proj.cli("run", "pt-1")
    assert done.returncode == 4, done.stdout + done.stderr
    text = (proj.root / ".tickets" / "pt-1.md").read_text()
    line = next(ln for ln in text.splitlines() if note in ln)
    assert line.endswith(f"; see {STORE}/close-summary.md"), line
    assert str(proj.root) not in text
