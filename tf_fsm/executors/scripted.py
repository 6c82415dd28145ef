"""The `scripted` executor: a deterministic offline agent for the demo, tests and simulations.

A scenario file (JSON) says which findings the reviewers report and which fixer models can
clear each one. The agent writes real artifacts in the real formats, and remembers what its
fixes cleared in `<ticket dir>/scripted-agent.json` (as a real agent's edits persist in the
working tree), so escalating the fixer visibly changes the outcome.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tf_fsm._json_input import load_json
from tf_fsm.core.reports import Finding, render_review
from tf_fsm.core.state import SEVERITIES
from tf_fsm.errors import SettingsError, SettingsProblem
from tf_fsm.executors.base import ExecutorError, Invocation, InvocationResult
from tf_fsm.fs.atomic import json_text
from tf_fsm.storage.store import atomic_write_text

MEMORY_FILE = "scripted-agent.json"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ScriptedFinding(_Strict):
    id: str
    severity: Literal["Critical", "Major", "Minor", "Warnings", "Suggestions"]
    text: str
    reviewer: str = "reviewer-general"
    #: fixer models that clear it; "*" = any fixer
    fixedBy: list[str] | Literal["*"] = "*"
    #: the attempts on which reviewers report it (None = every attempt while it is open)
    attempts: list[int] | None = None


class ScriptedFailure(_Strict):
    phase: str
    attempt: int | None = None  # None = every attempt
    role: str | None = None
    message: str = "scripted failure"
    #: how the failure is classed (tf_fsm/executors/failures.py). A scripted failure repeats
    #: on every matching invocation, so by default it is not one a restart could clear.
    failureClass: Literal["crash", "timeout", "killed", "provider", "agent_error"] = "agent_error"


class Script(_Strict):
    findings: list[ScriptedFinding] = Field(default_factory=list)
    failures: list[ScriptedFailure] = Field(default_factory=list)
    delaySeconds: float = Field(default=0.0, ge=0)


class Scenario(Script):
    tickets: dict[str, Script] = Field(default_factory=dict)

    def for_ticket(self, ticket_id: str) -> Script:
        return self.tickets.get(ticket_id, self)


#: The demo: a Major finding only a stronger fixer clears, and a Minor any fixer clears.
DEMO_SCENARIO: dict[str, Any] = {
    "findings": [
        {
            "id": "F1",
            "severity": "Major",
            "text": "`src/parser.py:42` - unbounded recursion on nested input; add a depth limit",
            "reviewer": "reviewer-general",
            "fixedBy": ["openai-codex/gpt-5.3-codex"],
        },
        {
            "id": "F2",
            "severity": "Minor",
            "text": "`src/parser.py:17` - error message omits the offending line number",
            "reviewer": "reviewer-second-opinion",
            "fixedBy": "*",
        },
        {
            "id": "F3",
            "severity": "Suggestions",
            "text": "`tests/test_parser.py` - add a property test for round-tripping",
            "reviewer": "reviewer-spec-audit",
            "fixedBy": [],
        },
    ]
}


def load_scenario(path: Path | None) -> Scenario:
    if path is None:
        return Scenario.model_validate(DEMO_SCENARIO)
    try:
        return Scenario.model_validate_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ExecutorError(f"{path}: scenario file not found", "executor.scenario") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ExecutorError(f"{path}: cannot read: {exc}", "executor.scenario") from None
    except ValidationError as exc:
        problems = [
            SettingsProblem(".".join(map(str, e["loc"])), str(e["msg"])) for e in exc.errors()
        ]
        raise SettingsError(path, problems) from None


class ScriptedExecutor:
    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario

    def check(self) -> None:
        """Nothing external to check: the scripted agent runs in-process."""

    def invoke(self, invocation: Invocation) -> InvocationResult:
        started = time.monotonic()
        script = self.scenario.for_ticket(invocation.ticket_id)
        if script.delaySeconds:
            time.sleep(script.delaySeconds)
        for failure in script.failures:
            if (
                failure.phase == invocation.phase
                and failure.attempt in (None, invocation.attempt)
                and failure.role in (None, invocation.role)
            ):
                return InvocationResult(
                    ok=False,
                    duration=time.monotonic() - started,
                    failure=f"exit code 1: {failure.message}",
                    exit_code=1,
                    stderr_tail=failure.message,
                    log=f"scripted agent failed: {failure.message}\n",
                    failure_class=failure.failureClass,
                )
        text = self._write(invocation, script)
        # an agent's own write: agents do not fsync (tf_fsm journals the file's sha256)
        atomic_write_text(invocation.output, text, within=invocation.artifact_dir, durable=False)
        return InvocationResult(
            ok=True,
            duration=time.monotonic() - started,
            exit_code=0,
            log=f"scripted agent ({invocation.model}) wrote {invocation.output.name}\n",
        )

    # -- what the agent writes -------------------------------------------------------------

    def _memory(self, invocation: Invocation) -> dict[str, Any]:
        path = invocation.artifact_dir / MEMORY_FILE
        if not path.exists():
            return {"fixed": []}
        data: dict[str, Any] = load_json(path.read_text(encoding="utf-8"))
        return data

    def _open(self, invocation: Invocation, script: Script) -> list[ScriptedFinding]:
        fixed = set(self._memory(invocation)["fixed"])
        return [
            f
            for f in script.findings
            if f.id not in fixed and (f.attempts is None or invocation.attempt in f.attempts)
        ]

    def _write(self, inv: Invocation, script: Script) -> str:
        title = f"{inv.phase.capitalize()}: {inv.ticket_id}"
        if inv.phase == "research":
            return (
                f"# Research: {inv.ticket_id}\n\n## Findings\n- scripted research ({inv.model})\n"
            )
        if inv.phase == "implement":
            return (
                f"# Implementation: {inv.ticket_id}\n\n## Summary\nScripted implementation "
                f"by {inv.model} (attempt {inv.attempt}).\n\n## Files Changed\n- `src/parser.py`\n"
            )
        if inv.phase in ("review", "verify"):
            mine = [f for f in self._open(inv, script) if f.reviewer == inv.role]
            findings = [Finding(f.severity, f.text, inv.role) for f in mine]
            return render_review(inv.ticket_id, findings)
        if inv.phase == "fix":
            open_findings = self._open(inv, script)
            cleared = [f for f in open_findings if f.fixedBy == "*" or inv.model in f.fixedBy]
            memory = self._memory(inv)
            memory["fixed"] = sorted({*memory["fixed"], *(f.id for f in cleared)})
            atomic_write_text(
                inv.artifact_dir / MEMORY_FILE,
                json_text(memory),
                within=inv.artifact_dir,
                durable=False,
            )
            lines = [f"# Fixes: {inv.ticket_id}", "", "## Fixes Applied"]
            lines += [f"- [{f.severity}] {f.text}" for f in cleared] or ["- none"]
            left = [f for f in open_findings if f not in cleared]
            lines += ["", "## Not Fixed"]
            lines += [f"- [{f.severity}] {f.text}" for f in left] or ["- none"]
            lines += ["", "## Summary Statistics"]
            lines += [f"- {s}: {sum(f.severity == s for f in cleared)}" for s in SEVERITIES]
            return "\n".join(lines) + "\n"
        return f"# {title}\n\nScripted close notes by {inv.model}.\n"
