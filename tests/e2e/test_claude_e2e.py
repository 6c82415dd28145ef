"""The real Claude Code CLI through a whole tf_fsm lifecycle, against the stub model server.

Claude Code speaks Anthropic's Messages API to `$ANTHROPIC_BASE_URL` (here the stub, on
127.0.0.1), and writes each artifact with its own `Write` tool. Its `--output-format json`
result reports usage and the dollar cost it computes from its own price table. Skipped, with
the reason, only when `claude` cannot be found.
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

from tests.stubs.agent_project import require_agent
from tests.stubs.openai_stub import (
    COMPLETION_TOKENS,
    PROMPT_TOKENS,
    Hang,
    Status,
    StubModelServer,
    lifecycle_script,
)
from tests.stubs.pi_env import TICKET_TEXT
from tests.test_transient import kill_agents, once

CLAUDE_VERSION = "2.1.197"
TICKET = "pt-1"
MODEL = "claude-sonnet-4-5"
API_KEY = "sk-ant-api03-" + "x7Qb2" * 8  # a key in Anthropic's format: redacted by pattern
#: claude-sonnet-4-5 at $3 / $15 per million tokens, for 2 calls of 1000 in + 100 out
INVOCATION_COST = 0.009


def find_claude() -> str:
    return require_agent("TF_FSM_CLAUDE", "claude", "@anthropic-ai/claude-code", CLAUDE_VERSION)


def setup(project: Path, claude: str, timeout: float = 60, **workflow: Any) -> Path:
    (project / ".tickets").mkdir(exist_ok=True)
    (project / ".tickets" / f"{TICKET}.md").write_text(TICKET_TEXT, encoding="utf-8")
    names = (
        "worker",
        "research",
        "fast",
        "general",
        "review-general",
        "review-spec",
        "review-secop",
        "fixer",
    )
    settings = {
        "metaModels": {n: {"model": f"anthropic/{MODEL}", "thinking": "high"} for n in names},
        "workflow": workflow,
        "executor": {
            "preset": "claude",
            "program": claude,
            "timeoutSeconds": timeout,
            "restartBackoffSeconds": 0,
        },
    }
    (project / ".tf" / "config" / "settings.json").write_text(json.dumps(settings))
    return project / ".tf" / "knowledge" / "tickets" / TICKET


def run(
    project: Path, tmp_path: Path, base_url: str, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": base_url.removesuffix("/v1"),
        "ANTHROPIC_API_KEY": API_KEY,
        "HOME": str(home),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",  # its own retries off: tf_fsm's restarts are tested
        "TF_FSM_ROOT": str(project),
        **extra_env,
    }
    return subprocess.run(
        [sys.executable, "-m", "tf_fsm", "run", TICKET],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def events(ticket_dir: Path, name: str) -> list[dict[str, Any]]:
    lines = (ticket_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


def test_claude_runs_a_whole_lifecycle(project: Path, tmp_path: Path) -> None:
    claude = find_claude()
    major = "`src/parser.py:42` - parse_expr recurses without bound"
    with StubModelServer(lifecycle_script(TICKET, majors=[major])) as stub:
        ticket_dir = setup(project, claude)
        result = run(project, tmp_path, stub.base_url)
        requests = [r for r in stub.requests if r.anthropic]
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Added the depth limit" in (ticket_dir / "implementation.md").read_text()
    assert major in (ticket_dir / "fixes.md").read_text()
    assert "**CLOSED**" in (ticket_dir / "close-summary.md").read_text()
    assert {r.body["model"] for r in requests} == {MODEL}  # the provider prefix is dropped
    log = (ticket_dir / "logs" / "attempt-1" / "implement-worker.log").read_text()
    assert shlex.split(log.splitlines()[0].removeprefix("$ ")) == [
        claude,
        "-p",
        "--output-format",
        "json",
        "--permission-mode",
        "acceptEdits",
        "--no-session-persistence",
        "--model",
        MODEL,
        "--effort",
        "high",
    ]
    finished = events(ticket_dir, "InvocationFinished")
    assert len(finished) == 10
    expected = {
        "inputTokens": 2 * PROMPT_TOKENS,
        "outputTokens": 2 * COMPLETION_TOKENS,
        "costUsd": INVOCATION_COST,
    }
    assert all(e["usage"] == expected for e in finished), finished
    state = json.loads((ticket_dir / "retry-state.json").read_text())
    assert state["attempts"][0]["usage"]["costUsd"] == round(10 * INVOCATION_COST, 6)
    for path in ticket_dir.rglob("*"):
        if path.is_file():
            assert API_KEY not in path.read_text(encoding="utf-8", errors="replace"), path


def test_claude_rate_limit_is_restarted(project: Path, tmp_path: Path) -> None:
    claude = find_claude()
    hit: list[bool] = []

    def faults(request: Any, prompt: Any) -> Status | None:
        if prompt.phase == "implement" and not hit:
            hit.append(True)
            return Status(429, "rate_limit_error: slow down")
        return None

    with StubModelServer(lifecycle_script(TICKET, faults=faults)) as stub:
        ticket_dir = setup(
            project,
            claude,
            enableResearcher=False,
            enableCloser=False,
            enableReviewers=["reviewer-general"],
        )
        result = run(project, tmp_path, stub.base_url)
    assert result.returncode == 0, result.stdout + result.stderr
    (restart,) = events(ticket_dir, "InvocationRestarted")
    assert (restart["phase"], restart["failureClass"]) == ("implement", "provider")
    assert "429" in restart["failure"]


def statuses(ticket_dir: Path) -> list[str]:
    state = json.loads((ticket_dir / "retry-state.json").read_text())
    return [a["status"] for a in state["attempts"]]


SHORT = {"enableResearcher": False, "enableCloser": False, "enableReviewers": ["reviewer-general"]}


def test_claude_server_error_is_restarted(project: Path, tmp_path: Path) -> None:
    claude = find_claude()
    fault = once("implement", Status(500, "api_error: Internal server error"))
    with StubModelServer(lifecycle_script(TICKET, faults=fault)) as stub:
        ticket_dir = setup(project, claude, **SHORT)
        result = run(project, tmp_path, stub.base_url)
    assert result.returncode == 0, result.stdout + result.stderr
    finished = [
        (e["phase"], e["ok"], e.get("failureClass"))
        for e in events(ticket_dir, "InvocationFinished")
    ]
    assert finished[:2] == [("implement", False, "provider"), ("implement", True, None)]
    (restart,) = events(ticket_dir, "InvocationRestarted")
    assert restart["failureClass"] == "provider" and "500" in restart["failure"], restart
    assert statuses(ticket_dir) == ["closed"]


def test_claude_hanging_past_the_timeout_is_restarted(project: Path, tmp_path: Path) -> None:
    """The stub never answers the review's first request; tf_fsm kills Claude Code's process
    group at `timeoutSeconds` (an invocation takes about 1.5 s here)."""
    claude = find_claude()
    with StubModelServer(lifecycle_script(TICKET, faults=once("review", Hang(60)))) as stub:
        ticket_dir = setup(project, claude, timeout=8, **SHORT)
        result = run(project, tmp_path, stub.base_url)
    assert result.returncode == 0, result.stdout + result.stderr
    (restart,) = events(ticket_dir, "InvocationRestarted")
    assert (restart["phase"], restart["failureClass"]) == ("review", "timeout")
    assert statuses(ticket_dir) == ["closed"]


def test_claude_killed_is_restarted(project: Path, tmp_path: Path) -> None:
    """SIGKILL to Claude Code while its model request is open."""
    claude = find_claude()
    mark = uuid.uuid4().hex
    fault = once("implement", Hang(30, on_start=kill_agents(mark, "implement")))
    with StubModelServer(lifecycle_script(TICKET, faults=fault)) as stub:
        ticket_dir = setup(project, claude, **SHORT)
        result = run(project, tmp_path, stub.base_url, TF_KILL_MARK=mark)
    assert result.returncode == 0, result.stdout + result.stderr
    (restart,) = events(ticket_dir, "InvocationRestarted")
    assert (restart["failureClass"], restart["failure"]) == ("killed", "killed by signal 9")
    assert statuses(ticket_dir) == ["closed"]
