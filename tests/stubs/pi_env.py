"""Running the real `pi` CLI under tf_fsm against the stub model server (openai_stub.py).

pi reads `models.json` and `settings.json` from `$PI_CODING_AGENT_DIR`; the stub is a custom
provider there (`baseUrl` on 127.0.0.1, OpenAI chat completions), every tf_fsm metaModel is one
of its models, and pi's own retries are off so that tf_fsm's restarts are what is tested.
`PI_OFFLINE=1` stops pi's start-up network calls. Nothing leaves the machine.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import tk_ticket
from tests.stubs.agent_project import TICKET_ID, AgentProject, require_agent

#: the pi release these tests ran against (CI installs exactly this one)
PI_VERSION = "0.73.1"
PI_PACKAGE = "@mariozechner/pi-coding-agent"
#: dollars per million tokens in models.json; the stub reports 1000 prompt + 100 completion
#: tokens per reply, so one reply costs 0.001 + 0.0002 dollars
COST = {"input": 1.0, "output": 2.0, "cacheRead": 0, "cacheWrite": 0}
REPLY_COST = 0.0012
#: an API key that matches no provider pattern: only the environment-value rule redacts it
API_KEY_ENV = "STUB_PROVIDER_API_KEY"
API_KEY = "stubkey-7f3a9c2e4b1d8a6f0e5c"
#: metaModel name -> stub model id (every role gets a distinct model, to check --model)
MODELS = {
    "worker": "coder",
    "research": "researcher",
    "fast": "closer",
    "general": "general",
    "review-general": "reviewer-a",
    "review-spec": "reviewer-b",
    "review-secop": "reviewer-c",
    "fixer": "fixer",
    "strong": "fixer-strong",
}

TICKET_TEXT = tk_ticket("pt-1")


def require_pi() -> str:
    return require_agent("TF_FSM_PI", "pi", PI_PACKAGE, PI_VERSION)


class PiProject(AgentProject):
    """A tf_fsm project whose agent is the real pi, talking to `base_url`."""

    def __init__(self, project: Path, tmp_path: Path, pi: str, base_url: str) -> None:
        self.project, self.pi = project, pi
        self.agent_dir = tmp_path / "pi-agent"
        self.agent_dir.mkdir()
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.dir = project / ".tf" / "knowledge" / "tickets" / TICKET_ID
        (project / ".tickets").mkdir(exist_ok=True)
        (project / ".tickets" / f"{TICKET_ID}.md").write_text(TICKET_TEXT, encoding="utf-8")
        models = [
            {
                "id": ident,
                "reasoning": False,
                "cost": COST,
                "contextWindow": 32000,
                "maxTokens": 4096,
            }
            for ident in MODELS.values()
        ]
        provider = {
            "baseUrl": base_url,
            "api": "openai-completions",
            "apiKey": API_KEY_ENV,  # pi reads the key from this environment variable
            "compat": {"supportsDeveloperRole": False, "supportsReasoningEffort": False},
            "models": models,
        }
        self._json(self.agent_dir / "models.json", {"providers": {"stub": provider}})
        # pi's own retries off: a 429 must reach tf_fsm, whose restarts are under test.
        retry = {"enabled": False, "provider": {"maxRetries": 0}}
        self._json(self.agent_dir / "settings.json", {"retry": retry})
        self.settings()

    @staticmethod
    def _json(path: Path, data: Any) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")

    def settings(self, *, executor: dict[str, Any] | None = None, **workflow: Any) -> None:
        meta = {
            name: {"model": f"stub/{ident}", "thinking": "low"} for name, ident in MODELS.items()
        }
        conf = {
            "preset": "pi",
            "program": self.pi,
            "timeoutSeconds": 60,
            "restartBackoffSeconds": 0,
            **(executor or {}),
        }
        self._json(
            self.project / ".tf" / "config" / "settings.json",
            {"metaModels": meta, "workflow": workflow, "executor": conf},
        )

    def agent_env(self) -> dict[str, str]:
        return {
            "PI_CODING_AGENT_DIR": str(self.agent_dir),
            "PI_OFFLINE": "1",
            "PI_TELEMETRY": "0",
            "HOME": str(self.home),
            API_KEY_ENV: API_KEY,
        }
