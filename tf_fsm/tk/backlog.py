"""The whole backlog, read as tk's awk reads it: one record per `.tickets/*.md` file, in one
pass (`tf-fsm tickets`, the loop's selection; tf_fsm.tk.file_reader reads the files), and the
cache that lets the loop's later passes stat unchanged files instead of reading them.
tf_fsm.tk.tickets reads and edits one ticket."""

from __future__ import annotations

import gc
import os
import re
import time
from pathlib import Path
from typing import NamedTuple

from tf_fsm.tk.file_reader import FileKey, Read, file_key, read_files

_TOGGLE = re.compile(r"^---$", re.MULTILINE)
# The keys tk's awk reads, in the order `tk create` writes them (and _TK_LAYOUT's groups)
_AWK_KEYS = ("id", "status", "deps", "links", "type", "priority", "assignee", "parent", "tags")
# A field line's value, awk's `$2` with FS=": ": from the line's first ": " to its next one (or
# the line's end); empty when the line has no ": ". The patterns start with a literal "\n",
# which the regex engine finds by a fast scan: `^` with MULTILINE is tried at every character
# and took twice as long. The frontmatter handed to them starts with its "\n".
_AWK_FIELD = re.compile(
    rf"\n({'|'.join(_AWK_KEYS)}):(?:(?: |[^\n]*?: )([^:\n]*(?::(?! )[^:\n]*)*))?"
)
_BODY_TOGGLE = re.compile(r"\n---$", re.MULTILINE)
_BODY_TITLE = re.compile(r"\n# (.+)")
_AWK_TITLE = re.compile(r"^# (.+)$", re.MULTILINE)
_NO_VALUES = dict.fromkeys(_AWK_KEYS, "")
# The layout `tk create` writes (tf_fsm.tk.tickets.new_ticket): these keys in this order, each
# once, each value free of ": " (so that awk's `$2` is the rest of the line). One match reads
# a file in it (a record in 2.6 µs instead of 3.9), and awk's rules would give the same record
# (tests/test_backlog_scan.py).
_VALUE = r"([^:\n]*(?::(?! )[^:\n]*)*)\n"
_TK_LAYOUT = re.compile(
    f"---\nid: {_VALUE}status: {_VALUE}deps: {_VALUE}links: {_VALUE}created: [^\n]*\n"
    f"type: {_VALUE}priority: {_VALUE}(?:assignee: {_VALUE})?(?:external-ref: [^\n]*\n)?"
    f"(?:parent: {_VALUE})?(?:tags: {_VALUE})?---\n"
)

# The records are NamedTuples, not dataclasses: importing dataclasses (it imports inspect) was
# a tenth of the start-up of `tf-fsm tickets ready`.


class TkRecord(NamedTuple):
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


class ScanProblem(NamedTuple):
    path: Path
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}"


class Backlog(NamedTuple):
    """Every ticket by id (a later file with the same id replaces an earlier one, as in tk)."""

    directory: Path
    records: dict[str, TkRecord]
    problems: list[ScanProblem]


TICKETS_ENV = "TICKETS_DIR"


def misfiled(record: TkRecord) -> str | None:
    """Why `run` cannot take a ticket tk lists: its file is not named for its id (`run` reads
    `<id>.md`); None when it is."""
    if record.path.stem == record.id:
        return None
    return f"its id is {record.id} but its file is {record.path.name} (run reads {record.id}.md)"


def tickets_dir(root: Path) -> Path:
    """Where the tickets are: $TICKETS_DIR (relative to the project root), else .tickets."""
    configured = os.environ.get(TICKETS_ENV)
    if configured:
        path = Path(configured)
        return path if path.is_absolute() else root / path
    return root / ".tickets"


def _bare(items: str) -> str:
    # tk's gsub(/[\[\] ]/, ""); three replaces take a quarter of one str.translate
    return items.replace("[", "").replace("]", "").replace(" ", "")


def awk_view(text: str, path: Path | str) -> TkRecord | None:
    """The record tk's awk builds from one file, or None when it has no `id:` (tk skips it).

    Every `---` line toggles frontmatter, anywhere in the file; a field line's value is awk's
    `$2` with `FS=": "` (the text between the first and second ": "); the last one wins."""
    fields = _tk_layout(text) or _awk_fields(text)
    tid, status, deps, links, type_, priority, assignee, parent, tags, title = fields
    if not tid:
        return None
    return TkRecord(  # in field order; keywords cost twice as much, 10k times over
        tid,
        status,
        _bare(deps),
        priority or "2",
        assignee,
        _bare(tags),
        parent,
        _bare(links),
        type_,
        title,
        str(path),
    )


_Fields = tuple[str, ...]  # _AWK_KEYS' values, then the title


def _tk_layout(text: str) -> _Fields | None:
    """The fields of a file in the layout `tk create` writes (see _TK_LAYOUT) and with no
    `---` line in its body; None for any other file."""
    layout = _TK_LAYOUT.match(text)
    if layout is None or _BODY_TOGGLE.search(text, body := layout.end() - 1):
        return None
    found = _BODY_TITLE.search(text, body)
    return (*layout.groups(""), found.group(1) if found else "")


def _awk_fields(text: str) -> _Fields:
    """Any file's fields, by awk's rules (see awk_view)."""
    values = _NO_VALUES.copy()
    close = text.find("\n---\n", 3) if text.startswith("---\n") else -1
    if close >= 0 and not _BODY_TOGGLE.search(text, close + 4):
        # The usual file: one frontmatter block at the top and no `---` line below it.
        values.update(_AWK_FIELD.findall(text, 3, close + 1))  # the last line of a key wins
        found = _BODY_TITLE.search(text, close + 4)
        title = found.group(1) if found else ""
    else:
        title = ""
        for index, segment in enumerate(_TOGGLE.split(text)):
            if index % 2:
                values.update(_AWK_FIELD.findall("\n" + segment))
            elif not title and (found := _AWK_TITLE.search(segment)):
                title = found.group(1)
    return (*(values[key] for key in _AWK_KEYS), title)


#: a file whose mtime or ctime is this close to the scan may change again within the same
#: timestamp tick and still look unchanged (git's "racily clean"), so it is never cached
_RACY_NS = 2_000_000_000

#: what a ScanCache keeps per file name: its key, and what it gave
_Parsed = tuple[FileKey, TkRecord | None, str | None]


class ScanCache:
    """The records of an earlier `scan`, reused for files whose inode, size, mtime and ctime
    are unchanged. For the loop, which scans the backlog again after every attempt: a stat per
    file instead of reading and parsing it."""

    def __init__(self, racy_ns: int = _RACY_NS) -> None:
        self.files: dict[str, _Parsed] = {}
        self.racy_ns = racy_ns  # files changed this recently are read again on the next scan
        self.scans = 0


#: from this many files, a cached scan (the loop's) runs with the cyclic collector paused and
#: leaves its records frozen out of the collector's sight
FREEZE_MIN_FILES = 2000
#: ...and every this many such scans, everything is unfrozen and collected once
FULL_COLLECTION_EVERY = 50


def _settle(cache: ScanCache) -> None:
    """A loop keeps the records of its last scan until the next one, and they make no cycles.
    Frozen (gc.freeze), the cyclic collector stops walking them at every full collection, which
    at 10k tickets took up to half of a pass (and a 100k scan was a quarter collecting). A
    freeze also catches cyclic garbage not collected yet, so every FULL_COLLECTION_EVERY scans
    everything is unfrozen and collected once: a cycle is freed late, never lost."""
    cache.scans += 1
    if cache.scans % FULL_COLLECTION_EVERY == 0:
        gc.unfreeze()
        gc.collect()
    gc.freeze()


_Result = tuple[FileKey | None, TkRecord | None, str | None]  # key, record, problem


def _parse_file(path: str, read: Read) -> _Result:
    """The record tk would build from one file, or why there is none (neither: an empty file),
    and the file's key if it was read with one (none when it could not be read: never cached)."""
    key, data = read
    if isinstance(data, str):
        return None, None, data
    record = awk_view(data.decode("utf-8", "surrogateescape"), path)
    if record is None and data.strip():
        return key, None, "no `id:` line in its frontmatter; tk skips it"
    return key, record, None


def _parse_files(paths: list[str], keyed: bool) -> list[_Result]:
    return [
        _parse_file(path, read) for path, read in zip(paths, read_files(paths, keyed), strict=True)
    ]


def _cached_parse(cache: ScanCache, names: list[str], paths: list[str]) -> list[_Result]:
    """`_parse_files` with the cache's results reused for files whose key is the one they were
    cached with; the cache then holds this scan's files (files gone since are forgotten)."""
    hits: dict[int, _Result] = {}
    for index, name in enumerate(names):
        hit = cache.files.get(name)
        try:
            if hit is not None and hit[0] == file_key(os.stat(paths[index])):  # noqa: PTH116
                hits[index] = hit
        except OSError:
            pass  # it is read again, which reports why it cannot be
    misses = [i for i in range(len(paths)) if i not in hits]
    fresh = iter(_parse_files([paths[i] for i in misses], True))
    results = [hits[i] if i in hits else next(fresh) for i in range(len(paths))]
    settled = time.time_ns() - cache.racy_ns
    cache.files = {
        name: (key, record, problem)
        for name, (key, record, problem) in zip(names, results, strict=True)
        if key is not None and max(key[2], key[3]) < settled
    }
    return results


def scan(directory: Path, cache: ScanCache | None = None) -> Backlog:
    """Read `<directory>/*.md` in one pass, the files tk's glob would hand to awk (no dot
    files; sorted by bytes, as `LC_ALL=C` bash sorts a glob)."""
    try:
        listing = os.listdir(directory)  # noqa: PTH208 (names; a Path each costs more)
    except FileNotFoundError:
        return Backlog(directory, {}, [])
    names = [name for name in listing if name.endswith(".md") and name[0] != "."]
    # ASCII names sort as their bytes do; any other name may hold bytes that are not UTF-8
    # (decoded to lone surrogates, which sort elsewhere), so then each is sorted by its bytes.
    names.sort(key=None if "".join(names).isascii() else os.fsencode)
    if cache is None or len(names) < FREEZE_MIN_FILES or not gc.isenabled():
        return _scan_files(directory, names, cache)
    gc.disable()  # the collector would walk the new records again and again while they grow
    try:
        return _scan_files(directory, names, cache)
    finally:
        _settle(cache)  # before the collector is back: it then never sees these records
        gc.enable()


def _scan_files(directory: Path, names: list[str], cache: ScanCache | None) -> Backlog:
    base = os.fspath(directory).rstrip("/") or "/"
    paths = [f"{base}/{name}" for name in names]
    results = _parse_files(paths, False) if cache is None else _cached_parse(cache, names, paths)
    records: dict[str, TkRecord] = {}
    problems: list[ScanProblem] = []
    for path, (_, record, problem) in zip(paths, results, strict=True):
        if problem is not None:
            problems.append(ScanProblem(Path(path), problem))
        if record is None:
            continue
        earlier = records.get(record.id)
        if earlier is not None:
            problem = f"id {record.id} is also in {earlier.path.name}; this one wins"
            problems.append(ScanProblem(Path(path), problem))
        records[record.id] = record
    return Backlog(directory, records, problems)
