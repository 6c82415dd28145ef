"""End-to-end: what `run --plan`, `status` and the board's row say of a ticket whose merge was
refused (a conflict) and of the verify reviewers (docs/prompts.md, "tf-fsm run TICKET
--plan"): where a run would really pick up, once and the same way, and which agents run only
sometimes. Real `tf-fsm` processes, the fake agent, a real git repository."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e.workspace_project import Project

MERGE_LEFT = "every phase completed; only the merge is left, no phase runs again"


def conflicted(proj: Project) -> str:
    """Two tickets writing the same lines side by side: one merges, the other's merge is
    refused; the loser's id."""
    proj.create(["pt-1", "pt-2"], {"workflow": {"enableCloser": True}}, files={"shared.txt": "0\n"})
    proj.plan(
        edits=[{"phase": "implement", "file": "shared.txt", "text": "{ticket}", "mode": "write"}],
        pause=[{"phase": "implement", "seconds": 0.3}],
    )
    assert proj.cli("ralph", "--workers", "2").returncode == 0
    (loser,) = [t for t, row in proj.status_json().items() if row["state"] == "error"]
    return loser


def test_a_conflicted_ticket_resumes_at_its_merge_as_plan_and_status_say(proj: Project) -> None:
    loser = conflicted(proj)
    text = proj.cli("run", loser, "--plan")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert lines[0] == f"{loser}: resume: attempt 1 is error: resumes at merge ({MERGE_LEFT})"
    assert [ln.split()[:2] for ln in lines if ln.startswith("  run ")] == [["run", "merge"]]
    assert "closer" not in text.stdout and "close " not in text.stdout
    plan = json.loads(proj.cli("run", loser, "--plan", "--json").stdout)
    assert [(p["phase"], p["runs"], p["invocations"]) for p in plan["phases"]] == [
        ("merge", True, [])
    ]

    row = proj.status_json()[loser]
    assert row["next"] == f"resume attempt 1 at merge: {MERGE_LEFT}"
    assert row["phase"] == "merge" and row["failureClass"] == "merge_conflict"
    status = proj.cli("status", loser)
    assert "at close" not in status.stdout

    # and so it is: the run runs no phase, only an agent's second resolution of the conflict
    # (which the fake agent cannot do), and the merge is refused again
    calls = len(proj.calls())
    again = proj.cli("run", loser)
    assert again.returncode == 5, again.stdout + again.stderr
    assert f"resuming attempt 1 at merge: {MERGE_LEFT}" in again.stderr
    assert [c["phase"] for c in proj.calls()[calls:]] == ["resolve"]


def verify_of(proj: Project, settings: dict[str, Any]) -> dict[str, Any]:
    proj.create(["pt-1"], settings, repository=False)
    done = proj.cli("run", "pt-1", "--plan", "--json")
    assert done.returncode == 0, done.stderr
    (verify,) = [p for p in json.loads(done.stdout)["phases"] if p["phase"] == "verify"]
    return verify


def test_the_verify_reviewers_are_planned_as_running_only_after_a_fix(proj: Project) -> None:
    verify = verify_of(proj, {})
    assert verify["runs"] is True
    assert "its reviewers re-review only after a fix" in verify["reason"]
    assert [(c["role"], c["when"]) for c in verify["invocations"]] == [
        ("reviewer-general", "only after a fix")
    ]
    text = proj.cli("run", "pt-1", "--plan").stdout
    assert "tf-verify.md.j2 [packaged]" in text and text.count("(only after a fix)") == 1


@pytest.mark.parametrize(
    ("workflow", "why"),
    [
        ({"postFixVerification": "fixes"}, "the post-fix counts are review.md's minus fixes.md's"),
        ({"enableFixer": False}, "without a fix the post-fix counts are review.md's"),
    ],
)
def test_verify_lists_no_reviewer_when_none_would_run(
    proj: Project, workflow: dict[str, Any], why: str
) -> None:
    verify = verify_of(proj, {"workflow": workflow})
    assert verify["invocations"] == []
    assert f"no reviewer runs: {why}" in verify["reason"]
