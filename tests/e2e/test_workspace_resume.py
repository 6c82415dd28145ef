"""End-to-end: an attempt killed in its first phase resumes in its worktree, from the commit
it started from (docs/workspaces.md, "Recovery"): a real `tf-fsm run` SIGKILLed by its agent,
then run again.
"""

from __future__ import annotations

import json

from tests.e2e.workspace_project import Project
from tests.gitrepo import git


def test_an_attempt_killed_in_its_first_phase_resumes_in_its_worktree(proj: Project) -> None:
    proj.create(["pt-1"], {"workspace": {"mode": "worktree"}})
    base = git(proj.root, "rev-parse", "main")
    proj.plan(killParent={"call": 1}, edits=[{"phase": "implement", "file": "a.txt"}])
    killed = proj.cli("run", "pt-1")
    assert killed.returncode != 0, killed.stderr
    done = proj.cli("run", "pt-1")
    assert done.returncode == 0, done.stdout + done.stderr
    starts = proj.events("pt-1", "AttemptStarted")
    assert [(s["attempt"], s["head"]) for s in starts] == [(1, base)]
    assert [e["phase"] for e in proj.events("pt-1", "AttemptResumed")] == ["implement"]
    assert proj.tk_status("pt-1", "main") == "closed"
    assert proj.show("main:a.txt").strip() != ""
    proj.assert_nothing_left()


def test_an_attempt_whose_start_never_reached_the_journal_journals_it_on_resume(
    proj: Project,
) -> None:
    """Killed after retry-state.json saved the attempt and before its first events were
    flushed: the journal ends before `AttemptStarted`. The resume journals it, with the
    commit the attempt started from."""
    proj.create(["pt-1"], {"workspace": {"mode": "worktree"}})
    base = git(proj.root, "rev-parse", "main")
    proj.plan(killParent={"call": 1}, edits=[{"phase": "implement", "file": "a.txt"}])
    assert proj.cli("run", "pt-1").returncode != 0
    journal = proj.root / ".tf" / "knowledge" / "tickets" / "pt-1" / "events.jsonl"
    lines = journal.read_text(encoding="utf-8").splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if json.loads(ln)["event"] == "AttemptStarted")
    journal.write_text("".join(lines[:start]), encoding="utf-8")
    done = proj.cli("run", "pt-1")
    assert done.returncode == 0, done.stdout + done.stderr
    starts = proj.events("pt-1", "AttemptStarted")
    assert [(s["attempt"], s["head"]) for s in starts] == [(1, base)]
    assert proj.tk_status("pt-1", "main") == "closed"
