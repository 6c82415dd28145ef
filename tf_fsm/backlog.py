"""The whole backlog, read as tk's awk reads it: one record per `.tickets/*.md` file, in one
pass (`tf-fsm tickets`, the loop's selection), and the cache that lets the loop's later passes
stat unchanged files instead of reading them. tf_fsm.tickets reads and edits one ticket."""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

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
