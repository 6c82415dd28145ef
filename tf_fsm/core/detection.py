"""Read the quality-gate facts out of the markdown artifacts agents write (pi-ticketflow format).

Agents write `review.md`, `post-fix-verification.md` and `close-summary.md` freely, so the
parsers are tolerant (bold, emoji, tables, parentheticals, CRLF) and never raise: a file they
cannot read yields "unknown"/zero counts plus a note, and `evaluate` explains its verdict in one
sentence. This module holds what the artifacts say (the parsers); the verdict drawn from them is
tf_fsm.core.verdict, and the markdown-level lexing they share lives in tf_fsm.core.markdown.
Everything here is pure: text in, values out.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from tf_fsm._json_input import load_json
from tf_fsm.core import gate
from tf_fsm.core.gate import blocking_counts
from tf_fsm.core.markdown import (
    content_lines,
    counts_in,
    findings_in,
    parse_heading,
    plain,
    table_cells,
    title_severity,
)
from tf_fsm.settings.severity import SEVERITIES, normalize_severity

__all__ = [
    "CloseStatus",
    "PostFixResult",
    "ReviewCounts",
    "blocking_counts",
    "every_severity",
    "extract_findings",
    "normalize_severity",
    "parse_close_summary",
    "parse_post_fix_verification",
    "parse_review",
    "remaining_findings",
    "uncountable_review",
]

Status = Literal["blocked", "closed", "unknown"]

_STATS_TITLE = re.compile(r"\bstat(?:istic)?s\b", re.IGNORECASE)
_BOLD_ONLY = re.compile(r"^\s*(\*\*|__)(?P<title>.+?)\1\s*(?:\([^)]*\))?\s*:?\s*$")
_STATUS_TITLE = re.compile(r"[\W_]*status[\W_]*", re.IGNORECASE)
_STATUS_LINE = re.compile(
    r"^[\W_]*(?:(?:final|ticket|close|closure)\s+)?status\s*:\s*(.*)$", re.IGNORECASE
)
_WORD = re.compile(r"(?<!\w)[A-Za-z]+(?!\w)")
_POST_FIX = re.compile(r"\bpost[\s-]*fix", re.IGNORECASE)
_FIX = re.compile(r"\bfix(?:es|ed)?\b", re.IGNORECASE)
_POST_FIX_COUNTS = re.compile(r"\bpost[\s-]*fix\s+counts?\b", re.IGNORECASE)
_VERDICT_LINE = re.compile(
    r"^[\W_]*(?:status|result)\s*:\s*[\W_]*(pass(?:ed)?|fail(?:ed)?|blocked)(?!\w)", re.IGNORECASE
)
_GATES_TITLE = re.compile(r"^[\W_]*quality\s+gates[\W_]*$", re.IGNORECASE)
_CLOSED = frozenset({"closed", "complete", "completed"})


def every_severity(counts: Mapping[str, int]) -> dict[str, int]:
    """`counts` with every severity, none negative (what every parser and verdict returns)."""
    return {s: max(0, int(counts.get(s, 0))) for s in SEVERITIES}


@dataclass(frozen=True)
class CloseStatus:
    """The closer's verdict: `word` as written ("COMPLETE"), counts if it lists any."""

    status: Status
    word: str | None
    counts: dict[str, int] | None


def _status_from(value: str) -> tuple[Status, str | None]:
    m = _WORD.search(plain(value))
    key = m.group(0).lower() if m else ""
    status: Status = "blocked" if key == "blocked" else "closed" if key in _CLOSED else "unknown"
    return status, m.group(0) if m else None


def _close_counts(lines: list[str]) -> dict[str, int] | None:
    # Counts under pre-fix / fixes-applied headings are not what remains; post-fix ones are.
    post: dict[str, int] = {}
    general: dict[str, int] = {}
    kind = "general"
    segment: list[str] = []
    for line in [*lines, "#"]:  # the sentinel heading flushes the last segment
        heading = parse_heading(line)
        if heading is None:
            segment.append(line)
            continue
        target = post if kind == "post" else general if kind == "general" else {}
        for severity, n in counts_in(segment).items():
            target.setdefault(severity, n)
        segment = []
        title = heading[1]
        kind = "post" if _POST_FIX.search(title) else "skip" if _FIX.search(title) else "general"
    if not post and not general:
        return None
    return every_severity({s: post.get(s, general.get(s, 0)) for s in SEVERITIES})


def parse_close_summary(text: str) -> CloseStatus:
    """Status from the first `Status:` line or line under a `## Status` heading, in document
    order; counts per severity from post-fix sections first, never from fixes-applied ones."""
    lines = content_lines(text)
    found: tuple[Status, str | None] | None = None
    awaiting = False  # right after a `## Status` heading (or a bare `Status:` line)
    for line in lines:
        if not line.strip():
            continue
        heading = parse_heading(line)
        inline = _STATUS_LINE.match(plain(line))
        cells = table_cells(line)
        if inline and inline.group(1).strip():
            found = _status_from(inline.group(1))
        elif cells and len(cells) >= 2 and cells[0].lower() == "status" and cells[1]:
            found = _status_from(cells[1])
        elif heading is not None:
            awaiting = heading[0] <= 3 and _STATUS_TITLE.fullmatch(plain(heading[1])) is not None
            continue
        elif inline:
            awaiting = True
            continue
        elif awaiting:
            found = _status_from(line)
        if found is not None:
            break
    status, word = found or ("unknown", None)
    return CloseStatus(status=status, word=word, counts=_close_counts(lines))


@dataclass(frozen=True)
class ReviewCounts:
    """Counts per severity (statistics win over listed findings) and where they came from."""

    counts: dict[str, int]
    source: Literal["statistics", "sections", "mixed", "none"]
    notes: tuple[str, ...]


def _review_sections(text: str) -> tuple[list[str], str, list[tuple[str, list[str]]]]:
    """The statistics section's lines and title, and each severity section's lines."""
    stats_lines: list[str] = []
    stats_title = ""
    sections: list[tuple[str, list[str]]] = []
    # (kind, level): kind is "stats" or a severity; level 7 marks a bold-only pseudo-heading.
    current: tuple[str, int] | None = None
    for line in content_lines(text):
        heading = parse_heading(line)
        if heading is not None:
            level, title = heading
            severity = title_severity(title)
            if severity:
                current = (severity, level)
                sections.append((severity, []))
            elif _STATS_TITLE.search(title):
                current = ("stats", level)
                stats_title = stats_title or plain(title)
            elif current is None or level <= current[1] or current[1] == 7:
                current = None
            continue
        # Pseudo-headings are short; the length cap keeps the lazy bold pattern cheap.
        bold = _BOLD_ONLY.match(line) if len(line) < 300 else None
        if bold:
            severity = title_severity(bold.group("title"))
            if severity:
                current = (severity, 7)
                sections.append((severity, []))
                continue
            if current is not None and current[1] == 7:  # bold pseudo-headings are flat
                current = None
                continue
        if current is None:
            continue
        if current[0] == "stats":
            stats_lines.append(line)
        else:
            sections[-1][1].append(line)

    return stats_lines, stats_title, sections


# A run reads the same review.md several times (its counts when each attempt and each phase
# runner starts, its findings for the signature and the next prompt): parsed once, and each
# caller gets its own copy of the result.
_PARSED = 32  # texts remembered
_PARSED_CHARS = 256 * 1024  # a longer text is parsed each time, not kept


def extract_findings(text: str) -> dict[str, list[str]]:
    """The findings listed under each severity heading, in file order (texts, not counts)."""
    found = _findings(text) if len(text) <= _PARSED_CHARS else _findings.__wrapped__(text)
    return {severity: list(items) for severity, items in found}


@functools.lru_cache(maxsize=_PARSED)
def _findings(text: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    out: dict[str, list[str]] = {}
    for severity, body in _review_sections(text)[2]:
        out.setdefault(severity, []).extend(findings_in(body))
    return tuple((severity, tuple(items)) for severity, items in out.items())


def remaining_findings(read: Callable[[str], str | None]) -> dict[str, list[str]]:
    """The findings that remain after the fix, by severity: the post-fix re-review's
    (`post-fix-review.md`, when the verification's mode is `rereview`), else review.md's.
    `read` gives an artifact's text by name (None: absent)."""
    try:
        mode = load_json(read("post-fix-verification.json") or "{}").get("mode")
    except (ValueError, AttributeError):  # unreadable, or not an object
        mode = None
    remaining = read("post-fix-review.md") if mode == "rereview" else None
    return extract_findings(remaining or read("review.md") or "")


def parse_review(text: str) -> ReviewCounts:
    """Statistics section values, else the top-level findings under each severity heading."""
    parsed = _parse_review(text) if len(text) <= _PARSED_CHARS else _parse_review.__wrapped__(text)
    return ReviewCounts(dict(parsed.counts), parsed.source, parsed.notes)


@functools.lru_cache(maxsize=_PARSED)
def _parse_review(text: str) -> ReviewCounts:
    stats_lines, stats_title, sections = _review_sections(text)
    stats = counts_in(stats_lines)
    listed: dict[str, int] = {}
    for severity, body in sections:
        listed[severity] = listed.get(severity, 0) + len(findings_in(body))
    notes = []
    for severity in SEVERITIES:
        if severity in stats and severity in listed and stats[severity] != listed[severity]:
            n = listed[severity]
            are = "finding is" if n == 1 else "findings are"
            notes.append(
                f"{stats_title} says {severity}: {stats[severity]} but {n} {are} listed under "
                f"{severity}; the statistics win"
            )
    from_sections = [s for s in SEVERITIES if s not in stats and s in listed]
    source: Literal["statistics", "sections", "mixed", "none"]
    if stats:
        source = "mixed" if from_sections else "statistics"
    else:
        source = "sections" if listed else "none"
    if source == "mixed":
        names = ", ".join(from_sections)
        notes.append(f"{stats_title} gives no count for {names}; the listed findings are used")
    return ReviewCounts(every_severity({**listed, **stats}), source, tuple(notes))


def uncountable_review(text: str, name: str) -> str | None:
    """Why a reviewer's file cannot be counted (neither statistics nor a severity section: an
    error message, a truncated answer), or None. During a run such a file fails its phase
    instead of passing the gate as zero findings."""
    if parse_review(text).source != "none":
        return None
    what = "is empty" if not text.strip() else "has no severity sections and no Summary Statistics"
    return f"the agent's {name} {what}, so its findings cannot be counted"


@dataclass(frozen=True)
class PostFixResult:
    """The Post-Fix Counts section (None if absent), the file's own PASS/FAIL, and why a
    required quality-gate command blocked (from its Quality Gates section, as tf_fsm writes
    it), if one did."""

    counts: dict[str, int] | None
    passed: bool | None
    blocker: str | None = None


def _sections(lines: list[str], title: re.Pattern[str]) -> list[str]:
    """The lines under the first heading that matches `title`, up to the next heading of its
    level or above."""
    body: list[str] = []
    level = 0  # the level of the matching heading once inside that section
    for line in lines:
        heading = parse_heading(line)
        if heading is not None:
            if level and heading[0] <= level:
                break
            if not level and title.search(heading[1]):
                level = heading[0]
        elif level:
            body.append(line)
    return body


def parse_post_fix_verification(text: str) -> PostFixResult:
    lines = content_lines(text)
    verdict = next((m for line in lines if (m := _VERDICT_LINE.match(plain(line)))), None)
    passed = None if verdict is None else verdict.group(1).lower().startswith("pass")
    counts = counts_in(_sections(lines, _POST_FIX_COUNTS))
    rows = _sections(lines, _GATES_TITLE)
    blocker = next((why for row in rows if (why := gate.blocking_command(row))), None)
    return PostFixResult(every_severity(counts) if counts else None, passed, blocker)
