"""The backlog scan's fast paths give what the plain ones give: the one-regex field read
against a line-by-line transcription of tk's awk, and the forked reader process (a large
backlog) against one process reading every file, also when the reader dies half way."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import run_cli
from tests.test_selection import AWK_KEYS, awk_record, write_backlog
from tf_fsm.tk import backlog
from tf_fsm.tk import file_reader as _file_reader
from tf_fsm.tk.backlog import awk_view, scan
from tf_fsm.tk.tickets import new_ticket

# Lines that make the field read's corner cases: a key with and without ": " after it, a
# second ": ", CRs, `---` lines in the body, names that only start like a key.
_HEADS = [*AWK_KEYS, "ids", "", "---", "# t", "x"]
_TAILS = [":", " ", ": ", "x", "[", "]", ",", "\r", "---", "# "]
_LINE = st.builds(
    lambda head, tail: head + "".join(tail),
    st.sampled_from(_HEADS),
    st.lists(st.sampled_from(_TAILS), max_size=6),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(_LINE, max_size=14), st.booleans(), st.booleans())
def test_field_read_equals_a_line_by_line_awk(lines: list[str], opened: bool, end: bool) -> None:
    text = ("---\nid: q\n" if opened else "") + "\n".join(lines) + ("\n" if end else "")
    record = awk_view(text, "t.md")
    expected = awk_record(text)
    got = None if record is None else {k: getattr(record, k) for k in (*AWK_KEYS, "title")}
    assert got == expected


# tk create's layout (backlog._TK_LAYOUT), its values and body made of the same corner cases
_LAYOUT_KEYS = ["id", "status", "deps", "links", "created", "type", "priority"]
_OPTIONAL_KEYS = ["assignee", "external-ref", "parent", "tags"]
_VALUE = st.lists(st.sampled_from([*_TAILS, "a", "-", "#", "[b, c]"]), max_size=4).map("".join)


@st.composite
def _tk_layout_file(draw: st.DrawFn) -> str:
    keys = _LAYOUT_KEYS + [k for k in _OPTIONAL_KEYS if draw(st.booleans())]
    if draw(st.booleans()):  # now and then a key out of order, twice, or unknown
        keys.insert(draw(st.integers(0, len(keys))), draw(st.sampled_from([*AWK_KEYS, "x"])))
    front = "".join(f"{key}: {draw(_VALUE)}\n" for key in keys)
    body = "\n".join(draw(st.lists(_LINE, max_size=4)))
    return f"---\n{front}---\n{body}"


@settings(max_examples=500, deadline=None)
@given(_tk_layout_file())
def test_the_tk_layout_read_gives_what_awk_s_rules_give(text: str) -> None:
    fields = backlog._tk_layout(text)
    assert fields is None or fields == backlog._awk_fields(text)
    record = awk_view(text, "t.md")
    got = None if record is None else {k: getattr(record, k) for k in (*AWK_KEYS, "title")}
    assert got == awk_record(text)


def test_tickets_tk_creates_take_the_one_match_read() -> None:
    texts = [
        new_ticket("a-1", "A title", created="2026-02-10T12:00:00Z"),
        new_ticket(
            "b-2",
            "Another: with a colon",
            status="in_progress",
            deps=("a-1", "c-3"),
            links=("d-4",),
            priority=0,
            assignee="Ann Lee",
            external_ref="gh-12",
            parent="e-5",
            tags=("component:api", "ui"),
            description="Body\n\n## Notes\nkey: value",
        ),
    ]
    for text in texts:
        assert backlog._tk_layout(text) is not None, text
        assert backlog._tk_layout(text) == backlog._awk_fields(text)


# Runs in a fresh process: no thread a test left behind can keep the scan from forking.
_COMPARE = """
import json, marshal, sys
from pathlib import Path
from tf_fsm.tk import file_reader as files, backlog

directory, mode = Path(sys.argv[1]), sys.argv[2]
assert files._may_fork(), "this machine cannot fork a reader: the test proves nothing"
class Counting:  # the batches that reached this process from the reader
    dumps, loaded = staticmethod(marshal.dumps), 0
    @classmethod
    def load(cls, stream):
        batch = marshal.load(stream)
        cls.loaded += 1
        return batch
files.marshal = Counting
def run(min_files):
    files.FORK_MIN_FILES = min_files
    found = backlog.scan(directory)
    return {i: list(r) for i, r in found.records.items()}, [
        str(p) for p in found.problems
    ]
alone = run(10**9)
if mode == "dies":  # the reader sends 3 batches, then exits as if killed
    reader = files._reader
    files._reader = lambda rfd, wfd, paths, mask: reader(
        rfd, wfd, paths[: 3 * files._BATCH], mask
    )
if mode == "raises":  # the reader fails before it has sent anything
    def _fails(*args):
        raise RuntimeError("reader failed")
    files._reader = _fails
files._BATCH = 7
try:
    forked = run(1)
except RuntimeError:  # only a reader that went back into the caller's code gets here
    print("the reader's exception reached the scan's caller")
    raise SystemExit(0)
print(json.dumps({
    "same": forked == alone, "records": len(alone[0]), "problems": alone[1],
    "batches": Counting.loaded,
}))
"""


def _compare(directory: Path, mode: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _COMPARE, str(directory), mode],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1, done.stdout  # printed once: the reader never runs on
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_a_forked_reader_gives_what_one_process_reads(tmp_path: Path) -> None:
    directory = tmp_path / "b"
    write_backlog(directory, seed=11, size=300)
    (directory / "zz-dir.md").mkdir()  # read fails (a directory): a problem, in its place
    result = _compare(directory, "normal")
    assert result["same"] is True
    assert result["records"] == 300
    problems = result["problems"]
    assert isinstance(problems, list)
    assert any("zz-dir.md: cannot read: Is a directory" in p for p in problems), problems
    files = sum(1 for p in directory.glob("*.md") if not p.name.startswith("."))
    read_here = int(files * _file_reader._OWN_SHARE)  # this process reads those itself, first
    assert result["batches"] == -(-(files - read_here) // 7)


@pytest.mark.parametrize(
    ("mode", "seed", "size", "batches"),
    [
        # sends 3 batches, then exits as if killed: this process reads the rest
        ("dies", 12, 200, 3),
        # raises at once: the child ends there and does not unwind into the scan's caller as a
        # second copy of the command (which would print everything twice)
        ("raises", 13, 100, 0),
    ],
)
def test_a_reader_that_fails_leaves_the_rest_to_this_process(
    tmp_path: Path, mode: str, seed: int, size: int, batches: int
) -> None:
    directory = tmp_path / "b"
    write_backlog(directory, seed=seed, size=size)
    result = _compare(directory, mode)
    assert result["same"] is True
    assert result["batches"] == batches


def test_tickets_ready_is_the_same_above_the_fork_threshold(tmp_path: Path) -> None:
    """Above FORK_MIN_FILES the CLI reads through the reader process: same bytes as tk's
    awk transcription in tests/test_selection.py, on a backlog big enough to fork."""
    from tests.test_selection import _AwkTk

    root = tmp_path / "p"
    directory = root / ".tickets"
    write_backlog(directory, seed=5, size=2100)
    names = [p for p in directory.iterdir() if p.name.endswith(".md")]
    assert len(names) > 2000
    done = run_cli("--root", str(root), "tickets", "ready", cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout == _AwkTk(directory).ready()


def test_files_are_taken_in_byte_order_as_tk_s_glob_takes_them(tmp_path: Path) -> None:
    """The later file of two with one id wins, as in tk, and "later" is byte order: a name
    with a byte that is not UTF-8 sorts after U+E000 as bytes, before it as a decoded str."""
    directory = tmp_path / "t"
    directory.mkdir()
    files = {"\ue000.md".encode(): "open", b"\xff.md": "closed"}  # in tk's (byte) order
    for name, status in files.items():
        with open(os.fsencode(directory) + b"/" + name, "wb") as out:
            out.write(f"---\nid: dup\nstatus: {status}\n---\n# D\n".encode())
    found = scan(directory)
    assert found.records["dup"].status == "closed"
    assert [p.problem for p in found.problems] == ["id dup is also in \ue000.md; this one wins"]


# A fresh process: the freeze is process-wide.
_FREEZE = """
import gc, sys, weakref
from pathlib import Path
from tf_fsm.tk import backlog

backlog.FREEZE_MIN_FILES, backlog.FULL_COLLECTION_EVERY = 5, 3
directory = Path(sys.argv[1])
cache = backlog.ScanCache(racy_ns=0)
class Node:
    pass
freed = []
def cycle():
    node = Node()
    node.self = node
    weakref.finalize(node, freed.append, 1)
cycle()  # cyclic garbage, alive for the collector until it runs
before = gc.get_freeze_count()
found = backlog.scan(directory, cache)
frozen = gc.get_freeze_count() - before
print(len(found.records), gc.isenabled(), frozen > len(found.records), freed == [])
for _ in range(3):
    backlog.scan(directory, cache)
print(freed == [1], gc.isenabled())
"""


def test_a_loop_scan_freezes_its_records_and_frees_cycles_a_freeze_caught(tmp_path: Path) -> None:
    """The loop's scan of a large backlog pauses the collector, leaves the records frozen out
    of its sight, and every FULL_COLLECTION_EVERY scans collects once: a cycle that a freeze
    caught is freed late, not lost."""
    directory = tmp_path / "b"
    write_backlog(directory, seed=3, size=20)
    done = subprocess.run(
        [sys.executable, "-c", _FREEZE, str(directory)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    first, later = done.stdout.splitlines()
    records, enabled, frozen, not_yet = first.split()
    assert int(records) > 5 and (enabled, frozen, not_yet) == ("True", "True", "True")
    assert later == "True True"


def _group_ends(pgid: int, within: float = 5.0) -> bool:
    """Whether the process group is gone within `within` seconds (a reader that lost its
    parent at an unlucky instant ends at its next write, on the closed pipe)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def test_ctrl_c_during_a_forked_scan_prints_nothing_twice_and_leaves_no_reader(
    tmp_path: Path,
) -> None:
    """Whenever SIGINT lands (before, during or after the reader's fork), the command prints
    tk's lines once or nothing at all, and no reader outlives it."""
    root = tmp_path / "p"
    write_backlog(root / ".tickets", seed=8, size=2100)
    complete = run_cli("--root", str(root), "tickets", "ready", cwd=root).stdout
    for delay in (0.0, 0.03, 0.06, 0.09, 0.12, 0.2):
        child = subprocess.Popen(
            [sys.executable, "-m", "tf_fsm", "--root", str(root), "tickets", "ready"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group: the reader is found by it
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        time.sleep(delay)
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=60)
        # 130: the command was interrupted; -SIGINT: the signal landed before Python had set
        # its handler up, or after the command, while the interpreter shut down; 1: it landed
        # while the interpreter imported its own modules (site), before any line of tf_fsm's
        assert out in (complete, ""), (delay, err[-300:])  # whole, once, or nothing
        in_startup = "KeyboardInterrupt" in err and "tf_fsm" not in err and out == ""
        assert child.returncode in (0, 130, -signal.SIGINT) or (
            child.returncode == 1 and in_startup
        ), (delay, err[-300:])
        assert child.returncode != 0 or out == complete
        assert _group_ends(child.pid), delay  # nothing is left in its group
