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
    "paused": "INTERRUPTED",
}
#: the Statistics lines: tickets by their newest entry's label, and the entries
_COMPLETED, _FAILED = "- Tickets completed:", "- Tickets failed:"
_IN_PROGRESS, _ITERATIONS = "- Tickets in progress:", "- Total iterations:"
_STATISTIC_OF = {
    "COMPLETE": _COMPLETED,
    "BLOCKED": _FAILED,
    "FAILED": _FAILED,
    "INTERRUPTED": _IN_PROGRESS,
    "WAITING": _IN_PROGRESS,
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
    "paused": "IN_PROGRESS (paused at a phase boundary, resumable)",
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
    #: awaiting_merge|paused
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
            f"{_COMPLETED} 0",
            f"{_FAILED} 0",
            f"{_IN_PROGRESS} 0",
            f"{_ITERATIONS} 0",
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
        """A History entry for the run, and the Statistics: each ticket counted once, by its
        newest entry (the ticket's previous entry's count moves to this one's), so the ticket
        counts add up to the tickets in the History; every entry is an iteration."""
        label = LABELS.get(result.outcome, "FAILED")

        def change(lines: list[str], now: str) -> list[str]:
            entry = entry_lines(result, now, next_step)
            lines = _with_statistic(lines, _IN_PROGRESS, after=_FAILED)
            previous = _newest_label(lines, result.ticket)
            if previous is not None:
                lines = _add(lines, _STATISTIC_OF[previous], -1)
            lines = _add(_add(lines, _STATISTIC_OF[label], 1), _ITERATIONS, 1)
            lines = self._set(lines, "- Last updated:", now)
            if PROGRESS_MARKER in lines:
                at = lines.index(PROGRESS_MARKER) + 1
                return lines[:at] + entry + lines[at:]
            return lines + entry

        self._update(change)


def _newest_label(lines: list[str], ticket: str) -> str | None:
    """The label of the ticket's newest History entry (entries are newest first), if any."""
    start = lines.index(PROGRESS_MARKER) + 1 if PROGRESS_MARKER in lines else 0
    head = f"- {ticket}: "
    for line in lines[start:]:
        if line.startswith(head):
            label = line[len(head) :].split(" ", 1)[0]
            return label if label in _STATISTIC_OF else None
    return None


def _add(lines: list[str], key: str, delta: int) -> list[str]:
    """The Statistics line `key` changed by `delta` (never below 0: a file another tool
    counted differently may hold less)."""
    out = []
    for line in lines:
        if line.startswith(key):
            number = line[len(key) :].strip()
            line = f"{key} {max(0, (int(number) if number.isdigit() else 0) + delta)}"
        out.append(line)
    return out


def _with_statistic(lines: list[str], key: str, after: str) -> list[str]:
    """`lines` with the Statistics line `key` (0), put after the line `after`, when a file
    written before it (or by pi-ticketflow) lacks it."""
    if any(line.startswith(key) for line in lines):
        return lines
    at = next((i + 1 for i, line in enumerate(lines) if line.startswith(after)), None)
    return lines if at is None else [*lines[:at], f"{key} 0", *lines[at:]]


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
    if result.outcome in ("interrupted", "paused"):
        return f"`tf-fsm run {result.ticket}`, or the next ralph, resumes it"
    if result.outcome == "waiting":
        return "`tf-fsm watch` (or `tf-fsm run`) resumes it once the artifact is written"
    if result.outcome == "awaiting_merge":
        return f"`tf-fsm merge {result.ticket}` merges it, then it is closed"
    return ""
