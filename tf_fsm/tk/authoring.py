"""Writing tickets as tk writes them: a new ticket's id (tk's rule), the fields a person gives,
checked and named when wrong, the title and description edits of `tk edit`, and the
dependency rules (every dependency an existing ticket, no cycle).

tk's rules, from its script (`ticket`): an id is the project directory's initials (the first
letter of each `-`/`_`/blank-separated segment of its name; its first three characters when
that gives nothing), a dash, and the first 4 hex digits of the sha256 of `"<pid><epoch
seconds>\\n"`; a priority is one of 0..4; `--tags a,b` is written `tags: [a, b]`; `tk edit
--title` replaces the first `# ` line after the frontmatter; `tk edit -d` replaces the lines
between it and the first `##` line."""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from tf_fsm.errors import TicketFieldError
from tf_fsm.tk.tickets import _line_ending, format_list

#: tk's VALID_PRIORITIES
PRIORITIES: tuple[str, ...] = ("0", "1", "2", "3", "4")
_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_-]*")
#: how many ids of tk's 4 hex digits are tried before a longer hash is taken
_SHORT_TRIES = 64


def content_hash(data: bytes) -> str:
    """The sha256 of a ticket file's bytes: what an edit form sends back, so that an edit of
    a file changed on disk since the form was filled is refused."""
    return hashlib.sha256(data).hexdigest()


# --- ids ------------------------------------------------------------------------------------


def id_prefix(project: Path) -> str:
    """tk's prefix: the initials of the project directory's name. Characters a ticket id may
    not hold are left out (tk would keep them); `t` when nothing is left."""
    name = project.name
    initials = "".join(part[0] for part in re.split(r"[-_\s]+", name) if part)
    prefix = initials or name[:3]
    return re.sub(r"[^A-Za-z0-9]", "", prefix) or "t"


def candidate_ids(prefix: str, pid: int | None = None, now: float | None = None) -> Iterable[str]:
    """The ids to try, in order: tk's own first (pid and epoch seconds), then the same hash
    salted with a counter, then longer hashes when the short ones are all taken."""
    seed = f"{os.getpid() if pid is None else pid}{int(time.time() if now is None else now)}"
    n = 0
    while True:
        salt = "" if n == 0 else f".{n}"
        digest = hashlib.sha256(f"{seed}{salt}\n".encode()).hexdigest()
        yield f"{prefix}-{digest[: 4 if n < _SHORT_TRIES else 8]}"
        n += 1


# --- fields ---------------------------------------------------------------------------------


def title_field(value: str) -> str:
    title = value.strip()
    if not title:
        raise TicketFieldError("title", "must not be empty")
    if "\n" in title or "\r" in title:
        raise TicketFieldError("title", "must be one line (it is the `# ` line of the ticket)")
    return title


def priority_field(value: str | int) -> str:
    text = str(value).strip()
    if text not in PRIORITIES:
        raise TicketFieldError("priority", f"must be one of {', '.join(PRIORITIES)}, not {text!r}")
    return text


def type_field(value: str) -> str:
    text = value.strip()
    if not _TYPE.fullmatch(text):
        raise TicketFieldError("type", f"must be one word (task, feature, bug, ...), not {text!r}")
    return text


def assignee_field(value: str) -> str:
    text = value.strip()
    if "\n" in text or "\r" in text or ": " in text:
        raise TicketFieldError("assignee", "must be one line without ': ' (tk's awk reads it)")
    return text


def list_field(field: str, value: str | Iterable[str]) -> tuple[str, ...]:
    """A comma-separated list (or the items themselves), blanks dropped, duplicates once, each
    item one that tk's `[a, b]` split gives back."""
    items = value.split(",") if isinstance(value, str) else list(value)
    out = tuple(dict.fromkeys(item.strip() for item in items if item.strip()))
    try:
        format_list(out)
    except ValueError as exc:
        raise TicketFieldError(field, str(exc)) from None
    return out


def description_field(value: str) -> str:
    """The description as tk writes it: printed as given, then a blank line; trailing line
    breaks are dropped (a textarea's last newline would add an empty line)."""
    return value.replace("\r\n", "\n").rstrip("\n")


def description_of(body: str) -> str:
    """What `tk edit -d` replaces: the lines between the body's `# ` title line and its first
    `##` line, without the blank lines around them."""
    lines = [line.removesuffix("\r") for line in body.split("\n")]
    start = next((i + 1 for i, line in enumerate(lines) if line.startswith("# ")), 0)
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("##")), len(lines))
    return "\n".join(lines[start:end]).strip("\n")


# --- dependencies ---------------------------------------------------------------------------


def check_deps(
    ticket_id: str | None, deps: tuple[str, ...], graph: Mapping[str, list[str]]
) -> None:
    """Every dependency is an existing ticket (a key of `graph`: id -> its deps), not the
    ticket itself, and, with them, `ticket_id` would depend on itself through no cycle."""
    for dep in deps:
        if dep == ticket_id:
            raise TicketFieldError("deps", f"{dep} cannot depend on itself")
        if dep not in graph:
            raise TicketFieldError("deps", f"no ticket {dep} in the backlog")
    if ticket_id is None:
        return  # a new ticket: nothing depends on it yet
    path = cycle(ticket_id, deps, graph)
    if path:
        raise TicketFieldError("deps", "would make a cycle: " + " -> ".join(path))


def cycle(
    ticket_id: str, deps: tuple[str, ...], graph: Mapping[str, list[str]]
) -> list[str] | None:
    """The path `ticket_id -> ... -> ticket_id` that `deps` would close, or None."""
    seen: set[str] = set()

    def walk(node: str, trail: list[str]) -> list[str] | None:
        if node == ticket_id:
            return [*trail, node]
        if node in seen:
            return None
        seen.add(node)
        for nxt in graph.get(node, []):
            found = walk(nxt, [*trail, node])
            if found:
                return found
        return None

    for dep in deps:
        found = walk(dep, [ticket_id])
        if found:
            return found
    return None


# --- tk edit's body edits -------------------------------------------------------------------


def _rewrite_body(text: str, on_line: Callable[[str, int, list[str]], bool]) -> str:
    """tk's awk over the file, line by line: `on_line(bare line, frontmatter count, out)`
    appends what to print and returns True, or False to print the line itself. A `---` line
    (CR allowed) counts, as awk's `/^---$/` does; the result ends with a newline, as awk's
    output does."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    out: list[str] = []
    front = 0
    for line in lines:
        bare = line[:-1] if line.endswith("\r") else line
        if bare == "---":
            front += 1
            out.append(line)
        elif not on_line(bare, front, out):
            out.append(line)
    return "\n".join(out) + "\n"


def with_title(text: str, title: str) -> str:
    """`tk edit --title`: the first `# ` line after the frontmatter becomes `# <title>`; a
    ticket without one gets it right after the frontmatter (where tk would change nothing)."""
    cr = "\r" if _line_ending(text) == "\r\n" else ""
    done = False

    def line(bare: str, front: int, out: list[str]) -> bool:
        nonlocal done
        if front == 2 and not done and bare.startswith("# "):
            out.append(f"# {title}{cr}")
            done = True
            return True
        return False

    new = _rewrite_body(text, line)
    if done:
        return new
    head, sep, body = _split_frontmatter(new)
    return head + sep + f"# {title}{cr}\n" + body


def with_description(text: str, description: str) -> str:
    """`tk edit -d`: the lines between the title and the first `##` line become a blank line,
    the description and a blank line (just a blank line for an empty description)."""
    cr = "\r" if _line_ending(text) == "\r\n" else ""
    state = {"past_title": False, "in_desc": False}

    def line(bare: str, front: int, out: list[str]) -> bool:
        if front == 2 and bare.startswith("# ") and not state["past_title"]:
            out.append(bare + cr)
            out.append(cr)
            if description:
                out.extend(part + cr for part in description.split("\n"))
                out.append(cr)
            state["past_title"] = state["in_desc"] = True
            return True
        if state["in_desc"] and bare.startswith("##"):
            state["in_desc"] = False
            return False
        return state["in_desc"]  # a line of the old description: dropped

    return _rewrite_body(text, line)


def _split_frontmatter(text: str) -> tuple[str, str, str]:
    """(frontmatter through its closing `---` line's end, "", the rest)."""
    lines = text.split("\n")
    end = next(
        (i for i, ln in enumerate(lines[1:], start=1) if ln.rstrip("\r") == "---"), len(lines) - 1
    )
    return "\n".join(lines[: end + 1]) + "\n", "", "\n".join(lines[end + 1 :])
