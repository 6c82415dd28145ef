"""The whole backlog, read as tk's awk reads it: one record per `.tickets/*.md` file, in one
pass (`tf-fsm tickets`, the loop's selection; a large backlog read once is read by a forked
reader while this process parses), and the cache that lets the loop's later passes stat
unchanged files instead of reading them. tf_fsm.tickets reads and edits one ticket."""

from __future__ import annotations

import gc
import marshal
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from signal import Signals

_TOGGLE = re.compile(r"^---$", re.MULTILINE)
_AWK_KEYS = ("id", "status", "deps", "priority", "assignee", "tags", "parent", "links", "type")
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
    if not values["id"]:
        return None
    return TkRecord(  # in field order; keywords cost twice as much, 10k times over
        values["id"],
        values["status"],
        _bare(values["deps"]),
        values["priority"] or "2",
        values["assignee"],
        _bare(values["tags"]),
        values["parent"],
        _bare(values["links"]),
        values["type"],
        title,
        str(path),
    )


_FileKey = tuple[int, int, int, int]  # inode, size, mtime, ctime: a ScanCache's validity


def _key(st: os.stat_result) -> _FileKey:
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


#: a file's key and its bytes, or its key (if any) and why it could not be read
_Read = tuple[_FileKey | None, bytes | str]


def _read_file(path: str, keyed: bool) -> _Read:
    # os.open/os.read: a third cheaper than open().read() in the hot loop of a 10k scan; the
    # key comes from the descriptor read, so it describes the bytes read
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            key = _key(os.fstat(fd)) if keyed else None
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
            return key, b"".join(chunks)
        finally:
            os.close(fd)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"


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


_Result = tuple[_FileKey | None, TkRecord | None, str | None]  # key, record, problem


def _parse_file(path: str, read: _Read) -> _Result:
    """The record tk would build from one file, or why there is none (neither: an empty file),
    and the file's key if it was read with one (none when it could not be read: never cached)."""
    key, data = read
    if isinstance(data, str):
        return None, None, data
    record = awk_view(data.decode("utf-8", "surrogateescape"), path)
    if record is None and data.strip():
        return key, None, "no `id:` line in its frontmatter; tk skips it"
    return key, record, None


#: below this many files to read, a reader process costs more than it saves
FORK_MIN_FILES = 2000
_BATCH = 256  # files per message from the reader: small enough that parsing starts at once


def _may_fork() -> bool:
    # Linux only (macOS frameworks are not fork-safe), never beside other threads (a lock one
    # of them holds would stay held in the child), and only with a second core to run on.
    threading = sys.modules.get("threading")
    return (
        sys.platform == "linux"
        and (threading is None or threading.active_count() == 1)
        and len(os.sched_getaffinity(0)) > 1
    )


def _fork_reader(rfd: int, wfd: int, paths: list[str]) -> int:
    """Fork the reader; returns its pid. SIGINT and SIGTERM are held back across the fork, so
    that neither can raise in the child before it has left this process's code for good."""
    import signal  # here: the module costs every other command a little start-up time

    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        pid = os.fork()
        if pid == 0:
            _reader(rfd, wfd, paths, previous)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # the parent; the child never is
    return pid


def _reader(rfd: int, wfd: int, paths: list[str], mask: set[int | Signals]) -> None:
    """The forked reader: reads the files in order and sends them in batches, then exits
    without running this process's cleanups (it never returns)."""
    import signal

    code = 1
    try:
        os.close(rfd)
        for number in (signal.SIGINT, signal.SIGTERM):  # not the parent's handlers
            signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        with os.fdopen(wfd, "wb") as out:
            for start in range(0, len(paths), _BATCH):
                out.write(
                    marshal.dumps([_read_file(p, False) for p in paths[start : start + _BATCH]])
                )
                out.flush()
        code = 0
    finally:
        os._exit(code)


def _read_files(paths: list[str], keyed: bool) -> Iterator[_Read]:
    """`_read_file` for each path, in order. For a large backlog read once (`tf-fsm tickets`),
    a forked reader does the reading while this process parses what it has sent: the two take
    about as long, and each gets a core. If the reader fails, this process reads the rest.
    A keyed read is the loop's, whose process keeps the records of its earlier passes: after a
    fork, each page of them it touched would be copied, which cost more than the reader saved."""
    if keyed or len(paths) < FORK_MIN_FILES or not _may_fork():
        yield from (_read_file(path, keyed) for path in paths)
        return
    rfd, wfd = os.pipe()
    stream, sink = os.fdopen(rfd, "rb"), os.fdopen(wfd, "wb")  # each closed once, on any path
    done = pid = 0
    try:
        pid = _fork_reader(rfd, wfd, paths)
        sink.close()  # the reader's end: once the reader is gone, reading here ends
        while done < len(paths):
            try:
                batch: list[_Read] = marshal.load(stream)  # noqa: S302 (our own reader's)
            except (EOFError, ValueError, TypeError):
                break
            yield from batch
            done += len(batch)
    finally:
        sink.close()
        stream.close()  # before the wait: a reader blocked on a full pipe then fails
        if pid:  # (an interrupt may come before it is known: that reader fails on the pipe)
            os.waitpid(pid, 0)
    yield from (_read_file(path, False) for path in paths[done:])


def _parse_files(paths: list[str], keyed: bool) -> list[_Result]:
    return [
        _parse_file(path, read) for path, read in zip(paths, _read_files(paths, keyed), strict=True)
    ]


def _unchanged(known: dict[str, _Parsed], names: list[str], paths: list[str]) -> dict[int, _Parsed]:
    """The cached results still valid, by index: the file's key is the one it was cached with."""
    hits = {}
    for index, name in enumerate(names):
        hit = known.get(name)
        try:
            if hit is not None and hit[0] == _key(os.stat(paths[index])):  # noqa: PTH116
                hits[index] = hit
        except OSError:
            pass  # it is read again, which reports why it cannot be
    return hits


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
    records: dict[str, TkRecord] = {}
    problems: list[ScanProblem] = []
    base = os.fspath(directory).rstrip("/") or "/"
    paths = [f"{base}/{name}" for name in names]
    keyed = cache is not None
    hits = _unchanged(cache.files, names, paths) if cache is not None else {}
    misses = [i for i in range(len(paths)) if i not in hits]
    parsed = dict(zip(misses, _parse_files([paths[i] for i in misses], keyed), strict=True))
    seen: dict[str, _Parsed] = {}
    settled = time.time_ns() - (cache.racy_ns if cache is not None else 0)
    for index, (name, path) in enumerate(zip(names, paths, strict=True)):
        key, record, problem = hits.get(index) or parsed[index]
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
