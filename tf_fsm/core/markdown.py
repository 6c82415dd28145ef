"""How the agents' markdown is lexed: fences, headings, tables, list items, count pairs.

tf_fsm.core.detection reads what review.md, close-summary.md and post-fix-verification.md mean; this
module holds the markdown-level helpers it reads them with, tolerant of bold, emoji, tables,
parentheticals and CRLF. Pure: text in, values out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from tf_fsm.settings.severity import normalize_severity

_MARKUP = re.compile(r"[*_`~]+")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})(.*)$")
# Closing hashes are stripped separately: a lazy title plus optional suffix backtracks badly.
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*))?$")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t])#+[ \t]*$")
_LEAD_WORD = re.compile(r"^[\W\d_]*([A-Za-z]+)(?!\w)")
_LIST_ITEM = re.compile(r"^([ \t]*)(?:[-*+]|\d{1,9}[.)])[ \t]+(\S.*)$")
_THEMATIC_BREAK = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_SEPARATOR_CELL = re.compile(r":?-+:?")
_LEADING_INT = re.compile(r"(\d{1,9})(?!\d)")
_LABEL_NOISE = re.compile(r"\([^()]*\)|\b(?:issues?|findings?|items?|count)\b", re.IGNORECASE)
# "Critical: 2", "Critical (must fix): 0", "Major issues = 1"; several may share a line.
_PAIR = re.compile(
    r"(?<![A-Za-z0-9])([A-Za-z]+)(?:\s+(?:issues?|findings?|items?))?\s*(?:\([^()]*\)\s*)?"
    r"[:=]\s*(\d{1,9})(?!\d)",
    re.IGNORECASE,
)
# Whole-item match only: "None of the callers check errors" is a finding, "None." is not.
_NOTHING = re.compile(
    r"(?:none|n/?a|nil|nothing|no\s+(?:(?:critical|major|minor|blocking|significant|other"
    r"|additional|further|new|remaining|outstanding)\s+)*(?:issues?|findings?|problems?"
    r"|concerns?|warnings?|suggestions?))"
    r"(?:\s+(?:found|identified|reported|detected|noted|to\s+report))?"
    r"(?:\s+(?:at|for|in)\s+this\s+(?:severity|level|category|section|time|review))?"
    r"\s*(?:\(.*\))?[\s.!)]*",
    re.IGNORECASE,
)
_LEADING_JUNK = re.compile(r"^[\W_]+")


def plain(text: str) -> str:
    """`text` without emphasis and code markup, stripped."""
    return _MARKUP.sub("", text).strip()


def content_lines(text: str) -> list[str]:
    """The lines with fenced code blanked: code never holds headings, findings or statuses."""
    out: list[str] = []
    fence = ""
    for line in text.splitlines():  # also splits CRLF and lone CR
        m = _FENCE.match(line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = "" if not m.group(2).strip() else fence
            out.append("")
        elif m and not (m.group(1)[0] == "`" and "`" in m.group(2)):  # ```x``` is inline code
            fence = m.group(1)
            out.append("")
        else:
            out.append(line)
    return out


def parse_heading(line: str) -> tuple[int, str] | None:
    """(level, title) of an ATX heading line, closing hashes dropped; None for other lines."""
    m = _HEADING.match(line)
    if m is None:
        return None
    return len(m.group(1)), _CLOSING_HASHES.sub("", m.group(2) or "").strip()


def title_severity(title: str) -> str | None:
    """The severity a title leads with ("🔴 **Critical** (2)" -> "Critical"), or None."""
    m = _LEAD_WORD.match(plain(title))
    return normalize_severity(m.group(1)) if m else None


def _label_severity(label: str) -> str | None:
    return normalize_severity(_LABEL_NOISE.sub("", plain(label)))


def table_cells(line: str) -> list[str] | None:
    """A table row's cells, markup stripped; None if the line is not a table row."""
    stripped = line.strip()
    if not stripped.startswith("|"):
        return None
    return [plain(cell) for cell in stripped.strip("|").split("|")]


def _is_separator(cells: list[str] | None) -> bool:
    return cells is not None and all(_SEPARATOR_CELL.fullmatch(c) for c in cells)


def _leading_int(cell: str) -> int | None:
    m = _LEADING_INT.match(cell)
    return int(m.group(1)) if m else None


def counts_in(lines: Iterable[str]) -> dict[str, int]:
    """Counts written as `Label: N` pairs or table rows; the first value per severity wins."""
    counts: dict[str, int] = {}
    columns: dict[int, str] = {}  # a transposed table: | Critical | Major | ... | over | 0 | 3 |
    for line in lines:
        cells = table_cells(line)
        if cells is None:
            columns = {}
            for m in _PAIR.finditer(plain(line)):
                severity = normalize_severity(m.group(1))
                if severity:
                    counts.setdefault(severity, int(m.group(2)))
            continue
        heads = {i: s for i, c in enumerate(cells) if (s := _label_severity(c))}
        if len(heads) >= 2:
            columns = heads
        elif _is_separator(cells):
            continue
        elif columns:
            for i, severity in columns.items():
                value = _leading_int(cells[i]) if i < len(cells) else None
                if value is not None:
                    counts.setdefault(severity, value)
            columns = {}
        elif len(cells) >= 2 and (severity := _label_severity(cells[0])):
            value = _leading_int(cells[1])
            if value is not None:
                counts.setdefault(severity, value)
    return counts


def _is_nothing(text: str) -> bool:
    return _NOTHING.fullmatch(_LEADING_JUNK.sub("", plain(text))) is not None


def findings_in(lines: list[str]) -> list[str]:
    """Top-level list items plus table data rows; sub-bullets and "None." items are not findings."""
    items: list[tuple[int, str]] = []
    rows: list[str] = []
    for i, line in enumerate(lines):
        cells = table_cells(line)
        if cells is not None:
            is_header = i + 1 < len(lines) and _is_separator(table_cells(lines[i + 1]))
            empty = all(not c or c in "-—–" or _is_nothing(c) for c in cells)
            if not (is_header or empty or _is_separator(cells)):
                rows.append(" | ".join(c for c in cells if c))
            continue
        m = _LIST_ITEM.match(line)
        if m and not _THEMATIC_BREAK.match(line):
            items.append((len(m.group(1).expandtabs(4)), m.group(2).strip()))
    if not items:
        return rows
    top = min(indent for indent, _ in items)
    # A nested list needs at least two more columns; less than that is a sloppy sibling.
    return rows + [text for indent, text in items if indent < top + 2 and not _is_nothing(text)]
