"""The real Codex CLI under the codex preset, against the stub model server on loopback.

Codex 0.169 speaks only OpenAI's Responses API; the stub answers it (tests/stubs/
responses_api.py), so Codex runs whole tf_fsm lifecycles for real: tf_fsm runs `codex exec
--json ... -`, Codex sends the prompt to `/v1/responses` for the role's model, the stub's
scripted reply has Codex write the phase artifact with its own shell tool (`exec_command`, in
Codex's `workspace-write` sandbox), and the usage comes from Codex's `turn.completed` events.
The transient path is Codex's too: a 429/500 it reports, a request hanging past the timeout,
the agent killed. Skipped, with the reason, only when `codex` cannot be found.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.stubs.codex_env import API_KEY_ENV, CodexProject, provider_args, require_codex
from tests.stubs.openai_stub import (
    COMPLETION_TOKENS,
    PROMPT_TOKENS,
    Hang,
    Reply,
    Request,
    Status,
    StubModelServer,
    Text,
    lifecycle_script,
)
from tests.stubs.pi_env import API_KEY, MODELS, TICKET_ID, TICKET_TEXT
from tests.test_transient import kill_agents, once

MAJOR = "`src/parser.py:42` - parse_expr recurses without bound on nested input"
#: one Codex turn: the tool call that writes the artifact, then the answer; Codex sums both
PER_INVOCATION = {
    "inputTokens": 2 * PROMPT_TOKENS,
    "outputTokens": 2 * COMPLETION_TOKENS,
    "costUsd": 0.0,
}
#: attempt 1: research, implement, 3 reviews, fix, 3 verifies, close (blocked);
#: attempt 2: 3 reviews, the escalated fix, 3 verifies, close
ATTEMPT_INVOCATIONS = (10, 8)


@pytest.fixture
def codex() -> str:
    return require_codex()


def test_codex_runs_a_whole_lifecycle_blocked_then_escalated(
    codex: str, project: Path, tmp_path: Path
) -> None:
    """Attempt 1 is blocked (the finding survives the fix), attempt 2 escalates the fixer to
    the `strong` model, which clears it, and closes. The model echoes the API key in its last
    words, which Codex prints in its JSON output: no file tf_fsm wrote may hold it."""
    script = lifecycle_script(
        TICKET_ID, majors=[MAJOR], verify_majors=[MAJOR], cleared_from_attempt=2
    )

    def leaky(request: Request) -> Reply:
        reply = script(request)
        return Text(f"Done; I used key {API_KEY}.") if isinstance(reply, Text) else reply

    with StubModelServer(leaky) as stub:
        proj = CodexProject(project, tmp_path, codex, stub.base_url)
        escalation = {"enabled": True, "maxRetries": 3, "models": {"fixer": "strong"}}
        proj.settings(escalation=escalation)
        doctor = proj.tf("doctor")
        assert doctor.returncode == 0, doctor.stdout + doctor.stderr
        assert "(codex-cli " in doctor.stdout
        result = proj.tf("run", TICKET_ID)
        requests = list(stub.requests)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "CLOSED after attempt 2" in result.stdout

    # The state: blocked by the quality gate, then closed with the escalated fixer.
    state = proj.state()
    attempts = [(a["attemptNumber"], a["status"], a.get("failureClass")) for a in state["attempts"]]
    assert attempts == [(1, "blocked", "quality"), (2, "closed", None)]
    assert state["attempts"][0]["escalation"]["fixer"] is None
    assert state["attempts"][1]["escalation"]["fixer"] == "openai/fixer-strong"
    assert state["status"] == "closed"

    # Codex wrote every artifact with its shell tool, as the stub told it to.
    assert "## Findings" in (proj.dir / "research.md").read_text()
    assert "Added the depth limit" in (proj.dir / "implementation.md").read_text()
    assert MAJOR in (proj.dir / "review-general.md").read_text()
    assert MAJOR in (proj.dir / "fixes.md").read_text()
    assert "- Major: 0" in (proj.dir / "post-fix-review-general.md").read_text()
    assert "**CLOSED**" in (proj.dir / "close-summary.md").read_text()

    # What Codex sent: Responses API requests offering `exec_command`, the tf_fsm prompt as
    # the last user message, two requests per invocation (the second carries the command's
    # output), each for its role's model without the `openai/` prefix; attempt 2's fixer is
    # the escalated model.
    assert all(r.responses and r.body["stream"] is True for r in requests)
    assert "exec_command" in [t.get("name") for t in requests[0].body["tools"]]
    assert len(requests) == 2 * sum(ATTEMPT_INVOCATIONS)
    assert [r.after_tool for r in requests] == [False, True] * sum(ATTEMPT_INVOCATIONS)
    fixers = [r.body["model"] for r in requests[::2] if "- Phase: fix" in r.user_text()]
    assert fixers == [MODELS["fixer"], MODELS["strong"]]
    assert {r.body["model"] for r in requests} == {
        MODELS[m]
        for m in (
            "research",
            "worker",
            "review-general",
            "review-spec",
            "review-secop",
            "fixer",
            "strong",
            "fast",
        )
    }

    # The preset's exact argv, then the stub provider, in each log; the prompt on stdin.
    log = (proj.dir / "logs" / "attempt-2" / "fix-fixer.log").read_text()
    argv = shlex.split(log.splitlines()[0].removeprefix("$ "))
    assert argv == [
        codex,
        "exec",
        "--json",
        "--skip-git-repo-check",
        "--sandbox",
        "workspace-write",
        "-m",
        MODELS["strong"],
        "-c",
        "model_reasoning_effort=low",
        *provider_args(stub.base_url),
        "-",
    ]

    # Usage per invocation in the journal (Codex reports no cost), per attempt in retry-state,
    # per ticket in status.
    finished = proj.events("InvocationFinished")
    assert len(finished) == sum(ATTEMPT_INVOCATIONS)
    assert all(e["ok"] and e["usage"] == PER_INVOCATION for e in finished), finished
    for attempt, count in zip(state["attempts"], ATTEMPT_INVOCATIONS, strict=True):
        assert attempt["usage"] == {k: v * count for k, v in PER_INVOCATION.items()}
    status = proj.status()
    total = sum(ATTEMPT_INVOCATIONS)
    assert status["usage"] == {k: v * total for k, v in PER_INVOCATION.items()}

    # Codex authenticated with the key from $STUB_KEY, but no file tf_fsm wrote holds it.
    assert all(r.headers.get("authorization") == f"Bearer {API_KEY}" for r in requests)
    assert "Done; I used key " in log  # the model did echo it; Codex printed it
    written = [p for p in (project / ".tf").rglob("*") if p.is_file()]
    assert any(p.suffix == ".log" for p in written)
    for path in written:
        assert API_KEY not in path.read_text(encoding="utf-8", errors="replace"), path


def test_codex_provider_errors_are_restarted_then_end_in_error(
    codex: str, project: Path, tmp_path: Path
) -> None:
    """Every request answered 429: Codex reports it in its `--json` events (its own retries
    are off); tf_fsm classes it `provider`, restarts, and ends the attempt in error when the
    restarts run out."""

    def rate_limited(request: Request) -> Reply:
        return Status(429, "Rate limit reached for requests")

    with StubModelServer(rate_limited) as stub:
        (project / ".tickets").mkdir()
        (project / ".tickets" / f"{TICKET_ID}.md").write_text(TICKET_TEXT, encoding="utf-8")
        settings: dict[str, Any] = {
            "metaModels": {"worker": {"model": "openai/gpt-5.1", "thinking": "high"}},
            "executor": {
                "preset": "codex",
                "program": codex,
                "extraArgs": provider_args(stub.base_url),
                "maxRestarts": 1,
                "restartBackoffSeconds": 0,
                "timeoutSeconds": 60,
            },
        }
        (project / ".tf" / "config" / "settings.json").write_text(json.dumps(settings))
        home = tmp_path / "codex-home"
        home.mkdir()
        env = {**os.environ, "CODEX_HOME": str(home), "HOME": str(home), API_KEY_ENV: "k" * 16}
        result = subprocess.run(
            [sys.executable, "-m", "tf_fsm", "run", TICKET_ID, "--no-research"],
            cwd=project,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
        requests = list(stub.requests)
    assert result.returncode == 5, result.stdout + result.stderr
    assert len(requests) == 2  # the first try and its one restart
    assert {r.body.get("model") for r in requests} == {"gpt-5.1"}  # the prefix is dropped
    assert all(r.body.get("stream") is True and "input" in r.body for r in requests)
    ticket_dir = project / ".tf" / "knowledge" / "tickets" / TICKET_ID
    lines = (ticket_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    evs = [json.loads(line) for line in lines]
    (restart,) = [e for e in evs if e["event"] == "InvocationRestarted"]
    (failed,) = [e for e in evs if e["event"] == "PhaseFailed"]
    assert (restart["failureClass"], failed["failureClass"]) == ("provider", "provider")
    assert "429" in failed["failure"]
    log = (ticket_dir / "logs" / "attempt-1" / "implement-worker.log").read_text()
    assert "model_reasoning_effort=high" in log.splitlines()[0]
    assert log.splitlines()[0].endswith(" -")  # the prompt came on stdin


# -- the transient path, each fault once: restarted, then the attempt closes --------------


def short_project(
    project: Path, tmp_path: Path, codex: str, base_url: str, **executor: Any
) -> CodexProject:
    """Short lifecycles: implement and one review (no finding, so no fix); no research, no
    closer."""
    proj = CodexProject(project, tmp_path, codex, base_url)
    proj.settings(
        executor=executor,
        enableResearcher=False,
        enableCloser=False,
        enableReviewers=["reviewer-general"],
    )
    return proj


def test_codex_server_error_is_restarted(codex: str, project: Path, tmp_path: Path) -> None:
    """Codex reports an HTTP 500 without its status code ("We're currently experiencing high
    demand, ..."); tf_fsm must still class it `provider`, not a permanent agent error."""
    fault = once("implement", Status(500, "The server had an error processing your request"))
    with StubModelServer(lifecycle_script(TICKET_ID, faults=fault)) as stub:
        proj = short_project(project, tmp_path, codex, stub.base_url)
        result = proj.tf("run", TICKET_ID)
    assert result.returncode == 0, result.stdout + result.stderr
    finished = [
        (e["phase"], e["ok"], e.get("failureClass")) for e in proj.events("InvocationFinished")
    ]
    assert finished[:2] == [("implement", False, "provider"), ("implement", True, None)]
    (restart,) = proj.events("InvocationRestarted")
    assert restart["failureClass"] == "provider" and "high demand" in restart["failure"]
    state = proj.state()
    assert [(a["status"], a.get("failureClass")) for a in state["attempts"]] == [("closed", None)]
    # The failed try reported no usage; the two good invocations did.
    assert state["attempts"][0]["usage"]["inputTokens"] == 2 * 2 * PROMPT_TOKENS


def test_codex_hanging_past_the_timeout_is_restarted(
    codex: str, project: Path, tmp_path: Path
) -> None:
    """The stub never answers the review's first request; Codex waits, and tf_fsm kills its
    process group at `timeoutSeconds` (a Codex invocation takes about half a second here)."""
    script = lifecycle_script(TICKET_ID, faults=once("review", Hang(60)))
    with StubModelServer(script) as stub:
        proj = short_project(project, tmp_path, codex, stub.base_url, timeoutSeconds=6)
        result = proj.tf("run", TICKET_ID)
    assert result.returncode == 0, result.stdout + result.stderr
    (restart,) = proj.events("InvocationRestarted")
    assert (restart["phase"], restart["failureClass"]) == ("review", "timeout")
    assert [a["status"] for a in proj.state()["attempts"]] == ["closed"]


def test_codex_killed_is_restarted(codex: str, project: Path, tmp_path: Path) -> None:
    """SIGKILL to the Codex processes (its node launcher and the native binary) while their
    model request is open."""
    mark = uuid.uuid4().hex
    fault = once("implement", Hang(30, on_start=kill_agents(mark, "implement")))
    with StubModelServer(lifecycle_script(TICKET_ID, faults=fault)) as stub:
        proj = short_project(project, tmp_path, codex, stub.base_url)
        result = proj.tf("run", TICKET_ID, TF_KILL_MARK=mark)
    assert result.returncode == 0, result.stdout + result.stderr
    (restart,) = proj.events("InvocationRestarted")
    assert (restart["failureClass"], restart["failure"]) == ("killed", "killed by signal 9")
    assert [a["status"] for a in proj.state()["attempts"]] == ["closed"]
