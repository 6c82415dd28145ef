"""Running the real Codex CLI under tf_fsm against the stub model server (openai_stub.py).

Codex reads its configuration from `$CODEX_HOME` (here a temp dir, so nothing of the user's
applies); the stub is a model provider given as `-c` overrides in `executor.extraArgs`:
`base_url` on 127.0.0.1, `wire_api = "responses"` (the only API Codex 0.169 speaks), the key
read from `$STUB_KEY`, and Codex's own retries off so that tf_fsm's restarts are what is
tested. Every tf_fsm metaModel is `openai/<stub model>`; the preset drops the prefix. Nothing
leaves the machine: the stub is Codex's only provider, and analytics are off.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.stubs.agent_project import TICKET_ID, AgentProject, require_agent
from tests.stubs.pi_env import API_KEY, MODELS, TICKET_TEXT

#: the Codex release these tests ran against
CODEX_VERSION = "0.169.0"
CODEX_PACKAGE = "@openai/codex"
#: the environment variable Codex reads the stub's API key from (`env_key`)
API_KEY_ENV = "STUB_KEY"


def require_codex() -> str:
    return require_agent("TF_FSM_CODEX", "codex", CODEX_PACKAGE, CODEX_VERSION)


def provider_args(base_url: str) -> list[str]:
    """`-c` overrides that make the stub Codex's model provider. Dotted keys, not a TOML
    inline table: `{` in extraArgs would be a tf_fsm placeholder."""
    return [
        "-c",
        'model_provider="stub"',
        "-c",
        'model_providers.stub.name="stub"',
        "-c",
        f'model_providers.stub.base_url="{base_url}"',
        "-c",
        'model_providers.stub.wire_api="responses"',
        "-c",
        f'model_providers.stub.env_key="{API_KEY_ENV}"',
        "-c",
        "model_providers.stub.request_max_retries=0",
        "-c",
        "model_providers.stub.stream_max_retries=0",
        "-c",
        "analytics.enabled=false",
        "-c",
        "check_for_update_on_startup=false",
    ]


class CodexProject(AgentProject):
    """A tf_fsm project whose agent is the real Codex, talking to `base_url`."""

    def __init__(self, project: Path, tmp_path: Path, codex: str, base_url: str) -> None:
        self.project, self.codex, self.base_url = project, codex, base_url
        self.home = tmp_path / "codex-home"  # CODEX_HOME and HOME: sessions, logs, config
        self.home.mkdir()
        self.dir = project / ".tf" / "knowledge" / "tickets" / TICKET_ID
        (project / ".tickets").mkdir(exist_ok=True)
        (project / ".tickets" / f"{TICKET_ID}.md").write_text(TICKET_TEXT, encoding="utf-8")
        self.settings()

    def settings(self, *, executor: dict[str, Any] | None = None, **workflow: Any) -> None:
        meta = {
            name: {"model": f"openai/{ident}", "thinking": "low"} for name, ident in MODELS.items()
        }
        conf = {
            "preset": "codex",
            "program": self.codex,
            "extraArgs": provider_args(self.base_url),
            "timeoutSeconds": 60,
            "restartBackoffSeconds": 0,
            **(executor or {}),
        }
        path = self.project / ".tf" / "config" / "settings.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        settings = {"metaModels": meta, "workflow": workflow, "executor": conf}
        path.write_text(json.dumps(settings, indent=2), encoding="utf-8")

    def agent_env(self) -> dict[str, str]:
        return {"CODEX_HOME": str(self.home), "HOME": str(self.home), API_KEY_ENV: API_KEY}
