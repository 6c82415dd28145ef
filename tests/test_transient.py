"""Transient failures apart from quality failures (issue #9), with real processes.

A crashed, timed-out or killed agent, or one whose model provider answered 429/500, is
restarted (executor.maxRestarts) without a blocked attempt and without escalation; when the
restarts run out the attempt ends in error, resumable. The quality gate's verdict is still what
blocks and escalates. The first group runs tests/fake_agent.py; the second the real `pi`
against the stub model server (skipped only when pi cannot be found).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.e2e.conftest import STRONG, Harness, finding
from tests.stubs.openai_stub import (
    Hang,
    PhasePrompt,
    Reply,
    Request,
    Status,
    StubModelServer,
    lifecycle_script,
)
from tests.stubs.pi_env import REPLY_COST, TICKET_ID, PiProject, require_pi

USAGE_AGENT = Path(__file__).resolve().parent / "stubs" / "usage_agent.py"


def executor(h: Harness, **extra: Any) -> None:
    """Add executor keys to the harness's settings; restarts are immediate unless told."""
    path = h.project / ".tf" / "config" / "settings.json"
    settings = json.loads(path.read_text(encoding="utf-8"))
    settings["executor"] |= {"restartBackoffSeconds": 0, **extra}
    path.write_text(json.dumps(settings), encoding="utf-8")


def invocations(h: Harness, phase: str) -> list[tuple[bool, str | None]]:
    return [
        (e["ok"], e.get("failureClass"))
        for e in h.events()
        if e["event"] == "InvocationFinished" and e["phase"] == phase
    ]


# -- the fake agent -------------------------------------------------------------------------


def test_a_crash_is_restarted_within_the_attempt(e2e: Harness) -> None:
    executor(e2e)  # maxRestarts: the default, 2
    e2e.plan(crash=[{"phase": "implement", "times": 2, "stderr": "segfault"}])
    result = e2e.run()
    assert result.returncode == 0, result.stderr
    assert invocations(e2e, "implement") == [(False, "crash"), (False, "crash"), (True, None)]
    restarts = [e for e in e2e.events() if e["event"] == "InvocationRestarted"]
    assert [(r["phase"], r["failureClass"], r["attemptNo"], r["delay"]) for r in restarts] == [
        ("implement", "crash", 1, 0),
        ("implement", "crash", 2, 0),
    ]
    # Not a blocked attempt, no escalation, no error: one attempt that closed.
    state = e2e.read_state()
    assert (state["status"], state["retryCount"]) == ("closed", 0)
    [attempt] = state["attempts"]
    assert attempt["status"] == "closed" and "failureClass" not in attempt
    assert e2e.names().count("AttemptStarted") == 1
    assert "PhaseFailed" not in e2e.names()
    logs = e2e.dir / "logs" / "attempt-1"
    for try_log in ("implement-worker.try-1.log", "implement-worker.try-2.log"):
        assert "segfault" in (logs / try_log).read_text(encoding="utf-8")
    assert "segfault" not in (logs / "implement-worker.log").read_text(encoding="utf-8")


def test_restarts_run_out_the_attempt_ends_in_error_and_resumes(e2e: Harness) -> None:
    executor(e2e, maxRestarts=1)
    e2e.plan(crash=[{"phase": "implement", "times": 2, "exitCode": 7}])
    result = e2e.run()
    assert result.returncode == 5, result.stderr
    assert "(1 restarts) [crash]: exit code 7" in result.stderr
    (failed,) = [e for e in e2e.events() if e["event"] == "PhaseFailed"]
    assert (failed["failureClass"], failed["exitCode"]) == ("crash", 7)
    state = e2e.read_state()
    assert (state["retryCount"], state["attempts"][-1]["status"]) == (0, "error")
    assert state["attempts"][-1]["failureClass"] == "crash"
    status = json.loads(run_cli("status", "--json").stdout)
    assert (status["failureClass"], status["retryCount"]) == ("crash", 0)

    resumed = e2e.run()  # the third crash-free try: the same attempt closes
    assert resumed.returncode == 0, resumed.stderr
    [attempt] = e2e.read_state()["attempts"]
    assert attempt["status"] == "closed" and "failureClass" not in attempt


def test_a_timeout_is_transient(e2e: Harness) -> None:
    e2e.settings(timeout=5)  # research ends well within it, however busy the machine
    executor(e2e, maxRestarts=1)
    e2e.plan(hang=[{"phase": "implement", "seconds": 30}])
    result = e2e.run()
    assert result.returncode == 5, result.stderr
    assert invocations(e2e, "implement") == [(False, "timeout"), (False, "timeout")]
    restart = e2e.event("InvocationRestarted", 1)
    assert restart["failureClass"] == "timeout"
    assert e2e.read_state()["attempts"][-1]["failureClass"] == "timeout"


def test_missing_output_is_not_restarted(e2e: Harness) -> None:
    executor(e2e)
    e2e.plan(noOutput=[{"phase": "implement"}])
    result = e2e.run()
    assert result.returncode == 5, result.stderr
    assert invocations(e2e, "implement") == [(False, "no_output")]
    assert "InvocationRestarted" not in e2e.names()
    assert e2e.read_state()["attempts"][-1]["failureClass"] == "no_output"


@pytest.mark.parametrize("phase", ["review", "verify"])
def test_a_review_that_cannot_be_counted_fails_its_phase_instead_of_passing(
    e2e: Harness, phase: str
) -> None:
    # Read as zero findings, an error message in place of a review would close the ticket.
    executor(e2e)
    garbage = {"phase": phase, "role": "reviewer-general", "text": "Error: context window exceeded"}
    e2e.plan(findings=[finding("f1", "*")], garbage=[garbage])
    result = e2e.run()
    assert result.returncode == 5, result.stderr
    assert (False, "uncountable") in invocations(e2e, phase)
    assert "InvocationRestarted" not in e2e.names()
    last = e2e.read_state()["attempts"][-1]
    assert (last["status"], last["failureClass"]) == ("error", "uncountable")
    assert "status: closed" not in e2e.ticket_file.read_text()
    assert "cannot be counted" in result.stderr + result.stdout
    e2e.plan(findings=[finding("f1", "*")])  # the reviewer answers properly this time
    again = e2e.run()
    assert again.returncode == 0, again.stderr
    assert e2e.read_state()["attempts"][-1]["status"] == "closed"


def test_a_thinking_level_the_cli_lacks_is_said_in_the_invocation_log(
    e2e: Harness, tmp_path: Path
) -> None:
    # pi has no `max`: the flag is left out (the CLI's default applies), and the log says so
    wrapper = tmp_path / "pi"
    agent = Path(__file__).resolve().parent / "fake_agent.py"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{agent}"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    path = e2e.project / ".tf" / "config" / "settings.json"
    settings = json.loads(path.read_text(encoding="utf-8"))
    settings["metaModels"]["worker"] = {"model": "acme/pro", "thinking": "max"}
    settings["executor"] = {"kind": "command", "preset": "pi", "program": str(wrapper)}
    path.write_text(json.dumps(settings), encoding="utf-8")
    result = e2e.run()
    assert result.returncode == 0, result.stderr
    log = (e2e.dir / "logs" / "attempt-1" / "implement-worker.log").read_text(encoding="utf-8")
    assert "--thinking" not in log.splitlines()[0]
    assert "# not mapped (tf-fsm doctor): thinking 'max': pi has no such level" in log, log


def test_the_quality_path_is_unchanged(e2e: Harness) -> None:
    """Blocked by the gate: counted, escalated, classed `quality`; nothing restarts."""
    executor(e2e)
    e2e.plan(findings=[finding("f1", [STRONG])])
    result = e2e.run()
    assert result.returncode == 0, result.stderr
    state = e2e.read_state()
    assert [(a["status"], a.get("failureClass")) for a in state["attempts"]] == [
        ("blocked", "quality"),
        ("closed", None),
    ]
    assert e2e.event("AttemptStarted", 2)["trigger"] == "quality_gate"
    assert e2e.models("fixer")[-1] == (2, STRONG)
    assert "InvocationRestarted" not in e2e.names()


def test_budget_stops_the_next_attempt_and_reset_starts_a_fresh_one(e2e: Harness) -> None:
    # Each invocation reports $0.01; attempt 1 (research, implement, 3 reviews, fix, 3
    # post-fix reviews, close: 10 invocations) spends $0.10 and is blocked.
    path = e2e.project / ".tf" / "config" / "settings.json"
    settings = json.loads(path.read_text(encoding="utf-8"))
    settings["workflow"]["escalation"]["maxCostUsd"] = 0.05
    settings["executor"] |= {"preset": "pi", "command": [sys.executable, str(USAGE_AGENT)]}
    path.write_text(json.dumps(settings), encoding="utf-8")
    e2e.plan(findings=[finding("f1", [STRONG])])
    result = e2e.run()
    assert result.returncode == 4, result.stderr
    assert "budget: $0.1000 of $0.0500 spent" in result.stderr
    state = e2e.read_state()
    assert [a["status"] for a in state["attempts"]] == ["blocked"]
    assert state["attempts"][0]["usage"] == {
        "inputTokens": 10_000,
        "outputTokens": 1000,
        "costUsd": 0.1,
    }
    assert e2e.event("BudgetExhausted", 1)["spentUsd"] == 0.1
    # the journal says no retry followed, so a crash here would not make one look due
    assert e2e.event("TicketBlocked", 1)["autoRetry"] is False
    assert {c["attempt"] for c in e2e.agent_calls()} == {1}

    again = e2e.run()
    assert again.returncode == 4 and "budget:" in again.stderr
    assert len(e2e.agent_calls()) == 10  # refused before any agent ran
    planned = e2e.run("--plan", "--json")
    assert planned.returncode == 0, planned.stderr
    data = json.loads(planned.stdout)
    assert data["action"] == "exhausted" and data["why"].startswith("budget: $0.1000 of $0.0500")
    assert data["budget"] == {"maxCostUsd": 0.05, "spentUsd": 0.1, "nextAttemptUpToUsd": None}
    assert "budget: $0.1000 of $0.0500 spent\n" in e2e.run("--plan").stdout
    # status agrees: nothing runs next, and the loop would skip it
    status = run_cli("status", TICKET_ID, "--json", cwd=e2e.project)
    row = json.loads(status.stdout)
    row = row[0] if isinstance(row, list) else row
    assert row["next"].startswith("nothing: budget: $0.1000 of $0.0500"), row["next"]
    assert row["skip"] is True

    fresh = e2e.run("--retry-reset")
    assert fresh.returncode == 4, fresh.stderr  # attempt 1 ran again, then the budget
    assert e2e.read_state()["attempts"][0]["trigger"] == "initial"
    assert len(e2e.agent_calls()) == 20


# -- the real pi against the stub model server ------------------------------------------------


def kill_agents(mark: str, phase: str) -> Callable[[], None]:
    """SIGKILL the agent processes of this test's run in `phase` (found by their environment:
    tf_fsm passes its own through, and sets TF_PHASE for the agent only)."""

    def kill() -> None:
        wanted = {f"TF_KILL_MARK={mark}".encode(), f"TF_PHASE={phase}".encode()}
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit() or int(proc.name) == os.getpid():
                continue
            try:
                environ = set((proc / "environ").read_bytes().split(b"\0"))
            except OSError:
                continue
            if wanted <= environ:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(proc.name), signal.SIGKILL)

    return kill


def once(phase: str, reply: Reply) -> Callable[[Request, PhasePrompt], Reply | None]:
    """A fault on the first request of `phase` only."""
    done: list[bool] = []

    def fault(request: Request, prompt: PhasePrompt) -> Reply | None:
        if prompt.phase == phase and not done:
            done.append(True)
            return reply
        return None

    return fault


def pi_project(project: Path, tmp_path: Path, base_url: str, **executor: Any) -> PiProject:
    proj = PiProject(project, tmp_path, require_pi(), base_url)
    proj.settings(
        executor=executor,
        enableResearcher=False,
        enableCloser=False,
        enableReviewers=["reviewer-general"],
    )
    return proj


@pytest.mark.parametrize(
    ("fault", "failure_class"),
    [
        (Status(429, "Rate limit reached for requests"), "provider"),
        (Status(500, "The server had an error while processing your request"), "provider"),
    ],
)
def test_pi_provider_error_is_restarted(
    project: Path, tmp_path: Path, fault: Status, failure_class: str
) -> None:
    require_pi()
    with StubModelServer(lifecycle_script(TICKET_ID, faults=once("implement", fault))) as stub:
        proj = pi_project(project, tmp_path, stub.base_url)
        result = proj.tf("run", TICKET_ID)
    assert result.returncode == 0, result.stdout + result.stderr
    finished = [
        (e["phase"], e["ok"], e.get("failureClass")) for e in proj.events("InvocationFinished")
    ]
    assert finished == [
        ("implement", False, failure_class),
        ("implement", True, None),
        ("review", True, None),
    ]
    (restart,) = proj.events("InvocationRestarted")
    assert str(fault.code) in restart["failure"] and restart["failureClass"] == failure_class
    # pi exited 0: only its JSON output told the 429 from a success.
    first = (proj.dir / "logs" / "attempt-1" / "implement-worker.try-1.log").read_text()
    assert "# exit code: 0" in first
    state = proj.state()
    assert (state["retryCount"], [a["status"] for a in state["attempts"]]) == (0, ["closed"])
    # The failed call cost nothing; the two good invocations cost two replies each.
    assert state["attempts"][0]["usage"]["costUsd"] == round(4 * REPLY_COST, 6)


def test_pi_provider_errors_past_the_restarts_end_in_error_then_resume(
    project: Path, tmp_path: Path
) -> None:
    require_pi()
    broken = {"on": True}

    def faults(request: Request, prompt: PhasePrompt) -> Reply | None:
        return Status(500, "upstream unavailable") if broken["on"] else None

    with StubModelServer(lifecycle_script(TICKET_ID, faults=faults)) as stub:
        proj = pi_project(project, tmp_path, stub.base_url, maxRestarts=1)
        result = proj.tf("run", TICKET_ID)
        assert result.returncode == 5, result.stdout + result.stderr
        assert "[provider]" in result.stderr
        (failed,) = proj.events("PhaseFailed")
        assert (failed["phase"], failed["failureClass"]) == ("implement", "provider")
        assert proj.state()["attempts"][0]["failureClass"] == "provider"
        assert proj.status()["failureClass"] == "provider"
        broken["on"] = False
        resumed = proj.tf("resume", TICKET_ID)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    state = proj.state()
    assert [(a["status"], a.get("failureClass")) for a in state["attempts"]] == [("closed", None)]


def test_pi_hanging_past_the_timeout_is_restarted(project: Path, tmp_path: Path) -> None:
    require_pi()
    script = lifecycle_script(TICKET_ID, faults=once("review", Hang(60)))
    with StubModelServer(script) as stub:
        proj = pi_project(project, tmp_path, stub.base_url, timeoutSeconds=8)
        result = proj.tf("run", TICKET_ID)
    assert result.returncode == 0, result.stdout + result.stderr
    (restart,) = proj.events("InvocationRestarted")
    assert (restart["phase"], restart["failureClass"]) == ("review", "timeout")
    assert [a["status"] for a in proj.state()["attempts"]] == ["closed"]


def test_pi_killed_is_restarted(project: Path, tmp_path: Path) -> None:
    require_pi()
    mark = uuid.uuid4().hex
    script = lifecycle_script(
        TICKET_ID, faults=once("implement", Hang(30, on_start=kill_agents(mark, "implement")))
    )
    with StubModelServer(script) as stub:
        proj = pi_project(project, tmp_path, stub.base_url)
        result = proj.tf("run", TICKET_ID, TF_KILL_MARK=mark)
    assert result.returncode == 0, result.stdout + result.stderr
    (restart,) = proj.events("InvocationRestarted")
    assert (restart["failureClass"], restart["failure"]) == ("killed", "killed by signal 9")
    assert [a["status"] for a in proj.state()["attempts"]] == ["closed"]
