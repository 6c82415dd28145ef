"""The quality gate's one rule: do these counts block under `failOn`, with
`workflow.enableQualityGate` on or off, and does a required gate command that still fails
block on top; with the one sentence that says why. The verify phase decides with it during a
run (tf_fsm.engine.phases), and `tf-fsm gate` with it from the files the run left
(tf_fsm.core.verdict.evaluate), so both say the same of the same counts. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from tf_fsm.settings.severity import SEVERITIES, normalize_severity

#: which counts are judged: what remains after the fix, or the review's (nothing fixed yet)
Counted = Literal["post-fix", "review.md"]

DISABLED = "workflow.enableQualityGate is false: nothing blocks"
EMPTY = "failOn is empty: nothing blocks on review counts"
_LIST_SPLIT = re.compile(r"[\s,;]+")
#: a required command's row in post-fix-verification.md's Quality Gates section when it
#: blocked, as tf_fsm.core.reports writes it
_BLOCKING_ROW = re.compile(
    r"^\s*-\s+(?P<name>\S+)\s+\(required\):\s+BLOCKING,\s+(?P<summary>.*),\s+"
    r"fix retries\s+(?P<retries>\d+)\s*$"
)


@dataclass(frozen=True)
class GateDecision:
    blocked: bool
    blocking: dict[str, int]  # the failOn severities that have findings
    reason: str


def fail_on_severities(names: Sequence[str] | str) -> tuple[tuple[str, ...], list[str]]:
    """`failOn` as canonical severities in severity order, and a note for each entry that is
    not a severity. A bare string is read as a list ("Critical, Major"), not as letters."""
    raw = _LIST_SPLIT.split(names) if isinstance(names, str) else list(names)
    wanted = {normalize_severity(str(n)) for n in raw}
    notes = [
        f"failOn entry {n!r} is not a severity; ignored"
        for n in raw
        if str(n).strip() and normalize_severity(str(n)) is None
    ]
    return tuple(s for s in SEVERITIES if s in wanted), notes


def blocking_counts(counts: Mapping[str, int], fail_on: Sequence[str]) -> dict[str, int]:
    """The failOn severities that have findings, in severity order."""
    severities, _ = fail_on_severities(fail_on)
    return {s: counts[s] for s in severities if counts.get(s, 0) > 0}


def items(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{s}: {n}" for s, n in counts.items())


def decide(
    counts: Mapping[str, int],
    fail_on: Sequence[str],
    *,
    enabled: bool = True,
    counted: Counted = "post-fix",
) -> GateDecision:
    """Do `counts` block? Only with the gate enabled, and only a failOn severity with a
    finding; the reason names the counts that block, or why nothing does."""
    severities, _ = fail_on_severities(fail_on)
    blocking = blocking_counts(counts, severities)
    listed = ", ".join(severities)
    if not enabled:
        return GateDecision(False, blocking, DISABLED)
    if not severities:
        return GateDecision(False, blocking, EMPTY)
    if counted == "review.md":
        found = f"lists {items(blocking)}" if blocking else "lists no failOn finding"
        return GateDecision(bool(blocking), blocking, f"review.md {found} (failOn: {listed})")
    if blocking:
        return GateDecision(True, blocking, f"post-fix counts {items(blocking)} (failOn: {listed})")
    return GateDecision(
        False, blocking, f"no failOn severity remains after the fix (failOn: {listed})"
    )


def command_failed(name: str, summary: str, retries: int) -> str:
    """Why a required quality-gate command blocks: it still failed after its fix retries."""
    return f"quality gate {name} failed ({summary}) after {retries} fix retries"


def with_command(decision: GateDecision, failure: str) -> GateDecision:
    """A required gate command that still fails (`command_failed`) blocks too, whatever the
    counts say (it never does with the gate disabled: it is then only reported)."""
    reason = f"{decision.reason}; {failure}" if decision.blocked else failure
    return GateDecision(True, decision.blocking, reason)


def blocking_command(row: str) -> str | None:
    """Why a required gate command blocked, read back from its row (`_BLOCKING_ROW`); None
    for any other line."""
    m = _BLOCKING_ROW.match(row)
    return command_failed(m["name"], m["summary"], int(m["retries"])) if m else None
