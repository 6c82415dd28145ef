"""End-to-end: the loop keeps apart tickets whose branches are known to change the same files
(docs/workspaces.md, "Fewer conflicts to begin with"), with real `tf-fsm ralph` processes, the
fake agent and real git repositories.

The backlog: pt-1 and pt-2 both edit `shared.txt`, in different lines on their first attempt
(which a Major finding blocks), then the same line on their second (when the escalated fixer
clears the finding). Side by side, their second attempts change that line from the same
text, and the second merge conflicts. Kept apart, pt-2's second attempt starts after pt-1
merged, on main's tip, and changes the line as pt-1 left it: no conflict.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.e2e.workspace_project import STRONG, Project, overlapping

#: git conflicts on changes to adjacent lines: one unchanged line keeps them apart
SHARED = "top\n-\nmiddle\n-\nbottom\n"


def overlap_plan() -> dict[str, Any]:
    """The fake agent's plan (benchmarks/bench_conflicts.py runs the same backlog)."""
    major = {
        "severity": "Major",
        "text": "`shared.txt:3` - the middle is wrong",
        "reviewer": "reviewer-general",
        "fixedBy": [STRONG],
        "id": "f1",
    }
    return {
        "findings": [major],
        "edits": [
            {
                "phase": "implement",
                "attempt": 1,
                "ticket": "pt-1",
                "file": "shared.txt",
                "mode": "sub",
                "pattern": "^top$",
                "text": "top by pt-1",
            },
            {
                "phase": "implement",
                "attempt": 1,
                "ticket": "pt-2",
                "file": "shared.txt",
                "mode": "sub",
                "pattern": "^bottom$",
                "text": "bottom by pt-2",
            },
            {
                "phase": "fix",
                "attempt": 2,
                "file": "shared.txt",
                "mode": "sub",
                "pattern": "^(middle.*)$",
                "text": "\\1, fixed by {ticket}",
            },
        ],
        "pause": [
            {"phase": "fix", "attempt": 2, "seconds": 0.5},
            {"phase": "implement", "attempt": 1, "seconds": 0.3},
        ],
    }


def meeting(proj: Project) -> list[dict[str, Any]]:
    """Pause rules that hold each ticket's second fix until the other's has begun: the two
    second attempts then run side by side on any machine, however slow (a fixed pause would
    let one finish first under load)."""
    return [
        {
            "phase": "fix",
            "attempt": 2,
            "ticket": ticket,
            "touch": str(proj.sync / f"{ticket}-fix"),
            "until": str(proj.sync / f"{other}-fix"),
        }
        for ticket, other in (("pt-1", "pt-2"), ("pt-2", "pt-1"))
    ]


def run_backlog(proj: Project, avoid: bool) -> dict[str, Any]:
    settings = {"workspace": {"mode": "worktree", "conflicts": {"avoidOverlap": avoid}}}
    proj.create(["pt-1", "pt-2"], settings, files={"shared.txt": SHARED})
    plan = overlap_plan()
    if not avoid:  # kept apart, the two would wait for each other in vain
        plan["pause"] = [*meeting(proj), *plan["pause"][1:]]
    proj.plan(**plan)
    done = proj.cli("ralph", "--workers", "2")
    assert done.returncode == 0, done.stderr
    return {"stderr": done.stderr, "rows": proj.status_json()}


@pytest.mark.parametrize("avoid", [True, False])
def test_tickets_known_to_change_the_same_file_do_not_run_side_by_side(
    proj: Project, avoid: bool
) -> None:
    ran = run_backlog(proj, avoid)

    refused = proj.events("pt-1", "MergeRefused") + proj.events("pt-2", "MergeRefused")
    resolutions = proj.events("pt-1", "ResolutionStarted") + proj.events(
        "pt-2", "ResolutionStarted"
    )
    second = [s for s in proj.spans() if s["attempt"] == "2"]
    if avoid:
        # the second attempts ran one after the other, the later one on main's new tip
        assert overlapping(second) == [], second
        assert "waits for pt-" in ran["stderr"] and "both change shared.txt" in ran["stderr"]
        assert refused == [] and resolutions == []
        rebased = proj.events("pt-1", "BranchRebased") + proj.events("pt-2", "BranchRebased")
        assert len(rebased) == 1, rebased
        assert proj.show("main:shared.txt") in (
            "top by pt-1\n-\nmiddle, fixed by pt-1, fixed by pt-2\n-\nbottom by pt-2\n",
            "top by pt-1\n-\nmiddle, fixed by pt-2, fixed by pt-1\n-\nbottom by pt-2\n",
        )
        assert {row["state"] for row in ran["rows"].values()} == {"closed"}
        proj.assert_nothing_left()
    else:
        # side by side, the second merge met the first's change to the same line
        assert overlapping(second) != [], second
        assert len(refused) + len(resolutions) >= 1
