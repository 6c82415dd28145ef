"""`tf-fsm demo`: a throwaway project, one ticket, the scripted offline agent, a real run.

The scenario makes attempt 1 block (a Major finding the base fixer cannot clear) and attempt 2
close (the escalated fixer clears it), so the escalation curve is visible end to end.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from tf_fsm.engine.orchestrator import Outcome, RunOptions, run_ticket
from tf_fsm.storage.store import atomic_write_text
from tf_fsm.views.progress import ConsoleObserver

DEMO_TICKET = "demo-1"

TICKET_TEXT = """---
id: demo-1
status: open
deps: []
links: []
created: 2026-11-22T12:00:00Z
type: task
priority: 2
tags: [component:parser]
---
# Add a depth limit to the config parser

The parser recurses without bound on deeply nested input and crashes with RecursionError.
Add a configurable depth limit and a clear error message that names the offending line.
"""

SETTINGS: dict[str, Any] = {
    "metaModels": {
        "strong": {
            "model": "openai-codex/gpt-5.3-codex",
            "thinking": "high",
            "description": "Escalation model for hard fixes",
        }
    },
    "workflow": {
        "failOn": ["Critical", "Major"],
        "escalation": {"enabled": True, "maxRetries": 3, "models": {"fixer": "strong"}},
    },
    "executor": {"kind": "scripted"},
}


def make_project(where: Path | None) -> Path:
    root = where or Path(tempfile.mkdtemp(prefix="tf-fsm-demo-"))
    settings = json.dumps(SETTINGS, indent=2) + "\n"
    atomic_write_text(root / ".tf/config/settings.json", settings, within=root)
    atomic_write_text(root / ".tickets" / f"{DEMO_TICKET}.md", TICKET_TEXT, within=root)
    return root.resolve()


def run_demo(where: Path | None = None) -> tuple[Outcome, Path]:
    root = make_project(where)
    print(f"demo project: {root}")
    print(
        "ticket demo-1; escalation enabled: the fixer escalates to "
        "openai-codex/gpt-5.3-codex on attempt 2\n"
    )
    outcome = run_ticket(root, DEMO_TICKET, RunOptions(), observer=ConsoleObserver(sys.stdout))
    _summarize(root, outcome)
    return outcome, root


def _summarize(root: Path, outcome: Outcome) -> None:
    from tf_fsm.settings.load import load_settings
    from tf_fsm.storage.backends import open_store
    from tf_fsm.storage.layout import CHAIN_CONTEXT, JOURNAL, RETRY_STATE

    store = open_store(root, load_settings(root), DEMO_TICKET)
    state = store.load_retry_state()
    print()
    for attempt in state.attempts if state else []:
        counts = attempt.qualityGate.counts if attempt.qualityGate else {}
        escalated = attempt.escalation.escalated_roles() if attempt.escalation else []
        blocking = ", ".join(f"{k} {v}" for k, v in counts.items() if v) or "none"
        print(
            f"attempt {attempt.attemptNumber} ({attempt.trigger}): {attempt.status.upper():<7} "
            f"escalated: {', '.join(escalated) or 'none':<8} post-fix findings: {blocking}"
        )
    print(f"\nresult: {outcome.status.upper()} - {outcome.reason}")
    print(f"artifacts: {store.files.dir}")
    for name in (
        RETRY_STATE,
        CHAIN_CONTEXT,
        "review.md",
        "post-fix-verification.md",
        "close-summary.md",
        JOURNAL,
    ):
        print(f"  {name}")
