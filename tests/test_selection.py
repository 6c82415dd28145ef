"""Selection = `tk ready` (tf_fsm.tk.selection over tf_fsm.tk.tickets.scan).

tk is not installed here, so the oracle is a record-by-record transcription of what tk's awk
programs do (`_AwkTk` below: one line at a time, `---` toggles, `FS=": "`, an exchange sort
with awk's comparison), written independently of tf_fsm's regex-based one-pass scan. Set
TF_FSM_TK=/path/to/tk to compare with a real tk script as well.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import run_cli
from tf_fsm.tk import selection
from tf_fsm.tk.tickets import ScanCache, format_list, new_ticket, parse, render, rewrite, scan

# --- an independent oracle -------------------------------------------------------------------


def _awk_num(text: str) -> float | None:
    body = text.strip(" \t\n")
    if re.fullmatch(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", body):
        return float(body)
    return None


def _awk_gt(a: str, b: str) -> bool:
    na, nb = _awk_num(a), _awk_num(b)
    if na is not None and nb is not None:
        return na > nb
    return a.encode() > b.encode()


def _awk_eq(a: str, b: str) -> bool:
    return not _awk_gt(a, b) and not _awk_gt(b, a)


AWK_KEYS = ("id", "status", "deps", "priority", "assignee", "tags", "parent", "links", "type")


def awk_record(text: str) -> dict[str, str] | None:
    """tk's awk over one file, a record at a time: `---` toggles, `/^key:/` takes `$2` of
    FS=": ", the first `# ` line outside the frontmatter is the title."""
    values = dict.fromkeys(AWK_KEYS, "")
    title, inside = "", False
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    for line in lines:
        if line == "---":
            inside = not inside
        elif inside:
            for key in AWK_KEYS:
                if line.startswith(f"{key}:"):
                    fields = line.split(": ")
                    values[key] = fields[1] if len(fields) > 1 else ""
        elif line.startswith("# ") and not title:
            title = line[2:]
    if not values["id"]:
        return None
    for key in ("deps", "tags", "links"):
        values[key] = "".join(c for c in values[key] if c not in "[] ")
    return {**values, "priority": values["priority"] or "2", "title": title}


class _AwkTk:
    """tk's awk, one record at a time."""

    def __init__(self, directory: Path) -> None:
        self.status: dict[str, str] = {}
        self.title: dict[str, str] = {}
        self.deps: dict[str, str] = {}
        self.prio: dict[str, str] = {}
        self.assignee: dict[str, str] = {}
        self.tags: dict[str, str] = {}
        names = sorted(n for n in os.listdir(directory) if n.endswith(".md") and n[0] != ".")
        for name in names:
            # bytes: awk splits records at \n only (read_text would eat every \r)
            record = awk_record((directory / name).read_bytes().decode())
            if record is not None:
                tid = record["id"]
                self.status[tid], self.title[tid] = record["status"], record["title"]
                self.deps[tid], self.tags[tid] = record["deps"], record["tags"]
                self.prio[tid], self.assignee[tid] = record["priority"], record["assignee"]

    def _sorted(self, rows: list[str]) -> list[list[str]]:
        for i in range(len(rows)):
            for j in range(i + 1, len(rows)):
                a, b = rows[i].split("|"), rows[j].split("|")
                if _awk_gt(a[0], b[0]) or (_awk_eq(a[0], b[0]) and _awk_gt(a[1], b[1])):
                    rows[i], rows[j] = rows[j], rows[i]
        return [[*r.split("|"), "", ""] for r in rows]

    def _active(self, tid: str, assignee: str, tag: str) -> bool:
        return (
            self.status[tid] in ("open", "in_progress")
            and (not assignee or self.assignee[tid] == assignee)
            and (not tag or tag in self.tags[tid].split(","))
        )

    def ready(self, assignee: str = "", tag: str = "") -> str:
        rows = []
        for tid in self.status:
            deps = [d for d in self.deps[tid].split(",") if d]
            if self._active(tid, assignee, tag) and all(
                self.status.get(d, "") == "closed" for d in deps
            ):
                rows.append(f"{self.prio[tid]}|{tid}|{self.status[tid]}|{self.title[tid]}")
        return "".join(f"{f[1]:<8} [P{f[0]}][{f[2]}] - {f[3]}\n" for f in self._sorted(rows))

    def blocked(self, assignee: str = "", tag: str = "") -> str:
        rows = []
        for tid in self.status:
            open_deps = [
                d for d in self.deps[tid].split(",") if d and self.status.get(d, "") != "closed"
            ]
            if self._active(tid, assignee, tag) and open_deps:
                rows.append(
                    f"{self.prio[tid]}|{tid}|{self.status[tid]}|{self.title[tid]}"
                    f"|[{', '.join(open_deps)}]"
                )
        return "".join(
            f"{f[1]:<8} [P{f[0]}][{f[2]}] - {f[3]} <- {f[4]}\n" for f in self._sorted(rows)
        )


def ours_ready(directory: Path, assignee: str | None = None, tag: str | None = None) -> str:
    lines = selection.ready(scan(directory), assignee, tag)
    return "".join(selection.ready_line(ln) + "\n" for ln in lines)


def ours_blocked(directory: Path, assignee: str | None = None, tag: str | None = None) -> str:
    lines = selection.blocked(scan(directory), assignee, tag)
    return "".join(selection.blocked_line(ln) + "\n" for ln in lines)


# --- generated backlogs ------------------------------------------------------------------------

_PRIORITIES = ["", "0", "1", "2", "3", "4", "10", "02", " 3"]
_STATUSES = ["open", "in_progress", "closed", "closed", "needs_testing", "", "closed "]
_TITLES = ["Fix the parser", "pipes | in | title", "", "Ünïcode", "colon: inside", "# hash"]
_TAGS = ["component:api", "component:db", "ui", "needs-review"]


def write_backlog(directory: Path, seed: int, size: int) -> None:
    rnd = random.Random(seed)  # noqa: S311 - a reproducible backlog, not a secret
    directory.mkdir(parents=True, exist_ok=True)
    # Alphabetic ids compare as strings, numeric ones as numbers; both together stay a total
    # order (every letter sorts after every digit), as tk needs for a well-defined output.
    ids = list(dict.fromkeys(rnd.choice(["pt-", "t", "", "Z"]) + str(i) for i in range(size)))
    for tid in ids:
        deps = [rnd.choice([*ids, "ghost"]) for _ in range(rnd.choice([0, 0, 1, 1, 2, 3]))]
        lines = [f"id: {tid}"]
        status = rnd.choice(_STATUSES)
        if status:
            lines.append(f"status: {status}")
        lines.append(f"deps: [{', '.join(deps)}]")
        if priority := rnd.choice(_PRIORITIES):
            lines.append(f"priority: {priority}")
        if rnd.random() < 0.3:
            lines.append(f"assignee: {rnd.choice(['Jane Doe', 'bob'])}")
        if tags := rnd.sample(_TAGS, rnd.randint(0, 3)):
            lines.append(f"tags: [{', '.join(tags)}]")
        title = rnd.choice(_TITLES)
        body = f"# {title}\n\ntext\n" if title else "no title line\n"
        if rnd.random() < 0.08:  # tk's awk toggles on every --- line, body or not
            body += "\n---\nstatus: closed\n---\n"
        name = tid if rnd.random() > 0.05 else f"{tid}-renamed"
        (directory / f"{name}.md").write_text("---\n" + "\n".join(lines) + "\n---\n" + body)
        if rnd.random() < 0.03:
            (directory / f"{name}-no-id.md").write_text("---\nstatus: open\n---\n# orphan\n")
    (directory / ".hidden.md").write_text("---\nid: hidden\nstatus: open\n---\n# skipped\n")


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 10**6), size=st.integers(0, 40))
def test_ready_and_blocked_equal_tk_on_generated_backlogs(
    tmp_path: Path, seed: int, size: int
) -> None:
    directory = tmp_path / f"b{seed}-{size}"
    write_backlog(directory, seed, size)
    tk = _AwkTk(directory)
    assert ours_ready(directory) == tk.ready()
    assert ours_blocked(directory) == tk.blocked()
    for tag in _TAGS:
        assert ours_ready(directory, tag=tag) == tk.ready(tag=tag)
        assert ours_blocked(directory, tag=tag) == tk.blocked(tag=tag)
    assert ours_ready(directory, assignee="Jane Doe") == tk.ready(assignee="Jane Doe")


@pytest.mark.skipif(not os.environ.get("TF_FSM_TK"), reason="set TF_FSM_TK to a tk script")
@pytest.mark.parametrize("seed", range(8))
def test_equal_to_a_real_tk(tmp_path: Path, seed: int) -> None:
    directory = tmp_path / ".tickets"
    write_backlog(directory, seed, 50)

    def tk(*args: str) -> str:
        env = {**os.environ, "TICKETS_DIR": str(directory), "LC_ALL": "C"}
        done = subprocess.run(
            ["bash", os.environ["TF_FSM_TK"], *args], env=env, capture_output=True, check=False
        )
        return done.stdout.decode()

    # --open: newer tk versions also gate on parents and ## Plan; tf_fsm follows the rules
    # every version shares (docs/ralph.md).
    assert ours_ready(directory) == tk("ready", "--open")
    assert ours_blocked(directory) == tk("blocked")
    assert ours_ready(directory, tag="ui") == tk("ready", "--open", "-T", "ui")


# --- the rules, one at a time ------------------------------------------------------------------


def _tickets(directory: Path, *texts: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for n, text in enumerate(texts):
        tid = re.search(r"^id: (.*)$", text, re.M)
        (directory / f"{tid.group(1) if tid else f'x{n}'}.md").write_text(text)
    return directory


def t(
    tid: str, status: str = "open", deps: str = "[]", priority: str | None = "2", **kw: str
) -> str:
    lines = [f"id: {tid}", f"status: {status}", f"deps: {deps}"]
    if priority is not None:
        lines.append(f"priority: {priority}")
    lines += [f"{k}: {v}" for k, v in kw.items()]
    return "---\n" + "\n".join(lines) + f"\n---\n# Title of {tid}\n"


def test_ready_rules_and_exact_lines(tmp_path: Path) -> None:
    d = _tickets(
        tmp_path / "t",
        t("pt-a", priority="10"),
        t("pt-b", priority="9"),
        t("pt-c", priority=None),  # no priority: 2
        t("pt-d", status="in_progress", priority="0"),
        t("pt-e", status="closed"),
        t("pt-f", deps="[pt-e]", priority="1"),  # dep closed: ready
        t("pt-g", deps="[pt-e, pt-b]"),  # pt-b open: not ready
        t("pt-h", deps="[ghost]"),  # a dep without a file blocks
        t("pt-i", status="needs_testing"),
        t("pt-j", deps="[pt-k]"),
        t("pt-k", status="closed "),  # awk's $2 keeps the space: not "closed"
    )
    assert ours_ready(d).splitlines() == [
        "pt-d     [P0][in_progress] - Title of pt-d",
        "pt-f     [P1][open] - Title of pt-f",
        "pt-c     [P2][open] - Title of pt-c",
        "pt-b     [P9][open] - Title of pt-b",
        "pt-a     [P10][open] - Title of pt-a",  # 10 > 9 as numbers
    ]
    assert ours_blocked(d).splitlines() == [
        "pt-g     [P2][open] - Title of pt-g <- [pt-b]",
        "pt-h     [P2][open] - Title of pt-h <- [ghost]",
        "pt-j     [P2][open] - Title of pt-j <- [pt-k]",
    ]


def test_ids_sort_as_strings_and_long_ids_are_not_padded(tmp_path: Path) -> None:
    d = _tickets(tmp_path / "t", t("b-10"), t("b-9"), t("a-100"), t("a-very-long-id"))
    assert [ln.split(" ")[0] for ln in ours_ready(d).splitlines()] == [
        "a-100",
        "a-very-long-id",
        "b-10",
        "b-9",
    ]
    assert "a-very-long-id [P2]" in ours_ready(d)


def test_filters_are_exact(tmp_path: Path) -> None:
    d = _tickets(
        tmp_path / "t",
        t("a-1", assignee="Jane Doe", tags="[component:api, ui]"),
        t("a-2", assignee="Jane", tags="[component:apis]"),
    )
    assert ours_ready(d, assignee="Jane").startswith("a-2 ")
    assert ours_ready(d, assignee="Jane Doe").startswith("a-1 ")
    assert ours_ready(d, tag="component:api").splitlines() == ["a-1      [P2][open] - Title of a-1"]
    assert ours_ready(d, tag="component") == ""


def test_pipe_in_title_is_cut_as_tk_cuts_it(tmp_path: Path) -> None:
    d = _tickets(tmp_path / "t", "---\nid: p-1\nstatus: open\ndeps: [x]\n---\n# a|b\n")
    assert ours_blocked(d) == "p-1      [P2][open] - a <- b\n"  # tk's split on "|", verbatim


def test_scan_reports_files_tk_ignores_and_duplicates(tmp_path: Path) -> None:
    d = _tickets(tmp_path / "t", t("a-1"))
    (d / "b.md").write_text("---\nstatus: open\n---\n# no id\n")
    (d / "c.md").write_text(t("a-1", status="closed"))  # same id, later file: wins
    backlog = scan(d)
    problems = [str(p) for p in backlog.problems]
    assert any("b.md: no `id:` line" in p for p in problems), problems
    assert any("c.md: id a-1 is also in a-1.md" in p for p in problems), problems
    assert backlog.records["a-1"].status == "closed"
    assert scan(tmp_path / "missing").records == {}


def test_scan_cache_reuses_unchanged_files_and_reads_changed_ones(tmp_path: Path) -> None:
    d = _tickets(tmp_path / "t", t("a-1"), t("a-2"), t("a-3"))
    (d / "b.md").write_text("---\nstatus: open\n---\n# no id\n")
    (d / "c.md").write_text(t("a-1", status="closed"))
    cache = ScanCache(racy_ns=0)  # every file counts as settled at once
    first = scan(d, cache)
    second = scan(d, cache)
    assert second.records == scan(d).records == first.records
    assert all(second.records[i] is first.records[i] for i in first.records)  # not re-read
    assert [str(p) for p in second.problems] == [str(p) for p in first.problems]
    assert len(second.problems) == 2  # the missing id and the duplicate, reported each time

    tmp = d / ".a-2.tmp"
    tmp.write_text(t("a-2", status="closed"))
    os.replace(tmp, d / "a-2.md")  # how tk and tf_fsm edit: a new inode
    (d / "a-3.md").unlink()
    _tickets(d, t("a-4"))
    third = scan(d, cache)
    assert third.records == scan(d).records
    assert third.records["a-2"].status == "closed"
    assert "a-3" not in third.records and "a-4" in third.records
    assert third.records["a-1"] is first.records["a-1"]
    assert "a-3.md" not in cache.files


def test_scan_cache_never_trusts_a_file_changed_within_the_racy_window(tmp_path: Path) -> None:
    # An in-place edit of the same size in the same timestamp tick leaves inode, size, mtime
    # and ctime as they were; only not caching a file that new keeps the edit from being missed.
    d = _tickets(tmp_path / "t", t("a-1", priority="2"))
    path = d / "a-1.md"
    cache = ScanCache()
    assert scan(d, cache).records["a-1"].priority == "2"
    before = path.stat()
    path.write_text(path.read_text().replace("priority: 2", "priority: 3"))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_size == before.st_size
    assert scan(d, cache).records["a-1"].priority == "3"
    assert cache.files == {}


# --- tk show ---------------------------------------------------------------------------------


def test_show_annotates_parent_and_lists_relations(tmp_path: Path) -> None:
    d = _tickets(
        tmp_path / "t",
        t("ep-1", status="in_progress"),
        t("pt-1", deps="[pt-2, pt-3, ghost]", parent="ep-1", links="[pt-4]"),
        t("pt-2", status="closed"),
        t("pt-3"),
        t("pt-4"),
        t("pt-5", deps="[pt-1]"),
        t("pt-6", status="closed", deps="[pt-1]"),  # closed: not blocked by pt-1
        t("pt-7", parent="pt-1"),
    )
    backlog = scan(d)
    out = selection.show(backlog, selection.find_ticket_file(d, "pt-1"))
    assert out == (
        "---\nid: pt-1\nstatus: open\ndeps: [pt-2, pt-3, ghost]\npriority: 2\n"
        "parent: ep-1  # Title of ep-1\nlinks: [pt-4]\n---\n# Title of pt-1\n"
        "\n## Blockers\n\n- pt-3 [open] Title of pt-3\n- ghost [] \n"
        "\n## Blocking\n\n- pt-5 [open] Title of pt-5\n"
        "\n## Children\n\n- pt-7 [open] Title of pt-7\n"
        "\n## Linked\n\n- pt-4 [open] Title of pt-4\n"
    )
    assert selection.find_ticket_file(d, "t-7") == d / "pt-7.md"  # tk's partial match
    with pytest.raises(selection.ShowError, match="ambiguous"):
        selection.find_ticket_file(d, "pt-")
    with pytest.raises(selection.ShowError, match="not found"):
        selection.find_ticket_file(d, "nope")


def test_cli_tickets_commands(project: Path) -> None:
    d = _tickets(project / ".tickets", t("pt-1"), t("pt-2", deps="[pt-1]"))
    ready = run_cli("tickets", "ready")
    assert (ready.returncode, ready.stdout) == (0, ours_ready(d))
    blocked = run_cli("tickets", "blocked")
    assert blocked.stdout == "pt-2     [P2][open] - Title of pt-2 <- [pt-1]\n"
    shown = run_cli("tickets", "show", "pt-2")
    assert shown.stdout.endswith("\n## Blockers\n\n- pt-1 [open] Title of pt-1\n")
    missing = run_cli("tickets", "show", "nope")
    assert missing.returncode == 2
    assert "ticket 'nope' not found" in missing.stderr


def test_cli_honours_tickets_dir(project: Path, tmp_path: Path) -> None:
    elsewhere = _tickets(tmp_path / "shared", t("zz-1", priority="4"))
    done = run_cli("tickets", "ready", env={"TICKETS_DIR": str(elsewhere)})
    assert done.stdout == "zz-1     [P4][open] - Title of zz-1\n"


# --- writing tickets tk can read ---------------------------------------------------------------


def _awk_fields(path: Path) -> dict[str, str]:
    """Each frontmatter key's `$2` as tk's awk (FS=": ") reads it, by real awk."""
    program = (
        'BEGIN { FS=": " } /^---$/ { n++; next } n == 1 { split($0, kv, ":"); print kv[1] "=" $2 }'
    )
    out = subprocess.run(["awk", program, str(path)], capture_output=True, check=True)
    lines = out.stdout.decode().split("\n")[:-1]  # not splitlines: a \r is part of a value
    return dict(line.split("=", 1) for line in lines)


@pytest.mark.parametrize(
    "line",
    [
        "status: open",
        "status:closed",  # no ": ": awk's $2 is empty
        "status:",
        "status: a: b",  # $2 stops at the second ": "
        "status:x: y",  # the first ": " is after the colon: $2 is "y"
        "status:  two spaces",
        "status: trailing ",
        "status: tab\there",
        "statuses: open",  # not the key
        "status : open",  # not the key either
        "status: open\r",  # a CRLF line: awk's value is `open\r`, not `open`
        "status: closed\r",
    ],
)
def test_field_values_are_awks_dollar_2(tmp_path: Path, line: str) -> None:
    path = tmp_path / "t-1.md"
    path.write_text(f"---\nid: t-1\n{line}\n---\n# T\n", newline="")
    record = scan(tmp_path).records["t-1"]
    assert record.status == _awk_fields(path).get("status", "")


def test_crlf_tickets_are_read_as_tks_awk_reads_them(tmp_path: Path) -> None:
    """A CRLF file's `---\\r` lines toggle nothing, so awk finds no id and skips the file; in a
    file with LF `---` lines, a CRLF `status:` line is `open\\r` and `id:` `t-2\\r`."""
    d = tmp_path / "crlf"
    d.mkdir()
    (d / "t-1.md").write_bytes(b"---\r\nid: t-1\r\nstatus: open\r\ndeps: []\r\n---\r\n# T1\r\n")
    (d / "t-2.md").write_bytes(b"---\nid: t-2\r\nstatus: open\r\ndeps: []\n---\n# T2\r\n")
    (d / "t-3.md").write_bytes(b"---\nid: t-3\nstatus: open\ndeps: [t-2]\n---\n# T3\r\n")
    (d / "t-4.md").write_bytes(b"---\nid: t-4\nstatus: open\r\ndeps: []\n---\n# T4\n")
    tk = _AwkTk(d)
    assert (ours_ready(d), ours_blocked(d)) == (tk.ready(), tk.blocked())
    assert ours_ready(d) == ""
    assert ours_blocked(d) == "t-3      [P2][open] - T3\r <- [t-2]\n"
    assert [str(p) for p in scan(d).problems] == [
        f"{d}/t-1.md: no `id:` line in its frontmatter; tk skips it"
    ]


def test_new_ticket_is_what_tk_create_writes_and_awk_reads(tmp_path: Path) -> None:
    text = new_ticket(
        "tm-5c46",
        "Add a depth limit",
        type_="feature",
        priority=1,
        assignee="Jane Doe",
        tags=("api", "parser"),
        deps=("tm-0001",),
        created="2026-02-10T12:00:00Z",
        description="The parser recurses.",
    )
    assert text == (
        "---\nid: tm-5c46\nstatus: open\ndeps: [tm-0001]\nlinks: []\n"
        "created: 2026-02-10T12:00:00Z\ntype: feature\npriority: 1\nassignee: Jane Doe\n"
        "tags: [api, parser]\n---\n# Add a depth limit\n\nThe parser recurses.\n\n"
    )
    path = tmp_path / "tm-5c46.md"
    path.write_text(text)
    fields = _awk_fields(path)
    assert fields["id"] == "tm-5c46"
    assert fields["deps"] == "[tm-0001]"
    assert fields["tags"] == "[api, parser]"
    assert fields["assignee"] == "Jane Doe"
    assert scan(tmp_path).records["tm-5c46"].tag_list() == ["api", "parser"]


def test_rewrite_keeps_unknown_keys_and_tk_bytes() -> None:
    text = (
        "---\nid: a-1\nstatus: open\ndeps: []\nlinks: []\ncreated: 2026-01-01T00:00:00Z\n"
        "type: task\npriority: 2\nx-custom: kept as is\nexternal-ref: https://x.test/1\n"
        "---\n# T\n\nBody.\n\n## Notes\n\n**2026-01-01T00:00:00Z**\n\nnote\n"
    )
    assert rewrite(parse(text, Path("a-1.md"))) == text


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"id": "a\nb"}, "one line"),
        ({"status": "open: really"}, "': '"),
        ({"bad key": "x"}, "bad frontmatter key"),
    ],
)
def test_render_refuses_what_tk_would_misread(fields: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        render(fields, "# T\n")


@pytest.mark.parametrize("item", ["a b", "a,b", "[a]", ""])
def test_format_list_refuses_items_tk_would_split(item: str) -> None:
    with pytest.raises(ValueError, match="tk's split"):
        format_list([item])


# --- parallel safety ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mine", "running", "allow", "ok"),
    [
        (set(), [], False, True),  # alone is always fine
        ({"component:a"}, [{"component:b"}], False, True),
        ({"component:a"}, [{"component:a", "component:b"}], False, False),
        (set(), [{"component:a"}], False, False),  # untagged runs alone
        ({"component:a"}, [set()], False, False),  # ...and nothing joins it
        (set(), [{"component:a"}], True, True),  # unless parallelAllowUntagged
        ({"component:a"}, [set(), {"component:a"}], True, False),
    ],
)
def test_may_run_beside(mine: set[str], running: list[set[str]], allow: bool, ok: bool) -> None:
    assert selection.may_run_beside(frozenset(mine), [frozenset(r) for r in running], allow) is ok
