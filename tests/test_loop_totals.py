"""The loop's totals (docs/ralph.md, "Output" and "Progress"): each ticket counted once, by its
final state in this loop, in the closing line, the `--json` summary and the live view's line;
progress.md's Statistics count each ticket once, by its newest entry. Real worker processes
and the fake agent (tests/test_ralph.py's project, one plan per ticket)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.test_ralph import FIXABLE, Project

NEVER = {
    "findings": [
        {"id": "n", "severity": "Major", "text": "bad", "reviewer": "reviewer-general",
         "fixedBy": []},
    ]
}  # fmt: skip
CRASH = {"crash": [{"phase": "implement", "exitCode": 3}]}


@pytest.fixture
def proj(project: Path) -> Project:
    return Project(project, max_retries=2)


def backlog(proj: Project) -> None:
    """Six tickets: two close at once, one closes after a blocked attempt, one is blocked
    for good after two, one ends in error (and is skipped afterwards, not resumed), one is
    skipped without running (its state file is corrupt)."""
    proj.ticket("pt-1")
    proj.ticket("pt-2", plan=FIXABLE)
    proj.ticket("pt-3", plan=NEVER)
    proj.ticket("pt-4", plan=CRASH)
    proj.ticket("pt-5")
    proj.ticket("pt-6")
    proj.store("pt-5").dir.mkdir(parents=True)
    proj.store("pt-5").retry_state_path.write_text("{not json")
    settings_path = proj.root / ".tf" / "config" / "settings.json"
    settings = json.loads(settings_path.read_text())
    settings["executor"]["maxRestarts"] = 0
    settings_path.write_text(json.dumps(settings))


def test_the_closing_line_counts_each_ticket_once_by_its_final_state(proj: Project) -> None:
    backlog(proj)
    done = proj.ralph("--workers", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    headline = done.stdout.splitlines()[0]
    assert headline == (
        "ralph: no ticket left to run after 7 runs: 3 closed, 1 blocked, 1 failed, 1 skipped "
        "(6 tickets)"
    ), done.stdout

    progress = (proj.root / ".tf" / "ralph" / "progress.md").read_text()
    stats = progress.split("## Statistics\n\n", 1)[1].split("\n\n", 1)[0]
    assert stats == (
        "- Tickets completed: 3\n- Tickets failed: 2\n- Tickets in progress: 0\n"
        "- Total iterations: 7"
    ), progress
    entries = re.findall(r"^- (pt-\d): ([A-Z]+) \(", progress, re.M)
    assert len(entries) == 7 and len({t for t, _ in entries}) == 5  # pt-5 never ran


def test_the_json_summary_gives_the_same_totals(proj: Project) -> None:
    backlog(proj)
    done = proj.ralph("--workers", "1", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["event"] == "summary"
    assert summary["totals"] == {
        "closed": 3,
        "blocked": 1,
        "failed": 1,
        "waiting": 0,
        "awaiting_merge": 0,
        "interrupted": 0,
        "skipped": 1,
    }
    assert sum(summary["totals"].values()) == 6
