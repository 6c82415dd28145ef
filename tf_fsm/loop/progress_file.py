"""`.tf/ralph/progress.md` in pi-ticketflow's format, and the record of one worker run."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tf_fsm.core.state import utc_stamp
from tf_fsm.fs.atomic import atomic_write_text, exclusive, make_dirs
from tf_fsm.storage.redact import Redactor
from tf_fsm.views.terminal import terminal_safe

PROGRESS_MARKER = "<!-- Auto-appended entries below -->"
#: pi-ticketflow's entry label for each way a run ends.
LABELS = {
    "closed": "COMPLETE",
    "already_closed": "COMPLETE",
    "blocked": "BLOCKED",
    "exhausted": "BLOCKED",
    "error": "FAILED",
    "failed": "FAILED",
    "interrupted": "INTERRUPTED",
    "waiting": "WAITING",
    "awaiting_merge": "WAITING",
}
STATUS_LINES = {
    "closed": "CLOSED",
    "already_closed": "CLOSED",
    "blocked": "BLOCKED",
    "exhausted": "BLOCKED (max retries exceeded)",
    "error": "ERROR (resumable)",
    "failed": "FAILED",
    "interrupted": "IN_PROGRESS (interrupted, resumable)",
    "waiting": "WAITING (for a hand-off artifact)",
    "awaiting_merge": "PASSED (waiting for `tf-fsm merge`)",
}
#: why an `exhausted` run stopped, told by the start of its reason (orchestrator, accounting)
_EXHAUSTED_BY = (
    ("same-failure", "BLOCKED (the same failure twice: needs a human)"),
    ("budget", "BLOCKED (budget spent)"),
)


def status_line(result: RunResult) -> str:
    if result.outcome == "exhausted":
        for prefix, line in _EXHAUSTED_BY:
            if result.reason.startswith(prefix):
                return line
    return STATUS_LINES.get(result.outcome, result.outcome.upper())


@dataclass
class RunResult:
    """One worker run as the loop saw it (its outcome and the ticket's state afterwards)."""

    ticket: str
    title: str
    #: closed|already_closed|blocked|exhausted|error|failed|interrupted|locked|waiting|
    #: awaiting_merge
    outcome: str
    reason: str
    exit_code: int
    attempt: int
    retry_count: int
    counts: dict[str, int] | None
    seconds: float = 0.0
    trigger: str = ""
    max_retries: int = 0

    @classmethod
    def build(
        cls,
        ticket: str,
        title: str,
        outcome: str,
        reason: str,
        code: int,
        attempt: int,
        state: dict[str, Any] | None,
    ) -> RunResult:
        last: dict[str, Any] = {}
        if state and isinstance(state.get("attempts"), list) and state["attempts"]:
            last = state["attempts"][-1] if isinstance(state["attempts"][-1], dict) else {}
        gate = last.get("qualityGate") if isinstance(last.get("qualityGate"), dict) else None
        counts = gate.get("counts") if gate else None
        return cls(
            ticket,
            title,
            outcome,
            reason,
            code,
            int(last.get("attemptNumber", attempt)),
            int(state.get("retryCount", 0)) if state else 0,
            counts if isinstance(counts, dict) and counts else None,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "ticket": self.ticket,
            "outcome": self.outcome,
            "attempt": self.attempt,
            "trigger": self.trigger,
            "retryCount": self.retry_count,
            "maxRetries": self.max_retries,
            "counts": self.counts,
            "reason": self.reason,
            "exitCode": self.exit_code,
            "seconds": round(self.seconds, 3),
        }


def _stamp() -> str:
    return utc_stamp(datetime.now(UTC))


class ProgressFile:
    """`.tf/ralph/progress.md`, kept the way pi-ticketflow's ralph keeps it: a Current State
    and a Statistics block, then History entries, newest first, below the marker. Every change
    is a whole-file atomic rewrite under a lock file, so two loops never lose an entry and a
    crash never leaves half a file."""

    def __init__(self, path: Path, within: Path, redactor: Redactor | None = None) -> None:
        self.path, self.within = path, within  # `within`: the project (tf_fsm.fs.confine)
        self.redactor = redactor or Redactor.from_environ(os.environ)

    def _template(self, now: str) -> list[str]:
        return [
            "# Ralph Loop Progress",
            "",
            "## Current State",
            "",
            "- Status: RUNNING",
            "- Current ticket: (none)",
            f"- Started: {now}",
            f"- Last updated: {now}",
            "",
            "## Statistics",
            "",
            "- Tickets completed: 0",
            "- Tickets failed: 0",
            "- Total iterations: 0",
            "",
            "## History",
            "",
            PROGRESS_MARKER,
        ]

    def _update(self, change: Callable[[list[str], str], list[str]]) -> None:
        make_dirs(self.path.parent, within=self.within)
        with exclusive(self.path.with_name(f".{self.path.name}.lock"), within=self.within):
            now = _stamp()
            try:
                lines = self.path.read_text(encoding="utf-8").splitlines()
            except FileNotFoundError:
                lines = self._template(now)
            lines = change(lines, now)
            text = self.redactor("\n".join(lines) + "\n")
            atomic_write_text(self.path, text, within=self.within)

    @staticmethod
    def _set(lines: list[str], prefix: str, value: str) -> list[str]:
        return [f"{prefix} {value}" if ln.startswith(prefix) else ln for ln in lines]

    def begin(self) -> None:
        def change(lines: list[str], now: str) -> list[str]:
            lines = self._set(lines, "- Status:", "RUNNING")
            lines = self._set(lines, "- Started:", now)
            return self._set(lines, "- Last updated:", now)

        self._update(change)

    def current(self, tickets: list[str], status: str = "RUNNING") -> None:
        def change(lines: list[str], now: str) -> list[str]:
            lines = self._set(lines, "- Status:", status)
            lines = self._set(lines, "- Current ticket:", ", ".join(tickets) or "(none)")
            return self._set(lines, "- Last updated:", now)

        self._update(change)

    def record(self, result: RunResult, next_step: str) -> None:
        label = LABELS.get(result.outcome, "FAILED")

        def change(lines: list[str], now: str) -> list[str]:
            entry = entry_lines(result, now, next_step)
            for key, bump in (
                ("- Tickets completed:", label == "COMPLETE"),
                ("- Tickets failed:", label in ("FAILED", "BLOCKED")),
                ("- Total iterations:", True),
            ):
                for i, line in enumerate(lines):
                    if line.startswith(key) and bump:
                        number = line[len(key) :].strip()
                        lines[i] = f"{key} {int(number) + 1 if number.isdigit() else 1}"
            lines = self._set(lines, "- Last updated:", now)
            if PROGRESS_MARKER in lines:
                at = lines.index(PROGRESS_MARKER) + 1
                return lines[:at] + entry + lines[at:]
            return lines + entry

        self._update(change)


def entry_lines(result: RunResult, now: str, next_step: str) -> list[str]:
    """One History entry, pi-ticketflow's shape plus its retry line. The title and the reason
    are escaped for the terminal: the file is read with `cat` and `tail -f`."""
    label = LABELS.get(result.outcome, "FAILED")
    summary = terminal_safe(result.title or result.reason)
    out = [f"- {result.ticket}: {label} ({now})", f"  - Summary: {summary}"]
    if result.counts is not None:
        c = result.counts
        out.append(
            f"  - Issues: Critical({c.get('Critical', 0)})/Major({c.get('Major', 0)})"
            f"/Minor({c.get('Minor', 0)})"
        )
    out.append(f"  - Retry: Attempt {result.attempt}, Count {result.retry_count}")
    out.append(f"  - Status: {status_line(result)}")
    if result.reason:
        key = "Error" if label == "FAILED" else "Reason"
        out.append(f"  - {key}: {terminal_safe(' '.join(result.reason.split()))}")
    if next_step:
        out.append(f"  - Next: {next_step}")
    return out


def next_step(result: RunResult) -> str:
    if result.outcome == "blocked":
        return f"attempt {result.attempt + 1} on a later pass (trigger ralph_retry)"
    if result.outcome == "exhausted":
        return f"skipped from now on; `tf-fsm run {result.ticket} --retry-reset` starts over"
    if result.outcome == "error":
        return f"`tf-fsm run {result.ticket}` (or ralph --resume-errors) resumes it"
    if result.outcome == "interrupted":
        return f"`tf-fsm run {result.ticket}`, or the next ralph, resumes it"
    if result.outcome == "waiting":
        return "`tf-fsm watch` (or `tf-fsm run`) resumes it once the artifact is written"
    if result.outcome == "awaiting_merge":
        return f"`tf-fsm merge {result.ticket}` merges it, then it is closed"
    return ""
