"""The tk ticket format: `.tickets/<id>.md`, YAML-ish frontmatter read line by line.

tk itself parses tickets with awk: one `key: value` a line between two `---` lines, lists in
flow style (`deps: [a, b]`). tf_fsm reads the same way and edits in place, touching only the
lines it changes, so tk keeps reading every file we write.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from tf_fsm.errors import TicketError


def utc_stamp(moment: datetime) -> str:
    """tk's timestamps (`date -u +%Y-%m-%dT%H:%M:%SZ`). Kept here rather than imported from
    tf_fsm.state so that reading tickets does not load pydantic (`tf-fsm tickets` stays fast)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


TICKETS_ENV = "TICKETS_DIR"


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
        text = path.read_bytes().decode("utf-8")
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


# --- the whole backlog, read as tk's awk reads it -------------------------------------------

_TOGGLE = re.compile(r"^---$", re.MULTILINE)
_AWK_KEYS = ("id", "status", "deps", "priority", "assignee", "tags", "parent", "links", "type")
_AWK_FIELD = re.compile(rf"^({'|'.join(_AWK_KEYS)}):(.*)", re.MULTILINE)
_AWK_TITLE = re.compile(r"^# (.+)$", re.MULTILINE)
_BRACKETS_SPACES = str.maketrans("", "", "[] ")


@dataclass(slots=True)
class TkRecord:
    """One ticket as tk's awk programs see it: raw `$2` values, lists already stripped of
    brackets and spaces (still comma-joined), priority defaulted to 2, title from `# `."""

    id: str
    status: str
    deps: str
    priority: str
    assignee: str
    tags: str
    parent: str
    links: str
    type: str
    title: str
    file: str  # the file's path; a Path per ticket would cost more than parsing it

    @property
    def path(self) -> Path:
        return Path(self.file)

    def dep_list(self) -> list[str]:
        return [d for d in self.deps.split(",") if d]

    def tag_list(self) -> list[str]:
        return [t for t in self.tags.split(",") if t]

    def link_list(self) -> list[str]:
        return [x for x in self.links.split(",") if x]


@dataclass(frozen=True)
class ScanProblem:
    path: Path
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


@dataclass
class Backlog:
    """Every ticket by id (a later file with the same id replaces an earlier one, as in tk)."""

    directory: Path
    records: dict[str, TkRecord]
    problems: list[ScanProblem]


def _read_fields(values: dict[str, str], frontmatter: str) -> None:
    # One regex pass finds the lines tk reads (awk's /^key:/); a Python loop over every line
    # was the largest cost of scanning a backlog.
    for key, rest in _AWK_FIELD.findall(frontmatter):
        if rest[:1] == " " and ": " not in rest[1:]:
            values[key] = rest[1:]  # the usual `key: value`
        else:
            parts = f"{key}:{rest}".split(": ", 2)
            values[key] = parts[1] if len(parts) > 1 else ""  # awk's $2 with FS=": "


def awk_view(text: str, path: Path | str) -> TkRecord | None:
    """The record tk's awk builds from one file, or None when it has no `id:` (tk skips it).

    Every `---` line toggles frontmatter, anywhere in the file; a field line's value is awk's
    `$2` with `FS=": "` (the text between the first and second ": "); the last one wins."""
    values = dict.fromkeys(_AWK_KEYS, "")
    title = ""
    close = text.find("\n---\n", 3) if text.startswith("---\n") else -1
    if close >= 0 and not _TOGGLE.search(text, close + 5):
        # The usual file: one frontmatter block at the top and no `---` line below it.
        _read_fields(values, text[4:close])
        found = _AWK_TITLE.search(text, close + 5)
        title = found.group(1) if found else ""
    else:
        for index, segment in enumerate(_TOGGLE.split(text)):
            if index % 2:
                _read_fields(values, segment)
            elif not title and (found := _AWK_TITLE.search(segment)):
                title = found.group(1)
    if not values["id"]:
        return None
    return TkRecord(
        id=values["id"],
        status=values["status"],
        deps=values["deps"].translate(_BRACKETS_SPACES),
        priority=values["priority"] or "2",
        assignee=values["assignee"],
        tags=values["tags"].translate(_BRACKETS_SPACES),
        parent=values["parent"],
        links=values["links"].translate(_BRACKETS_SPACES),
        type=values["type"],
        title=title,
        file=str(path),
    )


_FileKey = tuple[int, int, int, int]  # inode, size, mtime, ctime: a ScanCache's validity


def _key(st: os.stat_result) -> _FileKey:
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def _read_bytes(path: str, keyed: bool = False) -> tuple[bytes, _FileKey | None]:
    # os.open/os.read: a third cheaper than open().read() in the hot loop of a 10k scan; the
    # key comes from the descriptor read, so it describes the bytes read
    fd = os.open(path, os.O_RDONLY)
    try:
        key = _key(os.fstat(fd)) if keyed else None
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks), key
    finally:
        os.close(fd)


#: a file whose mtime or ctime is this close to the scan may change again within the same
#: timestamp tick and still look unchanged (git's "racily clean"), so it is never cached
_RACY_NS = 2_000_000_000

#: what a ScanCache keeps per file name: its key, and what it gave
_Parsed = tuple[_FileKey, TkRecord | None, str | None]


class ScanCache:
    """The records of an earlier `scan`, reused for files whose inode, size, mtime and ctime
    are unchanged. For the loop, which scans the backlog again after every attempt: a stat per
    file instead of reading and parsing it."""

    def __init__(self, racy_ns: int = _RACY_NS) -> None:
        self.files: dict[str, _Parsed] = {}
        self.racy_ns = racy_ns  # files changed this recently are read again on the next scan


def _parse_file(path: str, keyed: bool) -> tuple[_FileKey | None, TkRecord | None, str | None]:
    """The record tk would build from one file, or why there is none (None: an empty file);
    with `keyed`, also the file's key."""
    data, key = _read_bytes(path, keyed)
    record = awk_view(data.decode("utf-8", "surrogateescape"), path)
    if record is None and data.strip():
        return key, None, "no `id:` line in its frontmatter; tk skips it"
    return key, record, None


def scan(directory: Path, cache: ScanCache | None = None) -> Backlog:
    """Read `<directory>/*.md` in one pass, the files tk's glob would hand to awk (no dot
    files; sorted by bytes, as `LC_ALL=C` bash sorts a glob)."""
    records: dict[str, TkRecord] = {}
    problems: list[ScanProblem] = []
    try:
        with os.scandir(directory) as listing:
            names = [e.name for e in listing if e.name.endswith(".md") and e.name[0] != "."]
    except FileNotFoundError:
        return Backlog(directory, records, problems)
    names.sort(key=os.fsencode)
    base = os.fspath(directory).rstrip("/") or "/"
    known = cache.files if cache is not None else {}
    seen: dict[str, _Parsed] = {}
    settled = time.time_ns() - (cache.racy_ns if cache is not None else 0)
    for name in names:
        path = f"{base}/{name}"
        try:
            hit = known.get(name)
            if hit is not None and hit[0] != _key(os.stat(path)):  # noqa: PTH116 (a str)
                hit = None
            parsed = hit or _parse_file(path, cache is not None)
        except OSError as exc:
            problems.append(ScanProblem(Path(path), f"cannot read: {exc.strerror or exc}"))
            continue
        key, record, problem = parsed
        if key is not None and max(key[2], key[3]) < settled:
            seen[name] = (key, record, problem)
        if problem is not None:
            problems.append(ScanProblem(Path(path), problem))
        if record is None:
            continue
        earlier = records.get(record.id)
        if earlier is not None:
            problem = f"id {record.id} is also in {earlier.path.name}; this one wins"
            problems.append(ScanProblem(Path(path), problem))
        records[record.id] = record
    if cache is not None:
        cache.files = seen  # files gone since are forgotten
    return Backlog(directory, records, problems)
