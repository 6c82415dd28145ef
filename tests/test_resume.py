"""Where an interrupted attempt picks up, and the `resume`/`status` commands that say so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tf_fsm.core import journal as ev
from tf_fsm.core.artifacts import PHASE_ARTIFACT as ARTIFACTS
from tf_fsm.core.machine import PHASES
from tf_fsm.core.resume import Seen, resume_point

TS = "2026-02-10T12:00:00.000Z"


def started(n: int = 1) -> ev.Event:
    return ev.AttemptStarted(ts=TS, ticket="t", attempt=n, trigger="initial", escalation={})


def done(phase: str, sha: str, n: int = 1) -> ev.Event:
    return ev.PhaseCompleted(
        ts=TS, ticket="t", attempt=n, phase=phase, artifact=ARTIFACTS[phase], sha256=sha
    )


def skipped(phase: str, n: int = 1) -> ev.Event:
    return ev.PhaseSkipped(ts=TS, ticket="t", attempt=n, phase=phase, reason="x")


def disk(**files: tuple[str, int]) -> dict[str, Seen]:
    return {ARTIFACTS[p]: Seen(sha, mtime) for p, (sha, mtime) in files.items()}


def look_in(files: dict[str, Seen]):  # type: ignore[no-untyped-def]
    return files.get


def test_first_phase_not_completed() -> None:
    events = [started(), done("research", "r"), done("implement", "i")]
    files = disk(research=("r", 1), implement=("i", 2))
    point = resume_point(1, events, look_in(files))
    assert (point.phase, point.finished) == ("review", False)
    assert "has not completed" in point.reason


@pytest.mark.parametrize(
    ("files", "phase", "needle"),
    [
        (disk(implement=("i", 2)), "research", "research.md is missing"),
        (disk(research=("CHANGED", 1), implement=("i", 2)), "research", "changed after research"),
        (disk(research=("r", 5), implement=("i", 2)), "implement", "older than an earlier phase"),
    ],
)
def test_completed_phase_whose_artifact_is_not_trusted_reruns(
    files: dict[str, Seen], phase: str, needle: str
) -> None:
    events = [started(), done("research", "r"), done("implement", "i")]
    point = resume_point(1, events, look_in(files))
    assert point.phase == phase and needle in point.reason


def test_skipped_phases_need_no_artifact_and_all_done_means_finished() -> None:
    events = [started(), skipped("research"), skipped("implement")]
    events += [done(p, p) for p in ("review", "fix", "verify", "close")]
    files = disk(review=("review", 1), fix=("fix", 2), verify=("verify", 3), close=("close", 4))
    point = resume_point(1, events, look_in(files))
    assert (point.phase, point.finished) == ("close", True)
    assert resume_point(1, events, look_in(files), gate_decided=False).phase == "verify"


def test_only_this_attempts_events_count_and_a_resume_resets_later_phases() -> None:
    events = [
        started(1),
        *[done(p, p, 1) for p in PHASES],
        started(2),
        done("research", "research", 2),
    ]
    files = disk(research=("research", 1))
    assert resume_point(2, events, look_in(files)).phase == "implement"
    resumed = ev.AttemptResumed(ts=TS, ticket="t", attempt=2, phase="research")
    assert resume_point(2, [*events, resumed], look_in(files)).phase == "research"


def test_an_attempt_resumed_at_its_ending_stays_finished_after_it_ends_in_error() -> None:
    """Every phase completed, the attempt resumed for its merge alone (at close, running
    nothing), and the merge was refused: the next resume is for the merge again, not close."""
    events = [started(), *[done(p, p) for p in PHASES]]
    files = disk(**{p: (p, i) for i, p in enumerate(PHASES)})
    resumed = ev.AttemptResumed(ts=TS, ticket="t", attempt=1, phase="close")
    point = resume_point(1, [*events, resumed], look_in(files))
    assert (point.phase, point.finished) == ("close", True)
    # a close that was not complete is still run again
    cut = [*events[:-1], resumed]
    assert resume_point(1, cut, look_in(files)).finished is False


def test_a_new_series_after_a_close_does_not_take_the_old_attempts_phases() -> None:
    """Attempt numbers start again at 1 after a close: the old attempt 1's phases are not
    the new one's."""
    old = [started(), *[done(p, p) for p in PHASES]]
    files = disk(**{p: (p, i) for i, p in enumerate(PHASES)})
    point = resume_point(1, [*old, started(), done("research", "research")], look_in(files))
    assert point.phase == "implement" and "has not completed" in point.reason


def test_attempt_without_events_in_our_journal_starts_at_the_beginning() -> None:
    point = resume_point(2, [started(1)], look_in(disk(research=("x", 1))))
    assert point.phase == "research" and "before its first phase" in point.reason


def test_no_journal_uses_timestamps_in_phase_order() -> None:
    files = disk(research=("a", 1), implement=("b", 2), review=("c", 1))
    point = resume_point(1, [], look_in(files))
    assert point.phase == "review" and "no journal" in point.reason
    assert resume_point(1, [], look_in(disk())).phase == "research"


TICKET = "---\nid: pt-1\nstatus: open\ndeps: []\nlinks: []\ntype: task\npriority: 2\n---\n# T\n"


def test_resume_and_status_commands(project: Path) -> None:
    (project / ".tickets").mkdir()
    (project / ".tickets/pt-1.md").write_text(TICKET)
    (project / ".tf/config/settings.json").write_text(
        json.dumps({"executor": {"kind": "scripted", "scenario": "s.json"}})
    )
    (project / "s.json").write_text(
        json.dumps({"failures": [{"phase": "review", "role": "reviewer-general"}]})
    )
    nothing = run_cli("resume", "pt-1")
    assert nothing.returncode == 2 and "nothing to resume" in nothing.stderr
    assert run_cli("run", "pt-1").returncode == 5
    status = json.loads(run_cli("status", "pt-1", "--json").stdout)
    assert status["state"] == "error"
    assert status["next"] == "resume attempt 1 at review: review has not completed in attempt 1"
    plan = run_cli("resume", "pt-1", "--plan", "--json")
    data = json.loads(plan.stdout)
    assert data["action"] == "resume" and data["phases"][0]["phase"] == "review"
    # the user edits research.md: the journal's sha256 no longer matches, research reruns
    research = project / ".tf/knowledge/tickets/pt-1/research.md"
    research.write_text(research.read_text() + "\nedited by hand\n")
    data = json.loads(run_cli("resume", "pt-1", "--plan", "--json").stdout)
    assert data["phases"][0]["phase"] == "research" and "changed" in data["why"]
    (project / "s.json").write_text("{}")
    done_ = run_cli("resume", "pt-1", "--json")
    assert done_.returncode == 0, done_.stderr
    assert json.loads(done_.stdout)["status"] == "closed"
    final = json.loads(run_cli("status", "pt-1", "--json").stdout)
    assert final["state"] == "closed" and final["next"].startswith("nothing: closed")


def test_plan_and_run_agree_on_the_trigger_a_crashed_run_intended(project: Path) -> None:
    """A run that blocked attempt 1 and meant to retry at once (TicketBlocked.autoRetry) died
    before starting attempt 2: both `run --plan` and `run` continue with quality_gate."""
    (project / ".tickets").mkdir()
    (project / ".tickets/pt-1.md").write_text(TICKET)
    never = {"id": "N", "severity": "Major", "text": "`a.py:1` - x", "fixedBy": []}
    (project / "s.json").write_text(json.dumps({"findings": [never]}))
    settings = {
        "workflow": {"escalation": {"enabled": True, "models": {"fixer": "fixer"}}},
        "executor": {"kind": "scripted", "scenario": "s.json"},
    }
    (project / ".tf/config/settings.json").write_text(json.dumps(settings))
    assert run_cli("run", "pt-1", "--once").returncode == 3  # --once: no auto retry intended
    plan = json.loads(run_cli("run", "pt-1", "--plan", "--json").stdout)
    assert (plan["attempt"], plan["trigger"]) == (2, "manual_retry")
    journal = project / ".tf/knowledge/tickets/pt-1/events.jsonl"
    lines = journal.read_text().splitlines()
    blocked = [i for i, line in enumerate(lines) if '"TicketBlocked"' in line][-1]
    lines[blocked] = lines[blocked].replace('"autoRetry":false', '"autoRetry":true')
    journal.write_text("\n".join(lines) + "\n")
    plan = json.loads(run_cli("run", "pt-1", "--plan", "--json").stdout)
    assert (plan["attempt"], plan["trigger"]) == (2, "quality_gate")
    assert run_cli("run", "pt-1", "--once").returncode == 3
    state = json.loads((project / ".tf/knowledge/tickets/pt-1/retry-state.json").read_text())
    assert [a["trigger"] for a in state["attempts"]] == ["initial", "quality_gate"]
