"""The tk ticket format: `.tickets/<id>.md`, YAML-ish frontmatter read line by line.

tk itself parses tickets with awk: one `key: value` a line between two `---` lines, lists in
flow style (`deps: [a, b]`). tf_fsm reads the same way and edits in place, touching only the
lines it changes, so tk keeps reading every file we write.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tf_fsm.errors import TicketError
from tf_fsm.fs.read import read_bytes
from tf_fsm.tk.backlog import TICKETS_ENV as TICKETS_ENV
from tf_fsm.tk.backlog import Backlog as Backlog
from tf_fsm.tk.backlog import ScanCache as ScanCache
from tf_fsm.tk.backlog import ScanProblem as ScanProblem
from tf_fsm.tk.backlog import TkRecord as TkRecord
from tf_fsm.tk.backlog import awk_view as awk_view
from tf_fsm.tk.backlog import scan as scan
from tf_fsm.tk.backlog import tickets_dir as tickets_dir


def utc_stamp(moment: datetime) -> str:
    """tk's timestamps (`date -u +%Y-%m-%dT%H:%M:%SZ`). Kept here rather than imported from
    tf_fsm.core.state so that reading tickets does not load pydantic (`tf-fsm tickets` stays
    fast)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Ticket:
    id: str
    path: Path
    fields: dict[str, str] = field(default_factory=dict)  # raw values, as tk's awk sees them
    title: str = ""
    body: str = ""  # everything after the frontmatter's closing line, byte for byte

    @property
    def status(self) -> str:
        return self.fields.get("status", "")

    def list_field(self, key: str) -> list[str]:
        """A flow-style list (`[a, b]`) as tk splits it."""
        # tk: gsub(/[\[\] ]/, "", value), then split on ",": inner spaces go too.
        raw = self.fields.get(key, "").translate({ord("["): None, ord("]"): None, ord(" "): None})
        return [item for item in raw.split(",") if item]


def ticket_path(root: Path, ticket_id: str) -> Path:
    """The ticket's file. The id must already be validated (`store.validate_ticket_id`)."""
    return tickets_dir(root) / f"{ticket_id}.md"


def parse(text: str, path: Path) -> Ticket:
    lines = text.split("\n")  # awk splits at \n only, not at U+2028 and friends
    if not lines or lines[0].rstrip() != "---":
        raise TicketError(path, "no frontmatter: the first line must be ---", 1)
    try:
        end = next(i for i, line in enumerate(lines[1:], start=1) if line.rstrip() == "---")
    except StopIteration:
        raise TicketError(path, "frontmatter is not closed by a --- line", 1) from None
    fields: dict[str, str] = {}
    for number, line in enumerate(lines[1:end], start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep or not key.strip() or key != key.strip():
            raise TicketError(path, f"expected `key: value`, got {line!r}", number)
        fields[key] = value.strip()
    body = "\n".join(lines[end + 1 :])
    title = next((ln[2:].strip() for ln in lines[end + 1 :] if ln.startswith("# ")), "")
    return Ticket(fields.get("id", path.stem), path, fields, title, body)


def read(root: Path, ticket_id: str) -> Ticket:
    path = ticket_path(root, ticket_id)
    try:
        # bytes, not read_text: universal newlines would turn CRLF into LF and a lone CR into a
        # line break, and an edit written back from that text would rewrite every line ending
        text = read_bytes(path).decode("utf-8")
    except FileNotFoundError:
        raise TicketError(path, f"ticket {ticket_id} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TicketError(path, f"cannot read: {exc}") from None
    return parse(text, path)


def _line_ending(text: str) -> str:
    """The text's dominant line ending: CRLF when more lines end in CRLF than in a bare LF, else
    LF. A lone CR ends no line (awk's lines end at LF only)."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf > text.count("\n") - crlf else "\n"


def with_field(text: str, key: str, value: str) -> str:
    """Set one frontmatter field, as `tk edit` does: replace its line, or add it first. Every
    other byte is kept; the new line ends as most lines of `text` do (CRLF or LF)."""
    lines = text.split("\n")  # a CRLF line keeps its \r here, a lone \r stays inside its line
    end = next((i for i, ln in enumerate(lines[1:], start=1) if ln.rstrip() == "---"), None)
    if not lines or lines[0].rstrip() != "---" or end is None:
        raise ValueError("text has no frontmatter")
    new = f"{key}: {value}" + ("\r" if _line_ending(text) == "\r\n" else "")
    for i in range(1, end):
        if lines[i].startswith(f"{key}:"):
            lines[i] = new
            return "\n".join(lines)
    return "\n".join([lines[0], new, *lines[1:]])


def with_note(text: str, note: str, now: datetime) -> str:
    """Append a note exactly as `tk add-note` does; in a file whose lines mostly end in CRLF,
    the lines added end in CRLF too. `text` itself is kept byte for byte."""
    eol = _line_ending(text)
    if eol != "\n":
        note = re.sub(r"(?<!\r)\n", eol, note)
    out = text
    if not any(line.startswith("## Notes") for line in text.split("\n")):
        out += f"{eol}## Notes{eol}"
    return out + f"{eol}**{utc_stamp(now)}**{eol}{eol}{note}{eol}"


# --- writing, so tk's awk keeps reading ---------------------------------------------------

#: Frontmatter keys in the order `tk create` writes them; other keys follow in their order.
TK_KEY_ORDER: tuple[str, ...] = (
    "id",
    "status",
    "deps",
    "links",
    "created",
    "type",
    "priority",
    "assignee",
    "external-ref",
    "parent",
    "tags",
)
#: Keys tk's awk reads with `FS=": "`: a value holding ": " would be cut short there.
_AWK_READ_KEYS = frozenset({"id", "status", "deps", "links", "priority", "assignee", "parent"})
_AWK_READ_KEYS |= {"tags", "type"}
_KEY = re.compile(r"[A-Za-z_][\w-]*")


def format_list(items: list[str] | tuple[str, ...]) -> str:
    """A flow list as tk writes it (`[a, b]`). tk removes every space and bracket and splits on
    `,`, so an item holding one of those would come back different: refused."""
    for item in items:
        if not item or any(c in item for c in ", []\n\r\t"):
            raise ValueError(f"list item {item!r} would not survive tk's split (`[a, b]`)")
    return "[" + ", ".join(items) + "]"


def render(fields: dict[str, str], body: str) -> str:
    """A whole ticket file: one `key: value` a line between `---` lines, then the body.
    Unknown keys are written as given; values must stay on one line."""
    lines = ["---"]
    for key, value in fields.items():
        if not _KEY.fullmatch(key):
            raise ValueError(f"bad frontmatter key {key!r}")
        if "\n" in value or "\r" in value:
            raise ValueError(f"{key}: value must be one line (tk reads one `key: value` a line)")
        if key in _AWK_READ_KEYS and ": " in value:
            raise ValueError(f"{key}: value must not contain ': ' (tk's awk would cut it there)")
        lines.append(f"{key}: {value}" if value else f"{key}:")
    lines.append("---")
    return "\n".join(lines) + "\n" + body


def new_ticket(
    ticket_id: str,
    title: str,
    *,
    status: str = "open",
    deps: tuple[str, ...] = (),
    links: tuple[str, ...] = (),
    created: str | None = None,
    type_: str = "task",
    priority: int | str = 2,
    assignee: str = "",
    external_ref: str = "",
    parent: str = "",
    tags: tuple[str, ...] = (),
    description: str = "",
    extra: dict[str, str] | None = None,
) -> str:
    """The text `tk create` writes: same keys, same order, optional keys only when set
    (`created` defaults to now, as tk's)."""
    fields = {
        "id": ticket_id,
        "status": status,
        "deps": format_list(deps),
        "links": format_list(links),
        "created": utc_stamp(datetime.now(UTC)) if created is None else created,
        "type": type_,
        "priority": str(priority),
    }
    optional = {"assignee": assignee, "external-ref": external_ref, "parent": parent}
    fields |= {k: v for k, v in optional.items() if v}
    if tags:
        fields["tags"] = format_list(tags)
    fields |= extra or {}
    body = f"# {title}\n\n" + (f"{description}\n\n" if description else "")
    return render(fields, body)


def rewrite(ticket: Ticket) -> str:
    """`ticket` written back: its fields in their order (unknown keys kept), then its body.
    Byte-identical for a file tk created; the frontmatter's lines end as most of the body's do
    (CRLF or LF), and the body is kept byte for byte."""
    head = render(dict(ticket.fields), "")  # values hold no line break: each \n ends a line
    if _line_ending(ticket.body) != "\n":
        head = head.replace("\n", "\r\n")
    return head + ticket.body  # the body keeps its own final newline
