"""The markdown tf_fsm writes itself, in pi-ticketflow's formats (pure: text in, text out).

`review.md` (the merged review), `post-fix-verification.md` / `.json` and `close-summary.md`.
Detection reads these same formats back, so a round trip is tested.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tf_fsm.core.artifacts import REVIEW_FILES
from tf_fsm.core.detection import extract_findings, parse_review
from tf_fsm.core.state import SEVERITIES

#: a failing required gate that fails on the base commit too (docs/gates.md, "The baseline")
PREEXISTING = "pre-existing on the base, not blocking"

SEVERITY_HEADINGS: dict[str, str] = {
    "Critical": "Critical (must fix)",
    "Major": "Major (should fix)",
    "Minor": "Minor (nice to fix)",
    "Warnings": "Warnings (follow-up ticket)",
    "Suggestions": "Suggestions (follow-up ticket)",
}


def split_reviewers(text: str) -> tuple[str, tuple[str, ...]]:
    """A merged finding without the reviewers it ends with, `*(reviewer-a, reviewer-b)*`, and
    those reviewers (none: not tagged). Parsed by hand: a regex with nested repetition here
    backtracks exponentially on hostile text."""
    stripped = text.rstrip()
    start = stripped.rfind("*(")
    if not stripped.endswith(")*") or start < 0:
        return text, ()
    names = [n.strip() for n in stripped[start + 2 : -2].split(",")]
    if not all(n.startswith("reviewer-") and len(n) > len("reviewer-") for n in names):
        return text, ()
    return stripped[:start].rstrip(), tuple(names)


def _tagged(text: str) -> bool:
    """Does the finding already end with its reviewers?"""
    return bool(split_reviewers(text)[1])


@dataclass(frozen=True)
class Finding:
    severity: str
    text: str
    reviewer: str | None = None

    def line(self) -> str:
        if self.reviewer and not _tagged(self.text):
            return f"- {self.text} *({self.reviewer})*"
        return f"- {self.text}"


def zero_counts() -> dict[str, int]:
    return dict.fromkeys(SEVERITIES, 0)


def render_review(
    ticket_id: str,
    findings: Sequence[Finding],
    counts: Mapping[str, int] | None = None,
    sources: Sequence[str] = (),
    title: str = "Review",
) -> str:
    """The standard review format: five severity sections, then Summary Statistics."""
    out = [f"# {title}: {ticket_id}", ""]
    for severity in SEVERITIES:
        out.append(f"## {SEVERITY_HEADINGS[severity]}")
        items = [f.line() for f in findings if f.severity == severity]
        out += items or ["No issues found."]
        out.append("")
    if sources:
        out += ["## Review Sources", *sources, ""]
    totals = counts or {s: sum(f.severity == s for f in findings) for s in SEVERITIES}
    out.append("## Summary Statistics")
    out += [f"- {s}: {totals.get(s, 0)}" for s in SEVERITIES]
    return "\n".join(out) + "\n"


@dataclass(frozen=True)
class MergedReview:
    text: str
    counts: dict[str, int]
    findings: tuple[Finding, ...]
    notes: tuple[str, ...]


def merge_reviews(
    ticket_id: str, reviews: Mapping[str, str], title: str = "Review"
) -> MergedReview:
    """Merge reviewer files deterministically: reviewers in settings order, findings in file
    order, each tagged with its reviewer. Counts are each reviewer's own (its Summary
    Statistics win over its listed findings, as in detection), summed."""
    findings: list[Finding] = []
    counts = zero_counts()
    sources, notes = [], []
    for reviewer, text in reviews.items():
        parsed = parse_review(text)
        for severity, items in extract_findings(text).items():
            findings += [Finding(severity, item, reviewer) for item in items]
        for severity in SEVERITIES:
            counts[severity] += parsed.counts[severity]
        summary = ", ".join(f"{parsed.counts[s]} {s}" for s in SEVERITIES)
        sources.append(f"- `{REVIEW_FILES.get(reviewer, reviewer)}` ({reviewer}) - {summary}")
        notes += [f"{reviewer}: {note}" for note in parsed.notes]
    text = render_review(ticket_id, findings, counts, sources, title)
    return MergedReview(text, counts, tuple(findings), tuple(notes))


def _count_lines(counts: Mapping[str, int]) -> list[str]:
    return [f"- **{s}**: {counts.get(s, 0)}" for s in SEVERITIES]


def render_post_fix_verification(
    ticket_id: str,
    *,
    mode: str,
    pre: Mapping[str, int],
    post: Mapping[str, int],
    fail_on: Sequence[str],
    passed: bool,
    reason: str,
    gates: Sequence[Mapping[str, Any]] = (),
) -> tuple[str, dict[str, Any]]:
    """pi-ticketflow's post-fix-verification.md and .json, decided by tf_fsm."""
    verdict = "PASS" if passed else "BLOCKED"
    basis = "re-review after the fix" if mode == "rereview" else "review.md minus fixes.md"
    md = [
        f"# Post-Fix Verification: {ticket_id}",
        "",
        "## Summary",
        f"- **Status**: {verdict}",
        f"- **Quality Gate**: blocks on [{', '.join(fail_on)}]",
        f"- **Mode**: {mode} ({basis})",
        "",
        "## Pre-Fix Counts (from review.md)",
        *_count_lines(pre),
        "",
        "## Post-Fix Counts",
        *_count_lines(post),
        "",
        "## Quality Gate Decision",
        "- **Based on**: Post-fix counts",
        f"- **Result**: {verdict}",
        f"- **Reason**: {reason}",
        *_gate_lines(gates),
    ]
    data: dict[str, Any] = {
        "ticket_id": ticket_id,
        "mode": mode,
        "pre_fix_counts": {s: pre.get(s, 0) for s in SEVERITIES},
        "post_fix_counts": {s: post.get(s, 0) for s in SEVERITIES},
        "verification_passed": passed,
        "fail_on": list(fail_on),
        "reason": reason,
        "gates": [dict(g) for g in gates],
    }
    return "\n".join(md) + "\n", data


def _gate_lines(gates: Sequence[Mapping[str, Any]]) -> list[str]:
    """The quality-gate commands: each result, and the output tail of the failed ones."""
    if not gates:
        return []
    out = ["", "## Quality Gates"]
    for g in gates:
        kind = "required" if g["required"] else "optional"
        state, retries = _gate_state(g), g["retries"]
        out.append(f"- {g['name']} ({kind}): {state}, {g['summary']}, fix retries {retries}")
        if g.get("baselineNote"):  # the comparison with the base commit (docs/gates.md)
            out.append(f"  - base: {g['baselineNote']}")
    for g in gates:
        if not g["passed"] and g.get("outputTail"):
            tail = str(g["outputTail"]).replace("`" * 3, "'" * 3)  # nothing may close the fence
            out += ["", f"### {g['name']} output (tail)", "", "````text", tail, "````"]
    return out


def _gate_state(g: Mapping[str, Any]) -> str:
    if g["passed"]:
        return "passed"
    if g.get("preexisting"):
        return PREEXISTING
    return "BLOCKING" if g["blocking"] else "failed" if g["required"] else "warning"


def render_close_summary(
    ticket_id: str,
    *,
    closed: bool,
    attempt: int,
    trigger: str,
    counts: Mapping[str, int],
    fail_on: Sequence[str],
    escalated: Mapping[str, str],
    reason: str,
    retry_count: int,
    max_retries: int,
    notes: Sequence[str] = (),
    gates: Sequence[Mapping[str, Any]] = (),
) -> str:
    status = "CLOSED" if closed else "BLOCKED"
    roles = (
        ", ".join(f"{role}={model}" for role, model in escalated.items()) or "none (base models)"
    )
    out = [
        f"# Close Summary: {ticket_id}",
        "",
        "## Status",
        f"**{status}**",
        "",
        "## Summary",
        f"- Attempt: {attempt}",
        f"- Trigger: {trigger}",
        f"- Quality Gate: {'PASS' if closed else 'BLOCKED'} (failOn: [{', '.join(fail_on)}])",
        f"- Escalated roles: {roles}",
        f"- Retries: {retry_count}/{max_retries}",
        f"- Reason: {reason}",
        "",
        "## Review Summary (post-fix)",
        *[f"- {s}: {counts.get(s, 0)}" for s in SEVERITIES],
    ]
    out += _gate_lines(gates)
    if notes:
        out += ["", "## Notes", *[f"- {n}" for n in notes]]
    return "\n".join(out) + "\n"
