"""The quality gate's verdict on a ticket's artifacts: which artifact decides (close-summary.md,
then the post-fix verification, then review.md), what its counts mean under `failOn` (the rule
is tf_fsm.core.gate's), and one sentence saying why, with notes on whatever the artifacts
contradict or leave out. The artifacts are read by tf_fsm.core.detection. Pure: text in, a
verdict out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from tf_fsm.core import gate
from tf_fsm.core.detection import (
    CloseStatus,
    PostFixResult,
    ReviewCounts,
    Status,
    every_severity,
    parse_close_summary,
    parse_post_fix_verification,
    parse_review,
)
from tf_fsm.core.gate import blocking_counts, fail_on_severities, items


@dataclass(frozen=True)
class GateVerdict:
    """Whether the ticket is blocked, from which artifact, and the sentence saying why."""

    blocked: bool
    status: Status
    counts: dict[str, int]
    fail_on: tuple[str, ...]
    source: Literal["close-summary.md", "post-fix-verification", "review.md", "none"]
    reason: str
    notes: tuple[str, ...] = ()


def _close_verdict(
    close: CloseStatus,
    severities: tuple[str, ...],
    notes: list[str],
    post: PostFixResult | None,
    rev: ReviewCounts | None,
) -> GateVerdict:
    counts, listed = close.counts, ", ".join(severities)
    if counts is None and post is not None and post.counts is not None:
        counts = post.counts
        notes.append("close-summary.md lists no counts; using post-fix-verification's")
    elif counts is None and rev is not None:
        counts = rev.counts
        notes += ["close-summary.md lists no counts; using review.md's", *rev.notes]
    counts = every_severity(counts or {})
    said = f"close-summary.md says {(close.word or close.status).upper()}"
    blocking = blocking_counts(counts, severities)
    if close.status == "closed":
        reason = said
        if blocking:  # the closer's word stands, but the contradiction must be visible
            notes.append(f"{said} although {items(blocking)} remain (failOn: {listed})")
    elif not severities:
        reason = f"{said}; {gate.EMPTY}"
    elif blocking:
        reason = f"{said} ({items(blocking)} with failOn [{listed}])"
    else:
        reason = f"{said} (no failOn severity has findings; failOn [{listed}])"
    blocked = close.status == "blocked"
    return GateVerdict(
        blocked, close.status, counts, severities, "close-summary.md", reason, (*notes,)
    )


def evaluate(
    fail_on: Sequence[str],
    *,
    close_summary: str | None = None,
    post_fix_verification: str | None = None,
    review: str | None = None,
    gate_enabled: bool = True,
    outdated: Mapping[str, str] | None = None,
) -> GateVerdict:
    """The gate verdict; sources in order: close-summary.md, post-fix verification, review.md,
    the counts judged by tf_fsm.core.gate's rule. `outdated`: reports older than an earlier
    phase's report (name -> that report), an earlier attempt's; they are not used."""
    severities, notes = fail_on_severities(fail_on)
    for name, newer in (outdated or {}).items():
        notes.append(f"{name} is older than {newer}: an earlier attempt's, not used")
        if name == "close-summary.md":
            close_summary = None
        elif name == "post-fix-verification.md":
            post_fix_verification = None
    post = None
    if post_fix_verification is not None:
        post = parse_post_fix_verification(post_fix_verification)
    rev = parse_review(review) if review is not None else None
    if close_summary is not None:
        close = parse_close_summary(close_summary)
        if close.status != "unknown":
            return _close_verdict(close, severities, notes, post, rev)
        word = close.word
        notes.append(
            f"close-summary.md status {word!r} is neither BLOCKED nor CLOSED"
            if word
            else "close-summary.md has no status"
        )
    return _counts_verdict(severities, notes, post, rev, gate_enabled)


def _counts_verdict(
    severities: tuple[str, ...],
    notes: list[str],
    post: PostFixResult | None,
    rev: ReviewCounts | None,
    gate_enabled: bool,
) -> GateVerdict:
    """The verdict from the post-fix counts, else the review's."""
    source: Literal["post-fix-verification", "review.md"]
    if post is not None and post.counts is None:
        notes.append("post-fix-verification has no Post-Fix Counts section")
    if post is not None and post.counts is not None:
        counts, source = post.counts, "post-fix-verification"
        decision = gate.decide(counts, severities, enabled=gate_enabled)
        if post.blocker is not None and gate_enabled:
            decision = gate.with_command(decision, post.blocker)
        notes += _verdict_doubts(post, decision)
    elif rev is not None:
        counts, source = rev.counts, "review.md"
        decision = gate.decide(counts, severities, enabled=gate_enabled, counted="review.md")
        notes.extend(rev.notes)
        if rev.source == "none":
            notes.append("review.md has no statistics and no severity sections")
    else:
        reason = "no close-summary.md, post-fix-verification or review.md yet"
        counts = every_severity({})
        return GateVerdict(False, "unknown", counts, severities, "none", reason, (*notes,))
    return GateVerdict(
        decision.blocked, "unknown", counts, severities, source, decision.reason, (*notes,)
    )


def _verdict_doubts(post: PostFixResult, decision: gate.GateDecision) -> list[str]:
    """The post-fix verification's own PASS/FAIL, checked against the decision."""
    if post.passed and decision.blocked:
        left = f"{items(decision.blocking)} remain" if decision.blocking else decision.reason
        return [f"post-fix-verification says PASS but {left}"]
    if post.passed is False and not decision.blocked:
        left = "no failOn severity remains" if not decision.blocking else decision.reason
        return [f"post-fix-verification says FAIL but {left}"]
    return []
