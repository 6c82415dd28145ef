"""The real Codex CLI under the codex preset, pointed at the stub model server on loopback.

Codex 0.169 speaks only OpenAI's Responses API, which the stub answers with errors only (it
streams chat completions and Anthropic messages, not responses). So this runs the error path
for real: Codex takes the preset's argv, reads the prompt from stdin, sends a `/v1/responses`
request for the role's model, gets a 429, and reports it in its `--json` events; tf_fsm classes
it `provider`, restarts, and ends the attempt in error when the restarts run out. Skipped, with
the reason, only when `codex` cannot be found.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.stubs.openai_stub import Reply, Request, Status, StubModelServer
from tests.stubs.pi_env import TICKET_TEXT

CODEX_VERSION = "0.169.0"
TICKET = "pt-1"


def find_codex() -> str:
    explicit = os.environ.get("TF_FSM_CODEX")
    found = explicit if explicit and Path(explicit).is_file() else shutil.which("codex")
    if found is None:
        pytest.skip(
            "codex not found (neither $TF_FSM_CODEX nor `codex` on PATH): "
            f"npm install -g @openai/codex@{CODEX_VERSION}"
        )
    return found


def test_codex_provider_errors_are_restarted_then_end_in_error(
    project: Path, tmp_path: Path
) -> None:
    codex = find_codex()

    def rate_limited(request: Request) -> Reply:
        return Status(429, "Rate limit reached for requests")

    with StubModelServer(rate_limited) as stub:
        (project / ".tickets").mkdir()
        (project / ".tickets" / f"{TICKET}.md").write_text(TICKET_TEXT, encoding="utf-8")
        # Dotted -c keys, not a TOML inline table: `{` in extraArgs would be a placeholder.
        provider = [
            "-c", 'model_provider="stub"',
            "-c", 'model_providers.stub.name="stub"',
            "-c", f'model_providers.stub.base_url="{stub.base_url}"',
            "-c", 'model_providers.stub.wire_api="responses"',
            "-c", 'model_providers.stub.env_key="STUB_KEY"',
            "-c", "model_providers.stub.request_max_retries=0",
            "-c", "model_providers.stub.stream_max_retries=0",
        ]  # fmt: skip
        settings: dict[str, Any] = {
            "metaModels": {"worker": {"model": "openai/gpt-5.1", "thinking": "high"}},
            "executor": {"preset": "codex", "program": codex, "extraArgs": provider,
                         "maxRestarts": 1, "restartBackoffSeconds": 0, "timeoutSeconds": 60},
        }  # fmt: skip
        (project / ".tf" / "config" / "settings.json").write_text(json.dumps(settings))
        home = tmp_path / "codex-home"
        home.mkdir()
        env = {**os.environ, "CODEX_HOME": str(home), "HOME": str(home), "STUB_KEY": "k" * 16}
        result = subprocess.run(
            [sys.executable, "-m", "tf_fsm", "run", TICKET, "--no-research"],
            cwd=project, env=env, capture_output=True, text=True, timeout=180,
        )  # fmt: skip
        requests = list(stub.requests)
    assert result.returncode == 5, result.stdout + result.stderr
    assert len(requests) == 2  # the first try and its one restart
    assert {r.body.get("model") for r in requests} == {"gpt-5.1"}  # the prefix is dropped
    assert all(r.body.get("stream") is True and "input" in r.body for r in requests)
    ticket_dir = project / ".tf" / "knowledge" / "tickets" / TICKET
    lines = (ticket_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()
    evs = [json.loads(line) for line in lines]
    (restart,) = [e for e in evs if e["event"] == "InvocationRestarted"]
    (failed,) = [e for e in evs if e["event"] == "PhaseFailed"]
    assert (restart["failureClass"], failed["failureClass"]) == ("provider", "provider")
    assert "429" in failed["failure"]
    log = (ticket_dir / "logs" / "attempt-1" / "implement-worker.log").read_text()
    assert "model_reasoning_effort=high" in log.splitlines()[0]
    assert log.splitlines()[0].endswith(" -")  # the prompt came on stdin
