"""The tk ticket format: `.tickets/<id>.md`, YAML-ish frontmatter read line by line.

tk itself parses tickets with awk: one `key: value` a line between two `---` lines, lists in
flow style (`deps: [a, b]`). tf_fsm reads the same way and edits in place, touching only the
lines it changes, so tk keeps reading every file we write.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from tf_fsm.errors import TicketError
from tf_fsm.state import utc_stamp

TICKETS_ENV = "TICKETS_DIR"


@dataclass(frozen=True)
class Ticket:
    id: str
    path: Path
    fields: dict[str, str] = field(default_factory=dict)  # raw values, as tk's awk sees them
    title: str = ""
    body: str = ""  # everything after the frontmatter

    @property
    def status(self) -> str:
        return self.fields.get("status", "")

    def list_field(self, key: str) -> list[str]:
        """A flow-style list (`[a, b]`) as tk splits it."""
        raw = self.fields.get(key, "").strip().removeprefix("[").removesuffix("]")
        return [item.strip() for item in raw.split(",") if item.strip()]


def tickets_dir(root: Path) -> Path:
    configured = os.environ.get(TICKETS_ENV)
    if configured:
        path = Path(configured)
        return path if path.is_absolute() else root / path
    return root / ".tickets"


def ticket_path(root: Path, ticket_id: str) -> Path:
    """The ticket's file. The id must already be validated (`store.validate_ticket_id`)."""
    return tickets_dir(root) / f"{ticket_id}.md"


def parse(text: str, path: Path) -> Ticket:
    lines = text.splitlines()
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
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TicketError(path, f"ticket {ticket_id} not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TicketError(path, f"cannot read: {exc}") from None
    return parse(text, path)


def with_field(text: str, key: str, value: str) -> str:
    """Set one frontmatter field, as `tk edit` does: replace its line, or add it first."""
    lines = text.split("\n")
    end = next((i for i, ln in enumerate(lines[1:], start=1) if ln.rstrip() == "---"), None)
    if not lines or lines[0].rstrip() != "---" or end is None:
        raise ValueError("text has no frontmatter")
    for i in range(1, end):
        if lines[i].startswith(f"{key}:"):
            lines[i] = f"{key}: {value}"
            return "\n".join(lines)
    return "\n".join([lines[0], f"{key}: {value}", *lines[1:]])


def with_note(text: str, note: str, now: datetime) -> str:
    """Append a note exactly as `tk add-note` does."""
    out = text
    if not any(line.startswith("## Notes") for line in text.split("\n")):
        out += "\n## Notes\n"
    return out + f"\n**{utc_stamp(now)}**\n\n{note}\n"
