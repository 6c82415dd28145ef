"""The backlog loop (`tf-fsm ralph`): skips, bounds, dry runs, Ctrl-C, recovery and the
parallel race, each with real worker processes and the fake agent (tests/fake_agent.py)."""

from __future__ import annotations

import json
import os
import re
import select
import shlex
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, run_with_terminal_stderr
from tests.e2e.conftest import alive
from tf_fsm.core.state import EscalationRecord, finish_attempt, new_state, start_attempt
from tf_fsm.loop.progress_file import PROGRESS_MARKER, ProgressFile, RunResult, entry_lines
from tf_fsm.loop.worker import last_error, stop_server
from tf_fsm.storage.redact import Redactor
from tf_fsm.storage.store import TicketStore
from tf_fsm.tk.tickets import new_ticket

AGENT = Path(__file__).resolve().parent / "fake_agent.py"
STRONG = "openai-codex/gpt-5.3-codex"
WORKER_MODEL = "worker/strong-worker"
NOW = datetime(2026, 2, 10, 12, 0, tzinfo=UTC)
FIXABLE = {
    "findings": [
        {"id": "f1", "severity": "Major", "text": "bad", "reviewer": "reviewer-general",
         "fixedBy": [STRONG]},
    ]
}  # fmt: skip
HANG = {"hang": [{"phase": "implement", "seconds": 30}]}


class Project:
    """A project whose agent is the fake agent, with one plan file per ticket."""

    def __init__(self, root: Path, max_retries: int = 3) -> None:
        self.root = root
        self.plans = root.parent / "plans"
        self.plans.mkdir(exist_ok=True)
        self.log = root.parent / "agent-calls.jsonl"
        self.children = root.parent / "agent-children.txt"
        (root / ".tickets").mkdir(exist_ok=True)
        agent = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
        plan = shlex.quote(str(self.plans)) + "/{ticket_id}.json"
        settings = {
            "metaModels": {"strong": {"model": STRONG, "thinking": "high"}},
            "workflow": {
                "enableResearcher": False,
                "enableReviewers": ["reviewer-general"],
                "enableCloser": False,
                "escalation": {
                    "enabled": True,
                    "maxRetries": max_retries,
                    "models": {"fixer": "strong", "worker": WORKER_MODEL},
                },
            },
            "executor": {
                "kind": "command",
                "command": ["/bin/sh", "-c", f"FAKE_AGENT_PLAN={plan} exec {agent}"],
                "timeoutSeconds": 40,
                "restartBackoffSeconds": 0,  # restarts are tested elsewhere; no waits here
            },
        }
        (root / ".tf" / "config" / "settings.json").write_text(json.dumps(settings))

    def ticket(
        self, tid: str, plan: dict[str, Any] | None = None, text: str | None = None, **kw: Any
    ) -> Path:
        path = self.root / ".tickets" / f"{tid}.md"
        path.write_text(
            text or new_ticket(tid, f"Title {tid}", created="2026-02-10T12:00:00Z", **kw)
        )
        (self.plans / f"{tid}.json").write_text(json.dumps(plan or {}))
        return path

    def store(self, tid: str) -> TicketStore:
        return TicketStore(self.root / ".tf" / "knowledge", tid)

    def history(self, tid: str, *statuses: str) -> None:
        """Write a retry-state.json whose attempts ended with these statuses (the last one
        may be `in_progress` or `error`, i.e. open)."""
        state = new_state(tid, NOW)
        for status in statuses:
            state = start_attempt(
                state, trigger="initial", escalation=EscalationRecord.of(), fail_on=[], now=NOW
            )
            if status != "in_progress":
                state = finish_attempt(
                    state,
                    status=status,
                    counts={},
                    max_retries=3,
                    now=NOW,  # type: ignore[arg-type]
                )
        self.store(tid).save_retry_state(state)

    def state(self, tid: str) -> dict[str, Any]:
        return json.loads(self.store(tid).retry_state_path.read_text())

    def events(self, tid: str) -> list[dict[str, Any]]:
        path = self.store(tid).journal_path
        return [json.loads(ln) for ln in path.read_text().splitlines()] if path.exists() else []

    def env(self) -> dict[str, str]:
        return {"FAKE_AGENT_LOG": str(self.log), "FAKE_AGENT_CHILD_PID": str(self.children)}

    def ralph(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("--root", str(self.root), "ralph", *args, env=self.env())

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            [sys.executable, "-m", "tf_fsm", "--root", str(self.root), "ralph", *args],
            env={**os.environ, **self.env()},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def progress(self) -> str:
        return (self.root / ".tf" / "ralph" / "progress.md").read_text()

    def tk_status(self, tid: str) -> str:
        text = (self.root / ".tickets" / f"{tid}.md").read_text()
        return re.search(r"^status: (.*)$", text, re.M).group(1)  # type: ignore[union-attr]


@pytest.fixture
def proj(project: Path) -> Project:
    return Project(project)


# --- choosing, without running --------------------------------------------------------------


def _setup_mixed(p: Project) -> None:
    p.ticket("pt-1", priority=1)
    p.ticket("pt-2")
    p.history("pt-2", "blocked")
    p.ticket("pt-3")
    p.history("pt-3", "blocked", "blocked")
    p.ticket("pt-4")
    p.history("pt-4", "blocked", "blocked", "blocked")  # maxRetries 3: exhausted
    p.ticket("pt-5")
    p.history("pt-5", "error")
    p.ticket("pt-6")
    p.history("pt-6", "in_progress")  # a run that died: resumed, not skipped
    p.ticket("pt-7", text="---\nid: pt-7\nstatus: open\nno colon here\n---\n# Bad\n")
    p.ticket("pt-8", text=new_ticket("pt-9", "Id differs from the file name"))


def test_dry_run_lists_order_attempts_escalation_and_skips(proj: Project) -> None:
    _setup_mixed(proj)
    before = {t: proj.state(t) for t in ("pt-2", "pt-3", "pt-4", "pt-5", "pt-6")}
    done = proj.ralph("--dry-run")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    # not a git repository: every ticket in the project's tree, which the loop says once
    tree = "                 tree: the project's working tree (not a git repository)"
    assert lines[:10] == [
        "note: not a git repository: tickets run in the project's working tree",
        "  1. pt-1         attempt 1 (initial), base models",
        tree,
        "  2. pt-2         attempt 2 (ralph_retry), fixer -> openai-codex/gpt-5.3-codex",
        tree,
        "  3. pt-3         attempt 3 (ralph_retry), worker -> worker/strong-worker, "
        "fixer -> openai-codex/gpt-5.3-codex",
        tree,
        "  4. pt-6         attempt 1 (resume), base models",
        tree,
        "     skip pt-4: max retries (3) exceeded: blocked after 3 attempts; "
        "`tf-fsm run pt-4 --retry-reset` starts over",
    ]
    assert (
        "     skip pt-5: attempt 1 failed in a phase (error); --resume-errors resumes it" in lines
    )
    assert any(
        ln.startswith("     skip pt-7: malformed ticket file: ") and "pt-7.md:4:" in ln
        for ln in lines
    )
    assert "     skip pt-9: its id is pt-9 but its file is pt-8.md (run reads pt-9.md)" in lines
    # A dry run writes nothing: no progress file, no locks, states untouched.
    assert not (proj.root / ".tf" / "ralph").exists()
    assert {t: proj.state(t) for t in before} == before
    assert not (proj.store("pt-1").dir / ".lock").exists()

    as_json = proj.ralph("--dry-run", "--json", "--resume-errors")
    events = [json.loads(line) for line in as_json.stdout.splitlines()]
    plans = {e["ticket"]: e for e in events if e["event"] == "plan"}
    assert plans["pt-5"]["trigger"] == "resume" and plans["pt-5"]["attempt"] == 1
    assert plans["pt-2"]["escalated"] == {"fixer": STRONG}
    assert {(p["tree"]["worktree"], p["tree"]["why"]) for p in plans.values()} == {
        (False, "not a git repository")
    }
    assert [e["ticket"] for e in events if e["event"] == "skip"] == ["pt-4", "pt-7", "pt-9"]


# --- running -----------------------------------------------------------------------------------


def test_skips_are_said_once_and_the_rest_runs(proj: Project) -> None:
    _setup_mixed(proj)
    proj.ticket("pt-10", plan=FIXABLE, tags=("component:x",))  # blocks once, closes on retry
    held = proj.store("pt-1")
    with held.lock():  # someone else is running pt-1
        done = proj.ralph("--resume-errors", "--workers", "1")
    assert done.returncode == 0, done.stderr
    err = done.stderr
    assert err.count("Skipping pt-4: max retries (3) exceeded") == 1, err
    assert err.count(f"Skipping pt-1: locked by another process (pid {os.getpid()})") == 1, err
    assert err.count("Skipping pt-7: malformed ticket file") == 1, err
    assert not held.retry_state_path.exists()  # the locked ticket was never touched
    assert proj.tk_status("pt-10") == "closed"
    assert [a["trigger"] for a in proj.state("pt-10")["attempts"]] == ["initial", "ralph_retry"]
    assert [a["status"] for a in proj.state("pt-6")["attempts"]] == ["closed"]  # resumed
    assert proj.state("pt-5")["attempts"][-1]["status"] == "closed"  # --resume-errors
    # pt-2 and pt-3 each get their next attempt, never more than maxRetries (3) in all.
    assert [a["status"] for a in proj.state("pt-3")["attempts"]][-1] == "closed"
    assert len(proj.state("pt-4")["attempts"]) == 3
    assert "no ticket left to run" in done.stdout
    progress = proj.progress()
    assert "- pt-10: BLOCKED" in progress and "- pt-10: COMPLETE" in progress
    assert progress.index("- pt-10: COMPLETE") < progress.index("- pt-10: BLOCKED")  # newest first


def test_a_failed_worker_is_reported_with_its_error_and_remedy(proj: Project) -> None:
    # The worker's error names the file and line on one line and the remedy on the next; the
    # loop's summary must carry the first, not only the last.
    proj.ticket("pt-1")
    proj.history("pt-1", "blocked")
    journal = proj.store("pt-1").journal_path
    journal.write_text('{"event": "RetryStateReset"}\nnot json\n{"event": "X"}\n')
    done = proj.ralph()
    assert done.returncode == 0, done.stderr
    said = done.stdout + done.stderr
    line = next(ln for ln in said.splitlines() if "FAILED after attempt 1" in ln)
    assert "exit code 2: tf-fsm: error: " in line and "events.jsonl: line 1: " in line, line
    assert line.endswith("; fix or delete that line by hand; tf-fsm never rewrites the journal")


def test_error_tickets_are_skipped_without_resume_errors(proj: Project) -> None:
    proj.ticket("pt-1", plan={"crash": [{"phase": "implement", "exitCode": 3}]})
    first = proj.ralph()
    assert first.returncode == 0, first.stderr
    assert proj.state("pt-1")["attempts"][-1]["status"] == "error"
    assert "FAILED" in proj.progress()
    again = proj.ralph()
    assert "Skipping pt-1: attempt 1 failed in implement (error); --resume-errors resumes it" in (
        again.stderr
    )
    assert len([e for e in proj.events("pt-1") if e["event"] == "AttemptResumed"]) == 0
    resumed = proj.ralph("--resume-errors")  # resumed once, fails again, then left alone
    assert resumed.stderr.count("Skipping pt-1: attempt 1 failed again after being resumed") == 1
    assert len([e for e in proj.events("pt-1") if e["event"] == "AttemptResumed"]) == 1


def test_max_iterations_bounds_the_loop(proj: Project) -> None:
    for tid in ("pt-1", "pt-2", "pt-3"):
        proj.ticket(tid, tags=(f"component:{tid}",))
    done = proj.ralph("--max-iterations", "2", "--json")
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert [e["ticket"] for e in events if e["event"] == "start"] == ["pt-1", "pt-2"]
    summary = events[-1]
    assert summary["event"] == "summary" and summary["reason"] == "max_iterations"
    assert summary["iterations"] == 2
    assert proj.tk_status("pt-3") == "open"
    assert "- Status: STOPPED" in proj.progress()
    assert run_cli("--root", str(proj.root), "ralph", "--max-iterations", "0").returncode == 2
    # the last ticket takes the last iteration: nothing is left, so the loop drained
    last = proj.ralph("--max-iterations", "1", "--json")
    assert json.loads(last.stdout.splitlines()[-1])["reason"] == "drained", last.stdout
    assert "- Status: COMPLETE" in proj.progress()


def test_waiting_hand_offs_are_left_to_watch_not_rerun(tmp_path: Path) -> None:
    root = tmp_path / "handoff"
    (root / ".tf" / "config").mkdir(parents=True)
    (root / ".tickets").mkdir()
    settings = {"workflow": {"enableResearcher": False}, "executor": {"kind": "handoff"}}
    (root / ".tf" / "config" / "settings.json").write_text(json.dumps(settings))
    for tid in ("pt-1", "pt-2"):
        text = new_ticket(tid, f"Title {tid}", created="2026-02-10T12:00:00Z")
        (root / ".tickets" / f"{tid}.md").write_text(text, encoding="utf-8")
    done = run_cli("--root", str(root), "ralph", "--max-iterations", "10")
    assert done.returncode == 0, done.stderr
    assert "after 2 runs: 0 closed, 0 blocked, 0 failed, 2 waiting" in done.stdout, done.stdout
    assert "waits for" in done.stderr and "tf-fsm watch (or tf-fsm run) resumes it" in done.stderr
    for tid in ("pt-1", "pt-2"):
        journal = root / ".tf" / "knowledge" / "tickets" / tid / "events.jsonl"
        names = [json.loads(line)["event"] for line in journal.read_text().splitlines()]
        assert names.count("AttemptStarted") == 1 and "AttemptResumed" not in names
    progress = (root / ".tf" / "ralph" / "progress.md").read_text()
    assert len(re.findall(r"^- pt-\d: WAITING \(", progress, re.M)) == 2, progress
    assert "- Tickets failed: 0" in progress


def test_markup_like_text_is_printed_as_it_is(proj: Project) -> None:
    proj.ticket("pt-1", text="---\nid: pt-1\nstatus: open\nfoo bar [/x]\n---\n# [bold]T[/bold]\n")
    done = proj.ralph()
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr
    assert "[/x]" in done.stdout or "[/x]" in done.stderr


def test_the_loop_reports_the_phase_a_worker_is_in(proj: Project) -> None:
    """The phase comes from the journal (each start is written as it begins), so the loop
    names it while the agent is still working in it."""
    proj.ticket("pt-1", plan=HANG)
    loop = proj.spawn("--workers", "1", "--json")
    assert loop.stdout is not None
    seen: list[dict[str, Any]] = []
    deadline = time.monotonic() + 20
    # Read while the agent hangs in implement, before anything stops it (a stopped worker
    # records its phase in retry-state.json, which would hide a loop that only reads that).
    while time.monotonic() < deadline and not any(e["event"] == "phase" for e in seen):
        if select.select([loop.stdout], [], [], 0.5)[0]:
            line = loop.stdout.readline()
            seen += [json.loads(line)] if line.startswith("{") else []
    os.kill(loop.pid, signal.SIGINT)
    loop.communicate(timeout=20)
    phases = [(e["ticket"], e["phase"]) for e in seen if e["event"] == "phase"]
    assert phases == [("pt-1", "implement")], seen


@pytest.mark.parametrize("target", ["loop", "group"])
def test_ctrl_c_stops_cleanly_and_the_ticket_resumes(proj: Project, target: str) -> None:
    proj.ticket("pt-1", plan=HANG)
    loop = proj.spawn("--workers", "1")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not proj.children.exists():
        time.sleep(0.02)  # the agent is hanging inside implement
    assert proj.children.exists(), "the agent never started"
    started = time.monotonic()
    if target == "loop":  # the loop forwards it to its workers
        os.kill(loop.pid, signal.SIGINT)
    else:  # a terminal's Ctrl-C reaches the whole foreground group: loop and worker at once
        os.killpg(loop.pid, signal.SIGINT)
    out, err = loop.communicate(timeout=20)
    assert loop.returncode == 130, err
    assert time.monotonic() - started < 10
    assert "interrupted" in out
    attempt = proj.state("pt-1")["attempts"][-1]
    assert (attempt["status"], attempt["phase"]) == ("in_progress", "implement")
    assert proj.store("pt-1").lock_holder() is None  # released
    for pid in map(int, proj.children.read_text().split()):
        assert not alive(pid), "the hanging agent's child outlived the run"
    progress = proj.progress()
    assert "- pt-1: INTERRUPTED" in progress and "- Status: INTERRUPTED" in progress

    (proj.plans / "pt-1.json").write_text("{}")
    done = proj.ralph()
    assert done.returncode == 0, done.stderr
    assert [(a["attemptNumber"], a["status"]) for a in proj.state("pt-1")["attempts"]] == [
        (1, "closed")
    ]
    assert [e["phase"] for e in proj.events("pt-1") if e["event"] == "AttemptResumed"] == [
        "implement"
    ]


def test_attempt_killed_as_it_started_is_repaired_and_resumed(proj: Project) -> None:
    """retry-state.json says attempt 1 is in progress, but the run died before it wrote
    chain-context.json and set the tk status (the window the SIGKILL e2e test hit)."""
    proj.ticket("pt-1")
    proj.history("pt-1", "in_progress")
    done = proj.ralph()
    assert done.returncode == 0, done.stderr
    assert proj.tk_status("pt-1") == "closed"
    assert [(a["attemptNumber"], a["status"]) for a in proj.state("pt-1")["attempts"]] == [
        (1, "closed")
    ]
    events = [e["event"] for e in proj.events("pt-1")]
    assert "AttemptResumed" in events
    # the resume journaled the start the dead run never wrote
    assert events.count("AttemptStarted") == 1


def test_close_cut_short_is_finished(proj: Project) -> None:
    """The run was killed after retry-state.json recorded the close but before the tk file
    did (tf_fsm tells tk last): tk still lists the ticket, and the next run only closes it."""
    proj.ticket("pt-1")
    assert proj.ralph().returncode == 0
    path = proj.root / ".tickets" / "pt-1.md"
    text = path.read_text()
    path.write_text(text.replace("status: closed", "status: in_progress").split("\n## Notes")[0])
    before = len(proj.events("pt-1"))
    done = proj.ralph()
    assert done.returncode == 0, done.stderr
    assert proj.tk_status("pt-1") == "closed"
    assert "tf-fsm: closed attempt 1" in path.read_text()
    assert [(a["attemptNumber"], a["status"]) for a in proj.state("pt-1")["attempts"]] == [
        (1, "closed")
    ]
    assert len(proj.events("pt-1")) == before  # no attempt ran


def test_two_loops_at_once_never_run_a_ticket_twice(proj: Project) -> None:
    """The race of parallel workers (here: two whole loops) picking the same ticket."""
    for n in range(6):
        proj.ticket(f"pt-{n}", plan=FIXABLE if n % 2 else None, tags=(f"component:{n}",))
    loops = [proj.spawn("--workers", "2") for _ in range(2)]
    for loop in loops:
        loop.communicate(timeout=60)
        assert loop.returncode == 0
    calls = [json.loads(line) for line in proj.log.read_text().splitlines()]
    for n in range(6):
        tid = f"pt-{n}"
        attempts = [(a["attemptNumber"], a["status"]) for a in proj.state(tid)["attempts"]]
        assert attempts == ([(1, "blocked"), (2, "closed")] if n % 2 else [(1, "closed")]), tid
        names = [e["event"] for e in proj.events(tid) if e["event"].startswith("Attempt")]
        assert names == ["AttemptStarted", "AttemptFinished"] * len(attempts), (tid, names)
        implement = [c for c in calls if c["ticket"] == tid and c["phase"] == "implement"]
        assert len(implement) == 1, (tid, implement)  # the retry skips implement


def test_a_refused_worker_never_touches_the_outcome_of_the_one_holding_the_lock(
    proj: Project, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The race behind a flaky two-loop run: a second worker for a ticket another worker holds
    is refused the lock (exit 75). Its outcome file must be its own; a shared name let the
    refused worker truncate, and its loop remove, the outcome line of the one still running,
    which was then reported FAILED and never retried."""
    from tf_fsm.cli.run import worker_main
    from tf_fsm.loop.ralph import Loop
    from tf_fsm.loop.records import LoopOptions, Plan
    from tf_fsm.loop.view import Reporter
    from tf_fsm.settings.load import load_settings

    proj.ticket("pt-1", plan={"hang": [{"phase": "implement", "seconds": 1}]})
    for key, value in proj.env().items():
        monkeypatch.setenv(key, value)
    options = LoopOptions(workers=2, max_iterations=9)
    loop = Loop(proj.root, load_settings(proj.root), options, Reporter(None), worker=worker_main)
    plan = Plan("pt-1", "Title pt-1", 1, "initial", {}, frozenset())
    try:
        loop._launch(plan)
        holder = loop.running.pop("pt-1")
        deadline = time.monotonic() + 20
        while (proj.store("pt-1").lock_holder() or 0) <= 0:
            assert time.monotonic() < deadline, "the first worker never took the lock"
            time.sleep(0.02)
        loop._launch(plan)
        refused = loop.running.pop("pt-1")
        loop._finish(refused)  # reads and removes its own outcome file
        loop._finish(holder)
    finally:
        stop_server()
    outcomes = [(r.ticket, r.outcome) for r in loop.result.results]
    assert outcomes == [("pt-1", "locked"), ("pt-1", "closed")], loop.result.results


def _outcome_file_holder(logs: Path) -> tuple[subprocess.Popen[str], Path]:
    """A real process that took an outcome file as a loop does, and holds it."""
    code = (
        "import sys, time; from pathlib import Path; "
        "from tf_fsm.loop.worker import outcome_file; "
        "print(outcome_file(Path(sys.argv[1]), 'pt-1')[1], flush=True); time.sleep(60)"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(logs)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, Path(proc.stdout.readline().strip())


def test_outcome_files_of_a_killed_loop_are_swept_and_said(proj: Project) -> None:
    """A loop SIGKILLed before reading its workers' outcome files leaves them behind; the next
    loop removes those nobody holds, says which, and leaves a live loop's alone."""
    logs = proj.root / ".tf" / "ralph" / "logs"
    logs.mkdir(parents=True)
    killed, stale = _outcome_file_holder(logs)
    killed_young, young = _outcome_file_holder(logs)
    live, held = _outcome_file_holder(logs)
    try:
        for proc in (killed, killed_young):
            proc.kill()
            proc.wait()
        old = time.time() - 120
        for path in (stale, held):
            os.utime(path, (old, old))
        proj.ticket("pt-1")
        done = proj.ralph("--max-iterations", "1")
        assert done.returncode == 0, done.stderr
        assert (
            f"removed 1 outcome file(s) of a loop that was killed before reading them: {stale.name}"
            in done.stderr
        )
        assert not stale.exists()
        assert held.exists() and young.exists()  # held by a live loop; maybe just created
        assert sorted(p.name for p in logs.glob(".*.out")) == sorted([held.name, young.name])
    finally:
        live.kill()
        live.wait()


# --- progress.md -------------------------------------------------------------------------------


def _result(outcome: str, **kw: Any) -> RunResult:
    base = {
        "ticket": "pt-1",
        "title": "Title",
        "outcome": outcome,
        "reason": "why",
        "exit_code": 0,
        "attempt": 2,
        "retry_count": 1,
        "counts": None,
    }
    return RunResult(**{**base, **kw})


def test_progress_entries_follow_pi_ticketflow(tmp_path: Path) -> None:
    path = tmp_path / ".tf" / "ralph" / "progress.md"
    progress = ProgressFile(path, tmp_path, Redactor(["s3cr3t-value"]))
    progress.begin()
    blocked = _result(
        "blocked", counts={"Critical": 0, "Major": 2, "Minor": 1}, reason="s3cr3t-value"
    )
    progress.record(blocked, "attempt 3 on a later pass (trigger ralph_retry)")
    progress.record(_result("closed", retry_count=0, attempt=3, reason=""), "")
    progress.current([], "COMPLETE")
    text = path.read_text()
    assert text.startswith("# Ralph Loop Progress\n\n## Current State\n\n- Status: COMPLETE\n")
    # one ticket, counted once by its newest entry; two entries
    stats = "- Tickets completed: 1\n- Tickets failed: 0\n- Tickets in progress: 0\n"
    assert stats + "- Total iterations: 2\n" in text
    history = text.split(PROGRESS_MARKER + "\n", 1)[1]
    assert re.fullmatch(
        r"- pt-1: COMPLETE \(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\)\n"
        r"  - Summary: Title\n  - Retry: Attempt 3, Count 0\n  - Status: CLOSED\n"
        r"- pt-1: BLOCKED \(\S+\)\n  - Summary: Title\n"
        r"  - Issues: Critical\(0\)/Major\(2\)/Minor\(1\)\n  - Retry: Attempt 2, Count 1\n"
        r"  - Status: BLOCKED\n  - Reason: \S+\n"
        r"  - Next: attempt 3 on a later pass \(trigger ralph_retry\)\n",
        history,
    ), history
    assert "s3cr3t-value" not in text


def test_progress_keeps_an_existing_pi_ticketflow_file(tmp_path: Path) -> None:
    path = tmp_path / "progress.md"
    old = (
        "# Ralph Loop Progress\n\n## Current State\n\n- Status: COMPLETE\n"
        "- Current ticket: (none)\n"
        "- Started: 2026-02-05T14:09:43Z\n- Last updated: 2026-02-05T14:25:35Z\n\n"
        "## Statistics\n\n- Tickets completed: 5\n- Tickets failed: 0\n- Total iterations: 5\n\n"
        f"## History\n\n{PROGRESS_MARKER}\n- ptw-6dza: COMPLETE (2026-02-05T14:25:35Z)\n"
        "  - Summary: Old entry\n  - Status: COMPLETE\n"
    )
    path.write_text(old)
    ProgressFile(path, tmp_path).record(_result("error", reason="implement failed"), "")
    text = path.read_text()
    stats = "- Tickets completed: 5\n- Tickets failed: 1\n- Tickets in progress: 0\n"
    assert stats + "- Total iterations: 6\n" in text
    assert text.endswith("  - Summary: Old entry\n  - Status: COMPLETE\n")
    assert f"{PROGRESS_MARKER}\n- pt-1: FAILED (" in text
    assert "  - Error: implement failed\n" in text


def test_entry_lines_for_exhausted_ticket() -> None:
    lines = entry_lines(_result("exhausted", retry_count=3), "2026-02-10T12:00:00Z", "x")
    assert lines[0] == "- pt-1: BLOCKED (2026-02-10T12:00:00Z)"
    assert "  - Status: BLOCKED (max retries exceeded)" in lines


def test_live_view_on_a_terminal(proj: Project) -> None:
    """On a terminal the loop draws a live table (rich) on stderr; it must not get in the way
    of the run or of the summary on stdout."""
    for tid in ("pt-1", "pt-2"):
        proj.ticket(tid, plan=FIXABLE, tags=(f"component:{tid}",))
    argv = ["--root", str(proj.root), "ralph", "--workers", "2"]
    done, screen = run_with_terminal_stderr(argv, {**proj.env(), "COLUMNS": "120"})
    assert done.returncode == 0
    assert "pt-1: started attempt 2 (ralph_retry)" in screen
    assert "running" in screen and "\x1b[" in screen  # the live table, redrawn in place
    assert "no ticket left to run after 4 runs: 2 closed" in done.stdout


@pytest.mark.parametrize(
    ("reason", "line"),
    [
        ("max retries (3) exceeded: blocked after 3 attempts", "BLOCKED (max retries exceeded)"),
        (
            "budget: $4.0000 of $4.0000 spent (workflow.escalation.maxCostUsd)",
            "BLOCKED (budget spent)",
        ),
        (
            "same-failure: attempts 3 and 4 failed the same way (signature ab12); needs a human",
            "BLOCKED (the same failure twice: needs a human)",
        ),
    ],
)
def test_an_exhausted_entry_says_why_it_stopped(reason: str, line: str) -> None:
    result = RunResult.build("pt-1", "T", "exhausted", reason, 4, 3, None)
    assert f"  - Status: {line}" in entry_lines(result, "2026-11-22T00:00:00Z", "")


def test_a_failed_workers_error_is_redacted_before_it_is_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    secret = "Zq8vR3mK9pL2xW7nT4bY6cH1jF5gD0sAeU3iO8"
    monkeypatch.setenv("MY_API_TOKEN", secret)
    said = last_error(["tf-fsm: error: " + "x" * 470 + " " + secret])
    assert len(said) <= 500 and secret[:10] not in said
