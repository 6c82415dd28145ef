"""End-to-end: `tf-fsm diagram --ticket` and `status` after the merge queue rebased a ticket's
branch (docs/workspaces.md, "What status, diagram and --plan show"): its checkpoints are named
by the commits they became, which are on the base branch, never by the ones the rebase left on
no branch; and a required gate that failed as it fails on the base commit is said to be
pre-existing. Two tickets side by side (real `tf-fsm ralph`), the fake agent, real pytest as
the gate, a real git repository."""

from __future__ import annotations

import re

from tests.e2e.test_workspace_baseline import GATE, IGNORED, SUITE
from tests.e2e.workspace_project import Project
from tests.gitrepo import git


def on_main(proj: Project, sha: str) -> bool:
    return git(proj.root, "branch", "--contains", sha, "--format=%(refname:short)") == "main"


def test_a_rebased_tickets_checkpoints_are_shown_by_the_commits_on_the_base(
    proj: Project,
) -> None:
    files = {"suite/test_suite.py": SUITE, "suite/__init__.py": "", ".gitignore": IGNORED}
    settings = {"workflow": {"qualityGates": [GATE], "qualityGateMaxRetries": 0}}
    proj.create(["pt-1", "pt-2"], settings, files)
    proj.plan(
        edits=[{"phase": "implement", "file": "{ticket}.txt", "text": "by {ticket}"}],
        pause=[{"phase": "implement", "seconds": 0.5}],
    )
    done = proj.cli("ralph", "--workers", "2")
    assert done.returncode == 0, done.stdout + done.stderr
    (second,) = [t for t in ("pt-1", "pt-2") if proj.events(t, "MergeRebased")]
    (made,) = proj.events(second, "CheckpointCommitted")
    assert not on_main(proj, made["sha"])  # the commit made before the rebase: on no branch
    (became,) = [
        c["sha"] for c in proj.log_of("main") if (c["ticket"], c["phase"]) == (second, "implement")
    ]  # the checkpoint as the rebase made it, on main

    diagram = proj.cli("diagram", "--ticket", second, "-o", "-")
    assert diagram.returncode == 0, diagram.stderr
    shown = re.findall(r"checkpoint ([0-9a-f]{8})", diagram.stdout)
    assert shown == [became[:8]], diagram.stdout
    assert f"checkpoint {became[:8]} (rebased)" in diagram.stdout
    assert made["sha"][:8] not in diagram.stdout
    # the gate failed on the success path as it fails on the base: said so
    gate_notes = re.findall(r"gate tests [^<\n]*", diagram.stdout)
    assert gate_notes and all("pre-existing on the base, not blocking" in n for n in gate_notes)

    row = proj.status_json()[second]
    assert [c["sha"] for c in row["workspace"]["checkpoints"]] == [became]
    assert f"implement {became[:8]}" in proj.cli("status", second).stdout
    (rebased,) = proj.events(second, "MergeRebased")
    assert rebased["checkpoints"] == {made["sha"]: became}  # journaled with the rebase
