"""`tf-fsm run` end to end when things go wrong: an agent crashes, hangs or writes nothing; the
ticket is locked, its state file corrupt, its id hostile or its file missing."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from .conftest import NO_ESCALATION, Harness, alive, check_attempt, counts, phases

CRASHED_IMPLEMENT = ["start:research", "done:research", "start:implement", "fail:implement"]


def failed_attempt(e2e: Harness, phase: str) -> dict:
    """The run's only attempt, left in `error` at `phase`; the counter untouched."""
    state = e2e.read_state()
    assert (state["status"], state["retryCount"]) == ("active", 0)
    [attempt] = state["attempts"]
    check_attempt(attempt, 1, "error", "initial", NO_ESCALATION)
    assert attempt["phase"] == phase
    failed = e2e.event("PhaseFailed", 1)
    assert failed["phase"] == phase
    return failed


def no_restarts(e2e: Harness) -> None:
    """A crash ends the attempt at once (restarts are tested in tests/test_transient.py)."""
    path = e2e.project / ".tf" / "config" / "settings.json"
    settings = json.loads(path.read_text(encoding="utf-8"))
    settings["executor"]["maxRestarts"] = 0
    path.write_text(json.dumps(settings), encoding="utf-8")


def test_phase_crash_then_resume(e2e: Harness) -> None:
    no_restarts(e2e)
    e2e.plan(crash=[{"phase": "implement", "attempt": 1, "times": 1}])
    result = e2e.run()
    assert result.returncode == 5, result.stderr

    failed = failed_attempt(e2e, "implement")
    assert (failed["role"], failed["exitCode"]) == ("worker", 3)
    assert "fake agent crashed" in failed["stderrTail"]
    log = Path(failed["log"])
    log = log if log.is_absolute() else e2e.dir / log
    assert log.as_posix().endswith("logs/attempt-1/implement-worker.log")
    assert "fake agent crashed" in log.read_text(encoding="utf-8")
    assert re.search(r"exit\w*\W+(?:\w+\W+)?3\b", result.stderr, re.I), result.stderr
    assert "implement-worker.log" in result.stderr
    assert (e2e.dir / "research.md").is_file()  # artifacts are kept
    assert not (e2e.dir / "implementation.md").exists()
    assert e2e.phase_trace(1) == CRASHED_IMPLEMENT

    # The same attempt resumes at the failed phase; research is not run again.
    resumed = e2e.run()
    assert resumed.returncode == 0, resumed.stderr
    state = e2e.read_state()
    assert (state["status"], state["retryCount"]) == ("closed", 0)
    [attempt] = state["attempts"]
    check_attempt(attempt, 1, "closed", "initial", NO_ESCALATION, counts())
    assert e2e.event("AttemptResumed", 1)["phase"] == "implement"
    assert e2e.names(1).count("AttemptStarted") == 1
    assert e2e.events(1)[-1]["event"] == "AttemptFinished"
    assert e2e.events(1)[-1]["status"] == "closed"
    assert e2e.events(2) == []
    assert e2e.phase_trace(1) == CRASHED_IMPLEMENT + phases(fix=False)[2:]
    assert (e2e.chain()["attempt"], e2e.chain()["trigger"]) == (1, "initial")
    assert [c["attempt"] for c in e2e.agent_calls(phase="research")] == [1]
    assert [c["attempt"] for c in e2e.agent_calls(phase="implement")] == [1, 1]


def test_phase_timeout_kills_the_process_group(e2e: Harness) -> None:
    e2e.settings(timeout=5)  # the phases before review end well within it, however busy
    no_restarts(e2e)
    e2e.plan(hang=[{"phase": "review", "seconds": 60}])
    started = time.monotonic()
    result = e2e.run()
    assert result.returncode == 5, result.stderr
    assert time.monotonic() - started < 50  # not the hang's 60 s

    failed = failed_attempt(e2e, "review")
    assert "timed out" in failed["failure"]
    children = [int(pid) for pid in e2e.child_pid_file.read_text().split()]
    assert children, "the hanging agent did not start its child"
    try:
        deadline = time.monotonic() + 5
        while any(map(alive, children)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not any(map(alive, children)), "the agent's child outlived the timeout"
    finally:
        for pid in filter(alive, children):
            os.kill(pid, signal.SIGKILL)


def test_missing_output_fails_the_phase(e2e: Harness) -> None:
    e2e.plan(noOutput=[{"phase": "research"}])
    result = e2e.run()
    assert result.returncode == 5, result.stderr

    failed = failed_attempt(e2e, "research")
    assert (failed["role"], failed["exitCode"]) == ("researcher", 0)
    assert re.search(r"not\s+(been\s+)?written|did\s+not\s+write", failed["failure"], re.I)
    assert not (e2e.dir / "research.md").exists()
    assert e2e.phase_trace(1) == ["start:research", "fail:research"]


LOCK_HOLDER = textwrap.dedent(
    """
    import time
    from pathlib import Path
    from tf_fsm.storage.store import TicketStore

    store = TicketStore(Path(".tf/knowledge"), "pt-1")
    with store.lock():
        print("READY", flush=True)
        time.sleep(30)
    """
)


def test_locked_ticket_is_refused(e2e: Harness) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER],
        cwd=e2e.project,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        if holder.stdout.readline().strip() != "READY":
            pytest.fail(f"lock holder did not start: {holder.communicate(timeout=10)[1]}")
        result = e2e.run()
        assert result.returncode == 75, result.stderr
        assert re.search(rf"\b{holder.pid}\b", result.stderr), result.stderr
        assert e2e.agent_calls() == []
    finally:
        holder.kill()
        holder.wait()
        for stream in (holder.stdout, holder.stderr):
            if stream is not None:
                stream.close()


def test_corrupt_retry_state_is_kept_until_reset(e2e: Harness) -> None:
    corrupt = b'{"version": 1, "ticketId": "pt-1", "attempts": ['
    path = e2e.dir / "retry-state.json"
    e2e.dir.mkdir(parents=True)
    path.write_bytes(corrupt)

    result = e2e.run()
    assert result.returncode == 2, result.stderr
    assert "retry-state.json" in result.stderr
    assert path.read_bytes() == corrupt
    assert e2e.agent_calls() == []
    assert list(e2e.dir.glob("retry-state.json.bak*")) == []

    reset = e2e.run("--retry-reset")
    assert reset.returncode == 0, reset.stderr
    [backup] = e2e.dir.glob("retry-state.json.bak.*")
    assert re.fullmatch(r"retry-state\.json\.bak\.\d{8}T\d{6}Z(\.\d+)?", backup.name)
    assert backup.read_bytes() == corrupt
    state = e2e.read_state()
    assert (state["status"], state["retryCount"]) == ("closed", 0)
    [attempt] = state["attempts"]
    check_attempt(attempt, 1, "closed", "initial", NO_ESCALATION, counts())
    assert Path(e2e.event("RetryStateReset")["backup"]).name == backup.name


@pytest.mark.parametrize("bad_id", ["../evil", "a/b", ".hidden"])
def test_path_traversal_ids_are_refused(e2e: Harness, tmp_path: Path, bad_id: str) -> None:
    def listing() -> set[Path]:
        return {p.relative_to(tmp_path) for p in tmp_path.rglob("*")}

    before = listing()
    result = e2e.run(ticket=bad_id)
    assert result.returncode == 2, result.stderr
    assert "invalid ticket id" in result.stderr.lower()
    new = listing() - before
    assert [p for p in new if p.parts[0] != "project"] == []
    suspicious = {"evil", "evil.md", ".hidden", ".hidden.md", "a", "b", "b.md"}
    assert [p for p in new if suspicious & set(p.parts)] == []
    assert e2e.agent_calls() == []


def test_missing_ticket_file(e2e: Harness) -> None:
    result = e2e.run(ticket="pt-404")
    assert result.returncode == 2, result.stderr
    assert ".tickets/pt-404.md" in result.stderr
    assert e2e.agent_calls() == []
