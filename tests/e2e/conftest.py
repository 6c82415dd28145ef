"""Harness for end-to-end runs of `tf-fsm run` against the fake agent (tests/fake_agent.py).

Everything is observed from the outside, as a user (or pi-ticketflow) would: exit codes,
retry-state.json, chain-context.json, the journal, the tk ticket file and the fake agent's own
log of which model ran in which phase on which attempt.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, tk_ticket
from tests.e2e.workspace_project import Project
from tests.gitrepo import isolate

AGENT = Path(__file__).resolve().parent.parent / "fake_agent.py"
TICKET_ID = "pt-1"
STRONG = "openai-codex/gpt-5.3-codex"
BASE_FIXER = "zai/glm-5"  # the package default metaModel `fixer`
BASE_SECOND_OPINION = "kimi-coding/k2p5"  # the package default metaModel `review-secop`
FAIL_ON = ["Critical", "Major"]
SEVERITIES = ("Critical", "Major", "Minor", "Warnings", "Suggestions")
REVIEWERS = ("reviewer-general", "reviewer-spec-audit", "reviewer-second-opinion")
NO_ESCALATION = {"fixer": None, "reviewerSecondOpinion": None, "worker": None}
FIXER_ESCALATED = {"fixer": STRONG, "reviewerSecondOpinion": None, "worker": None}
STAMP = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")

TICKET_TEXT = tk_ticket("pt-1")


def counts(**nonzero: int) -> dict[str, int]:
    return {s: nonzero.get(s, 0) for s in SEVERITIES}


def finding(fid: str, fixed_by: list[str] | str, severity: str = "Major", **extra: Any) -> dict:
    return {
        "id": fid,
        "severity": severity,
        "text": extra.pop("text", f"`parser.py:42` - parse_expr recurses without bound ({fid})"),
        "reviewer": extra.pop("reviewer", "reviewer-general"),
        "fixedBy": fixed_by,
        **extra,
    }


def phases(*, research: bool = True, implement: bool = True, fix: bool = True) -> list[str]:
    """The phase trace of one attempt that ran to its end (see `Harness.phase_trace`)."""
    ran = {"research": research, "implement": implement, "review": True, "fix": fix}
    ran |= {"verify": True, "close": True}
    out: list[str] = []
    for phase, runs in ran.items():
        out += [f"start:{phase}", f"done:{phase}"] if runs else [f"skip:{phase}"]
    return out


def alive(pid: int) -> bool:
    """A zombie counts as dead: its killed parent may not have been reaped yet."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def frontmatter(text: str) -> list[str]:
    """The frontmatter lines, checked by tk's rules (awk: `key: value` a line, flow lists)."""
    lines = text.split("\n")
    assert lines[0] == "---", text
    end = lines.index("---", 1)
    for line in lines[1:end]:
        assert re.fullmatch(r"[A-Za-z_][\w-]*: ?.*", line), f"not `key: value`: {line!r}"
        value = line.partition(": ")[2]
        if value.startswith("["):
            assert value.endswith("]"), f"not a flow list: {line!r}"
    return lines[1:end]


class Harness:
    def __init__(self, project: Path, tmp_path: Path, write_settings: Callable) -> None:
        self.project = project
        self.write_settings = write_settings
        self.agent_dir = tmp_path / "agent"
        self.agent_dir.mkdir()
        self.plan_file = self.agent_dir / "plan.json"
        self.log_file = self.agent_dir / "calls.jsonl"
        self.child_pid_file = self.agent_dir / "children.txt"
        self.context_log = self.agent_dir / "contexts.jsonl"
        self.ticket_file = project / ".tickets" / f"{TICKET_ID}.md"
        self.dir = project / ".tf" / "knowledge" / "tickets" / TICKET_ID
        self.ticket_file.parent.mkdir()
        self.ticket_file.write_text(TICKET_TEXT, encoding="utf-8")
        self.settings()
        self.plan()

    # -- setup -----------------------------------------------------------------------------
    def settings(self, timeout: float = 20, **workflow: Any) -> None:
        escalation = {"enabled": True, "maxRetries": 3, "models": {"fixer": "strong"}}
        self.write_settings(
            {
                "metaModels": {"strong": {"model": STRONG, "thinking": "high"}},
                "workflow": {"failOn": FAIL_ON, "escalation": escalation, **workflow},
                "executor": {
                    "kind": "command",
                    "command": [sys.executable, str(AGENT)],
                    "timeoutSeconds": timeout,
                    # the backoff has tests of its own (test_presets, test_transient): no waits
                    "restartBackoffSeconds": 0,
                },
            }
        )

    def plan(self, **plan: Any) -> None:
        self.plan_file.write_text(json.dumps(plan, indent=2), encoding="utf-8")

    def run(self, *args: str, ticket: str = TICKET_ID) -> subprocess.CompletedProcess[str]:
        env = {
            "FAKE_AGENT_PLAN": str(self.plan_file),
            "FAKE_AGENT_LOG": str(self.log_file),
            "FAKE_AGENT_CHILD_PID": str(self.child_pid_file),
            "FAKE_AGENT_CONTEXT_LOG": str(self.context_log),
            "TF_FSM_ROOT": str(self.project),  # this harness's project, whatever the fixture's
        }
        return run_cli("run", ticket, *args, cwd=self.project, env=env)

    # -- observation -----------------------------------------------------------------------
    def read_state(self) -> dict[str, Any]:
        return json.loads((self.dir / "retry-state.json").read_text(encoding="utf-8"))

    def chain(self) -> dict[str, Any]:
        return json.loads((self.dir / "chain-context.json").read_text(encoding="utf-8"))

    def chains_seen(self, attempt: int) -> list[dict[str, Any]]:
        """The chain-context.json each agent invocation of `attempt` was handed."""
        if not self.context_log.exists():
            return []
        seen = [json.loads(ln) for ln in self.context_log.read_text(encoding="utf-8").splitlines()]
        return [c for c in seen if c["attempt"] == attempt]

    def events(self, attempt: int | None = None) -> list[dict[str, Any]]:
        path = self.dir / "events.jsonl"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        evs = [json.loads(line) for line in lines if line.strip()]
        for ev in evs:
            assert {"event", "ts", "ticket", "attempt"} <= ev.keys(), ev
            assert ev["ticket"] == TICKET_ID, ev
        return [ev for ev in evs if attempt is None or ev["attempt"] == attempt]

    def names(self, attempt: int | None = None) -> list[str]:
        return [ev["event"] for ev in self.events(attempt)]

    def event(self, name: str, attempt: int | None = None, **match: Any) -> dict[str, Any]:
        """The one event of that name (and those field values)."""
        found = [
            ev
            for ev in self.events(attempt)
            if ev["event"] == name and all(ev.get(k) == v for k, v in match.items())
        ]
        assert len(found) == 1, (name, match, self.names(attempt))
        return found[0]

    def phase_trace(self, attempt: int) -> list[str]:
        """Phase events as `start:review`, `done:review`, `skip:fix`, `fail:implement`.
        ResearchSkippedOnRetry counts as `skip:research` (next to a PhaseSkipped or instead)."""
        kinds = {"PhaseStarted": "start", "PhaseCompleted": "done", "PhaseSkipped": "skip"}
        kinds["PhaseFailed"] = "fail"
        out: list[str] = []
        for ev in self.events(attempt):
            if ev["event"] == "ResearchSkippedOnRetry":
                token = "skip:research"
            elif ev["event"] in kinds:
                token = f"{kinds[ev['event']]}:{ev['phase']}"
            else:
                continue
            if not (out and out[-1] == token == "skip:research"):
                out.append(token)
        return out

    def assert_attempt_frame(self, attempt: int, *middle: str, first: str = "AttemptStarted"):
        """The attempt opens with `first`, ends with AttemptFinished, and has `middle` in order."""
        names = self.names(attempt)
        assert names[0] == first, names
        assert names[-1] == "AttemptFinished", names
        assert names.count("AttemptFinished") == 1, names
        rest = iter(names)
        assert all(name in rest for name in middle), (middle, names)

    def agent_calls(self, **match: Any) -> list[dict[str, Any]]:
        if not self.log_file.exists():
            return []
        calls = [json.loads(line) for line in self.log_file.read_text().splitlines()]
        return [c for c in calls if all(c[k] == v for k, v in match.items())]

    def call_counts(self, attempt: int) -> Counter[tuple[str, str]]:
        return Counter((c["phase"], c["role"]) for c in self.agent_calls(attempt=attempt))

    def models(self, role: str) -> list[tuple[int, str]]:
        """(attempt, model) of each invocation of `role`, in order."""
        return [(c["attempt"], c["model"]) for c in self.agent_calls(role=role)]


def check_attempt(
    attempt: dict[str, Any],
    number: int,
    status: str,
    trigger: str,
    escalation: dict[str, str | None],
    gate: dict[str, int] | None = None,
) -> None:
    """One retry-state.json attempt, field by field."""
    assert attempt["attemptNumber"] == number, attempt
    assert attempt["status"] == status, attempt
    assert attempt["trigger"] == trigger, attempt
    assert attempt["escalation"] == escalation, attempt
    assert STAMP.match(attempt["startedAt"]), attempt
    if status == "in_progress":
        assert "completedAt" not in attempt or attempt["completedAt"] is None, attempt
    if status in ("blocked", "closed"):
        assert STAMP.match(attempt["completedAt"]), attempt
        assert attempt["completedAt"] >= attempt["startedAt"], attempt
        assert attempt["qualityGate"] == {"failOn": FAIL_ON, "counts": gate}, attempt
        assert attempt["closeSummaryRef"] == "close-summary.md", attempt


@pytest.fixture
def proj(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Project:
    isolate(monkeypatch)
    monkeypatch.setenv("GIT_EDITOR", "true")  # `git rebase --continue` by hand, no editor
    return Project(project, tmp_path)
