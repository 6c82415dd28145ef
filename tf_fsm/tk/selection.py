"""Which tickets are ready, as `tk ready` decides, and the text `tk ready|blocked|show` print.

tk's rules (wedow/ticket, awk over `$TICKETS_DIR/*.md`): a ticket is ready when its status is
`open` or `in_progress` and every dep's status is `closed` (a dep with no file has an empty
status, so it blocks). Output is sorted by priority, then id, both compared with awk's `>`:
as numbers when both sides look like numbers, else as byte strings. tk builds each line as
`priority|id|status|title` and splits it on `|` again, so a `|` in a title cuts it short there;
that is copied too, so the output is tk's byte for byte.

Newer tk versions also hide tickets whose parent is not in_progress and features without a
`## Plan` section (their `--open` turns that off); tf_fsm follows the rules above, i.e. what
`tk ready --open` prints. See docs/ralph.md.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Collection, Iterable
from pathlib import Path
from typing import Any, NamedTuple

from tf_fsm.core.tk_rules import ACTIVE, is_closed, is_ready
from tf_fsm.errors import ShowError
from tf_fsm.tk.backlog import Backlog, TkRecord

# What awk (mawk, Debian's and Ubuntu's awk) takes for a number in a field: decimal, with
# optional sign, exponent and surrounding blanks, and hexadecimal. "inf"/"nan" stay strings.
_NUMBER = re.compile(
    r"[ \t\n]*[+-]?(?:(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
    r"|0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?\d+)?)[ \t\n]*"
)


def awk_number(text: str) -> float | None:
    """The number awk sees in `text`, or None when awk compares it as a string."""
    if not _NUMBER.fullmatch(text):
        return None
    stripped = text.strip(" \t\n")
    unsigned = stripped.lstrip("+-")
    if unsigned[:2] in ("0x", "0X"):
        value = float.fromhex(unsigned)
        return -value if stripped.startswith("-") else value
    return float(stripped)


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def awk_compare(a: str, b: str) -> int:
    """awk's comparison of two fields: -1, 0 or 1."""
    na, nb = awk_number(a), awk_number(b)
    if na is not None and nb is not None:
        return (na > nb) - (na < nb)
    ba, bb = _bytes(a), _bytes(b)
    return (ba > bb) - (ba < bb)


class Line(NamedTuple):
    """One output line of tk ready/blocked, split the way tk splits it."""

    record: TkRecord
    fields: tuple[str, ...]  # priority, id, status, title[, blockers], after split on "|"

    def field(self, index: int) -> str:
        return self.fields[index] if index < len(self.fields) else ""


def _key_column(values: list[str]) -> list[Any] | None:
    """Sort keys equivalent to awk's `>` on this column, one per value (computed once: the
    number test is a regex), or None when the column mixes numbers and strings (awk's order
    is then not a total order; a comparator is used)."""
    seen: dict[str, float | None] = {}  # priorities repeat: 5 values over a whole backlog
    numbers = [seen[v] if v in seen else seen.setdefault(v, awk_number(v)) for v in values]
    if all(n is not None for n in numbers):
        return numbers
    if all(n is None for n in numbers):
        return [_bytes(v) for v in values]
    return None


def tk_sort(lines: list[Line]) -> list[Line]:
    """tk's exchange sort: by field 1 (priority), then field 2 (id), with awk's comparison.
    Ties that awk leaves to its hash order (ids equal as numbers) keep file order."""
    k1 = _key_column([ln.field(0) for ln in lines])
    k2 = _key_column([ln.field(1) for ln in lines])
    if k1 is not None and k2 is not None:
        first, second = k1, k2  # sorted() is stable: equal keys keep file order
        return [lines[i] for i in sorted(range(len(lines)), key=lambda i: (first[i], second[i]))]

    def compare(x: Line, y: Line) -> int:
        return awk_compare(x.field(0), y.field(0)) or awk_compare(x.field(1), y.field(1))

    return sorted(lines, key=functools.cmp_to_key(compare))


def _wanted(rec: TkRecord, assignee: str | None, tag: str | None) -> bool:
    if rec.status not in ACTIVE:
        return False
    if assignee and rec.assignee != assignee:
        return False
    return not tag or tag in rec.tags.split(",")


def unclosed_deps(rec: TkRecord, backlog: Backlog) -> list[str]:
    records = backlog.records
    return [
        dep
        for dep in rec.dep_list()
        if (found := records.get(dep)) is None or not is_closed(found.status)
    ]


def ready(
    backlog: Backlog,
    assignee: str | None = None,
    tag: str | None = None,
    closed_elsewhere: Collection[str] = (),
) -> list[Line]:
    """`tk ready -a ASSIGNEE -T TAG`, in tk's order. `closed_elsewhere`: tickets closed where
    these tk files do not say so yet (on a cluster's remote), neither ready nor blocking."""
    records = backlog.records
    # the rule is tf_fsm.core.ticket_rules.is_ready; the ids tk calls closed, found once
    closed = {tid for tid, rec in records.items() if is_closed(rec.status)}
    closed.update(closed_elsewhere)
    out: list[Line] = []
    filtered = bool(assignee or tag)
    for rec in records.values():  # the whole backlog: the cheap tests come first
        if rec.status not in ACTIVE or (filtered and not _wanted(rec, assignee, tag)):
            continue
        if rec.id in closed:
            continue
        if is_ready(rec.status, rec.deps.split(",") if rec.deps else (), closed):
            joined = f"{rec.priority}|{rec.id}|{rec.status}|{rec.title}"
            out.append(Line(rec, tuple(joined.split("|"))))
    return tk_sort(out)


def blocked(backlog: Backlog, assignee: str | None = None, tag: str | None = None) -> list[Line]:
    """`tk blocked`: open/in_progress tickets with a dep that is not closed."""
    out: list[Line] = []
    for rec in backlog.records.values():
        if not _wanted(rec, assignee, tag):
            continue
        blockers = unclosed_deps(rec, backlog)
        if blockers:
            joined = f"{rec.priority}|{rec.id}|{rec.status}|{rec.title}|[{', '.join(blockers)}]"
            out.append(Line(rec, tuple(joined.split("|"))))
    return tk_sort(out)


def _pad8(text: str) -> str:
    # awk's %-8s pads by bytes (mawk), so a non-ASCII id gets the padding tk gives it.
    return text + " " * max(0, 8 - len(_bytes(text)))


def ready_line(line: Line) -> str:
    f = line.field
    return f"{_pad8(f(1))} [P{f(0)}][{f(2)}] - {f(3)}"


def blocked_line(line: Line) -> str:
    f = line.field
    return f"{_pad8(f(1))} [P{f(0)}][{f(2)}] - {f(3)} <- {f(4)}"


# --- tk show ----------------------------------------------------------------------------------


def find_ticket_file(directory: Path, wanted: str) -> Path:
    """tk's lookup: `<id>.md`, else the one file whose name contains `wanted`."""
    exact = directory / f"{wanted}.md"
    if exact.is_file():
        return exact
    try:
        names = sorted(p.name for p in directory.iterdir() if p.name.endswith(".md"))
    except FileNotFoundError:
        names = []
    matches = [n for n in names if fnmatch.fnmatchcase(n, f"*{wanted}*.md")]
    if len(matches) > 1:
        raise ShowError(f"ambiguous ID '{wanted}' matches multiple tickets")
    if not matches:
        raise ShowError(f"ticket '{wanted}' not found")
    return directory / matches[0]


def _rows(items: Iterable[str], backlog: Backlog) -> list[str]:
    rows = []
    for item in items:
        rec = backlog.records.get(item)
        rows.append(f"- {item} [{rec.status if rec else ''}] {rec.title if rec else ''}")
    return rows


def _section(title: str, rows: list[str]) -> list[str]:
    return ["", f"## {title}", "", *rows] if rows else []


def show(backlog: Backlog, path: Path) -> str:
    """`tk show`: the file, `parent:` lines annotated with the parent's title, then Blockers,
    Blocking, Children and Linked. tk lists Blocking and Children in awk's hash order, which
    no other program can reproduce; tf_fsm lists them by id."""
    target = path.stem  # tk relates tickets to the file's name, not its id: line
    text = path.read_bytes().decode("utf-8", "surrogateescape")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    out: list[str] = []
    in_front = False
    for line in lines:
        if line == "---":
            in_front = not in_front
        elif in_front and line.startswith("parent:"):
            parent = line[len("parent:") :].lstrip(" ")
            if parent in backlog.records:
                line = f"{line}  # {backlog.records[parent].title}"
        out.append(line)
    recs = backlog.records
    own = recs.get(target)
    blockers = unclosed_deps(own, backlog) if own else []
    blocking = sorted(  # once per mention, as tk's loop over the deps does
        r.id
        for r in recs.values()
        if not is_closed(r.status)
        for d in r.deps.split(",")
        if d == target
    )
    children = sorted(r.id for r in recs.values() if r.parent == target)
    out += _section("Blockers", _rows(blockers, backlog))
    out += _section("Blocking", _rows(blocking, backlog))
    out += _section("Children", _rows(children, backlog))
    if own is not None and own.links:  # tk prints the heading whenever the raw list is non-empty
        out += ["", "## Linked", "", *_rows(own.link_list(), backlog)]
    return "\n".join(out) + "\n" if out else ""


# --- parallel safety ----------------------------------------------------------------------------


def components(rec: TkRecord, prefix: str) -> frozenset[str]:
    """The ticket's component tags (e.g. `component:parser`): what it is expected to edit."""
    return frozenset(t for t in rec.tag_list() if t.startswith(prefix))


def may_run_beside(
    mine: frozenset[str], running: Iterable[frozenset[str]], allow_untagged: bool
) -> bool:
    """Agents share one working tree, so two tickets run together only when their component
    tags are disjoint; an untagged ticket could touch anything and runs alone, unless
    `ralph.parallelAllowUntagged`."""
    others = list(running)
    if not others:
        return True
    if not allow_untagged and (not mine or any(not o for o in others)):
        return False
    return all(not (mine & other) for other in others)
