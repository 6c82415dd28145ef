"""The tk ticket format (tf_fsm.tk.tickets): reading `.tickets/<id>.md` and editing it in place.

`tk` itself is not installed here, so tf_fsm is checked against tk's documented rules, run
for real where a real tool exists:

- frontmatter is the lines between the first two `---` lines, one `key: value` a line;
- flow lists (`deps: [a, b]`) are split on `,` after removing `[`, `]` and spaces (tk's awk
  does `gsub(/[\\[\\] ]/, "", v)` then `split(v, arr, ",")`);
- a field update replaces the `key:` line (`sed s/^key:.*/key: value/`), or, when the field
  is missing, inserts `key: value` right after the first `---` line (an awk one-liner);
- `tk add-note` appends `\\n## Notes\\n` once (when no line starts with `## Notes`), then
  `printf '\\n**%s**\\n\\n%s\\n' "$timestamp" "$note"` with a UTC `date +%Y-%m-%dT%H:%M:%SZ`.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tf_fsm.errors import TicketError
from tf_fsm.tk.tickets import Ticket, parse, read, tickets_dir, with_field, with_note

# What `tk create "Add a depth limit to the parser" -t feature -p 1 -a "Jane Doe"
# --tags api,parser -d "..." --design "..."` writes (tk's cmd_create, byte for byte).
TK_TICKET = """\
---
id: tm-5c46
status: open
deps: []
links: []
created: 2026-02-10T12:00:00Z
type: feature
priority: 1
assignee: Jane Doe
tags: [api, parser]
---
# Add a depth limit to the parser

The parser recurses without bound on nested input.

## Design

Count the depth in parse_expr and raise ParseError past 200.

"""

# The same without the optional assignee and tags, and with two deps and a link.
TK_TICKET_MINIMAL = """\
---
id: tm-8a2f
status: in_progress
deps: [tm-5c46, tm-0001]
links: [tm-77aa]
created: 2026-02-11T08:30:00Z
type: task
priority: 2
---
# Wire the depth limit into the CLI

"""

NOW = datetime(2026, 2, 10, 12, 34, 56, tzinfo=UTC)


def _write(root: Path, ticket_id: str, text: str, where: str = ".tickets") -> Path:
    path = root / where / f"{ticket_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def _sh(script: str, *args: str) -> str:
    """Run a POSIX shell snippet for real; tk is a bash script built from the same tools."""
    done = subprocess.run(
        ["bash", "-c", script, "tk-rules", *args],
        capture_output=True,
        text=False,
        timeout=30,
        check=True,
    )
    return done.stdout.decode("utf-8")


def _tk_list(path: Path, key: str) -> list[str]:
    """tk's own list reading: awk with FS=": ", $2, gsub brackets and spaces, split on ","."""
    program = (
        'BEGIN { FS=": " } /^---$/ { n++; if (n == 2) exit; next } '
        'n == 1 && $0 ~ ("^" key ":") { v = $2; gsub(/[\\[\\] ]/, "", v); print v }'
    )
    out = _sh('awk -v key="$1" "$2" "$3"', key, program, str(path)).strip()
    return [item for item in out.split(",") if item]


def _tk_update(path: Path, key: str, value: str) -> str:
    """tk's update of one frontmatter field: sed when the key exists, else insert after ---."""
    script = r"""
file=$1 key=$2 value=$3
if grep -q "^${key}:" "$file"; then
    sed "s/^${key}:.*/${key}: ${value}/" "$file"
else
    awk -v k="$key" -v v="$value" '/^---$/ && !done { print; print k ": " v; done = 1; next }
                                   { print }' "$file"
fi
"""
    return _sh(script, str(path), key, value)


def _tk_add_note(path: Path, note: str, stamp: str) -> str:
    """tk add-note's appends, with the timestamp fixed instead of `date -u`."""
    script = r"""
file=$1 note=$2 stamp=$3
if ! grep -q '^## Notes' "$file"; then
    printf '\n## Notes\n' >> "$file"
fi
printf '\n**%s**\n\n%s\n' "$stamp" "$note" >> "$file"
cat "$file"
"""
    return _sh(script, str(path), note, stamp)


# --- reading --------------------------------------------------------------------------------


def test_parse_tk_created_ticket() -> None:
    ticket = parse(TK_TICKET, Path(".tickets/tm-5c46.md"))
    assert ticket.id == "tm-5c46"
    assert ticket.status == "open"
    assert ticket.title == "Add a depth limit to the parser"
    assert ticket.fields == {
        "id": "tm-5c46",
        "status": "open",
        "deps": "[]",
        "links": "[]",
        "created": "2026-02-10T12:00:00Z",
        "type": "feature",
        "priority": "1",
        "assignee": "Jane Doe",
        "tags": "[api, parser]",
    }
    assert ticket.list_field("deps") == []
    assert ticket.list_field("links") == []
    assert ticket.list_field("tags") == ["api", "parser"]
    assert ticket.list_field("no-such-field") == []
    assert ticket.body.startswith("# Add a depth limit to the parser\n")
    assert "## Design\n\nCount the depth in parse_expr" in ticket.body
    assert "status: open" not in ticket.body


def test_parse_minimal_ticket_without_optional_fields() -> None:
    ticket = parse(TK_TICKET_MINIMAL, Path("tm-8a2f.md"))
    assert "assignee" not in ticket.fields
    assert "tags" not in ticket.fields
    assert ticket.status == "in_progress"
    assert ticket.list_field("deps") == ["tm-5c46", "tm-0001"]
    assert ticket.list_field("links") == ["tm-77aa"]
    assert ticket.list_field("tags") == []
    assert ticket.title == "Wire the depth limit into the CLI"


def test_id_falls_back_to_file_name() -> None:
    ticket = parse("---\nstatus: open\n---\n# T\n", Path("/x/.tickets/pt-9.md"))
    assert ticket.id == "pt-9"
    assert ticket.path == Path("/x/.tickets/pt-9.md")


def test_comments_and_blank_lines_in_frontmatter_are_skipped() -> None:
    ticket = parse("---\n# a comment\n\nid: a-1\nstatus: open\n---\n# T\n", Path("a-1.md"))
    assert ticket.fields == {"id": "a-1", "status": "open"}


def test_value_keeps_colons_after_the_first() -> None:
    ticket = parse("---\nid: a-1\nexternal-ref: https://x.test/1\n---\n", Path("a-1.md"))
    assert ticket.fields["external-ref"] == "https://x.test/1"


@pytest.mark.parametrize(
    ("text", "line", "problem"),
    [
        ("", 1, "no frontmatter"),
        ("# Title only\n", 1, "no frontmatter"),
        ("id: a-1\n---\n", 1, "no frontmatter"),
        ("---\nid: a-1\nstatus: open\n# T\n", 1, "not closed"),
        ("---\nid: a-1\nthis line has no key\n---\n", 3, "expected `key: value`"),
        ("---\nid: a-1\nstatus: open\ntype: task\n- a\n---\n", 5, "expected `key: value`"),
        ("---\n: no key\n---\n", 2, "expected `key: value`"),
        ("---\n  indented: value\n---\n", 2, "expected `key: value`"),
    ],
)
def test_parse_errors_name_file_and_line(text: str, line: int, problem: str) -> None:
    path = Path("/repo/.tickets/a-1.md")
    with pytest.raises(TicketError) as info:
        parse(text, path)
    assert info.value.path == path
    assert info.value.line == line
    assert str(info.value).startswith(f"{path}:{line}: ")
    assert problem in str(info.value)


def test_read_missing_ticket_names_the_path(project: Path) -> None:
    with pytest.raises(TicketError) as info:
        read(project, "pt-404")
    assert info.value.path == project / ".tickets" / "pt-404.md"
    assert "pt-404 not found" in str(info.value)


def test_read_bad_ticket_names_file_and_line(project: Path) -> None:
    path = _write(project, "pt-1", "---\nid: pt-1\nbroken\n---\n")
    with pytest.raises(TicketError) as info:
        read(project, "pt-1")
    assert str(info.value).startswith(f"{path}:3: ")


def test_read_real_file(project: Path) -> None:
    path = _write(project, "tm-5c46", TK_TICKET)
    ticket = read(project, "tm-5c46")
    assert ticket.path == path
    assert ticket.fields["assignee"] == "Jane Doe"
    assert ticket.list_field("tags") == ["api", "parser"]


# --- TICKETS_DIR ----------------------------------------------------------------------------


def test_tickets_dir_default(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TICKETS_DIR", raising=False)
    assert tickets_dir(project) == project / ".tickets"
    monkeypatch.setenv("TICKETS_DIR", "")
    assert tickets_dir(project) == project / ".tickets"


def test_tickets_dir_relative_is_under_root(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TICKETS_DIR", "work/tickets")
    assert tickets_dir(project) == project / "work" / "tickets"
    _write(project, "pt-1", TK_TICKET, where="work/tickets")
    elsewhere = project / "sub"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # relative to the root, not to the working directory
    assert read(project, "pt-1").path == project / "work" / "tickets" / "pt-1.md"


def test_tickets_dir_absolute(
    project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    outside = tmp_path / "shared-tickets"
    monkeypatch.setenv("TICKETS_DIR", str(outside))
    assert tickets_dir(project) == outside
    _write(tmp_path, "pt-2", TK_TICKET_MINIMAL, where="shared-tickets")
    assert read(project, "pt-2").status == "in_progress"
    _write(project, "pt-3", TK_TICKET)
    with pytest.raises(TicketError):  # the default place is no longer looked at
        read(project, "pt-3")


# --- with_field -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        (TK_TICKET, "status", "closed"),
        (TK_TICKET, "status", "in_progress"),
        (TK_TICKET, "priority", "0"),
        (TK_TICKET_MINIMAL, "status", "closed"),
        (TK_TICKET_MINIMAL, "deps", "[tm-5c46]"),
    ],
)
def test_with_field_changes_only_that_line(text: str, key: str, value: str) -> None:
    out = with_field(text, key, value)
    before, after = text.split("\n"), out.split("\n")
    assert len(before) == len(after)
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    index = next(i for i, line in enumerate(before) if line.startswith(f"{key}:"))
    assert after[index] == f"{key}: {value}"
    assert changed in ([index], [])  # [] when the value was already that
    assert parse(out, Path("t.md")).fields[key] == value


@pytest.mark.parametrize(
    ("text", "key", "value"),
    [
        (TK_TICKET, "status", "closed"),
        (TK_TICKET, "assignee", "Bob"),
        (TK_TICKET_MINIMAL, "status", "closed"),
        (TK_TICKET_MINIMAL, "assignee", "Bob"),  # missing: inserted after the first ---
        (TK_TICKET_MINIMAL, "external-ref", "gh-123"),
    ],
)
def test_with_field_matches_tk_update_bytes(
    tmp_path: Path, text: str, key: str, value: str
) -> None:
    path = tmp_path / "t.md"
    path.write_bytes(text.encode("utf-8"))
    assert with_field(text, key, value) == _tk_update(path, key, value)


def test_with_field_inserts_missing_field_after_first_dashes() -> None:
    out = with_field(TK_TICKET_MINIMAL, "assignee", "Bob")
    assert out == TK_TICKET_MINIMAL.replace("---\n", "---\nassignee: Bob\n", 1)
    assert out.split("\n")[:3] == ["---", "assignee: Bob", "id: tm-8a2f"]
    assert parse(out, Path("t.md")).fields["assignee"] == "Bob"


def test_with_field_leaves_body_lines_alone() -> None:
    text = "---\nid: a-1\nstatus: open\n---\n# T\n\nstatus: draft (a line in the body)\n"
    out = with_field(text, "status", "closed")
    assert out == text.replace("status: open", "status: closed")
    assert "status: draft (a line in the body)" in out


def test_with_field_keeps_missing_final_newline() -> None:
    text = "---\nid: a-1\nstatus: open\n---\n# T"
    assert with_field(text, "status", "closed") == "---\nid: a-1\nstatus: closed\n---\n# T"


def test_with_field_does_not_match_key_prefixes() -> None:
    text = "---\nid: a-1\nstatus_note: x\n---\n"
    out = with_field(text, "status", "closed")
    assert out == "---\nstatus: closed\nid: a-1\nstatus_note: x\n---\n"


@pytest.mark.parametrize("text", ["", "no frontmatter\n", "---\nid: a-1\n"])
def test_with_field_refuses_text_without_frontmatter(text: str) -> None:
    with pytest.raises(ValueError, match="no frontmatter"):
        with_field(text, "status", "closed")


# --- with_note ------------------------------------------------------------------------------


def test_with_note_exact_tk_bytes() -> None:
    once = with_note(TK_TICKET, "first note", NOW)
    assert once == TK_TICKET + "\n## Notes\n" + "\n**2026-02-10T12:34:56Z**\n\nfirst note\n"
    later = NOW + timedelta(minutes=1)
    twice = with_note(once, "second note", later)
    assert twice == once + "\n**2026-02-10T12:35:56Z**\n\nsecond note\n"
    assert twice.count("## Notes") == 1


def test_with_note_stamp_is_utc_z() -> None:
    cest = timezone(timedelta(hours=2))
    local = datetime(2026, 2, 10, 14, 34, 56, 999_000, tzinfo=cest)
    assert with_note("---\nid: a\n---\n", "n", local).endswith("\n**2026-02-10T12:34:56Z**\n\nn\n")


def test_with_note_existing_notes_section_not_repeated() -> None:
    text = TK_TICKET + "## Notes\n\n**2026-01-01T00:00:00Z**\n\nold\n"
    assert with_note(text, "new", NOW) == text + "\n**2026-02-10T12:34:56Z**\n\nnew\n"


@pytest.mark.parametrize(
    "text",
    [TK_TICKET, TK_TICKET_MINIMAL, TK_TICKET + "## Notes\n\n**2026-01-01T00:00:00Z**\n\nold\n"],
)
@pytest.mark.parametrize("note", ["tf-fsm: closed on attempt 2", "two\nlines"])
def test_with_note_matches_tk_add_note(tmp_path: Path, text: str, note: str) -> None:
    path = tmp_path / "t.md"
    path.write_bytes(text.encode("utf-8"))
    assert with_note(text, note, NOW) == _tk_add_note(path, note, "2026-02-10T12:34:56Z")


def test_close_edit_round_trip(project: Path) -> None:
    """What a CLOSED gate does to the ticket: status line and a note, nothing else."""
    path = _write(project, "tm-5c46", TK_TICKET)
    text = path.read_text(encoding="utf-8")
    path.write_text(with_note(with_field(text, "status", "closed"), "done", NOW), "utf-8")
    ticket = read(project, "tm-5c46")
    assert ticket.status == "closed"
    assert ticket.fields == {**parse(TK_TICKET, path).fields, "status": "closed"}
    assert path.read_text("utf-8").startswith(TK_TICKET.replace("status: open", "status: closed"))


# --- lists, as tk splits them ---------------------------------------------------------------

_ITEM = st.text(
    alphabet=st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters="-_:./"),
    min_size=1,
    max_size=12,
)


def _tk_split(raw: str) -> list[str]:
    """tk's rule in Python: remove every `[`, `]` and space, split on `,`, drop empties."""
    cleaned = raw.replace("[", "").replace("]", "").replace(" ", "")
    return [item for item in cleaned.split(",") if item]


@settings(max_examples=200)
@given(
    items=st.lists(_ITEM, max_size=6),
    pad=st.lists(st.sampled_from(["", " ", "  "]), min_size=4, max_size=4),
)
def test_list_field_follows_tk_rule(items: list[str], pad: list[str]) -> None:
    raw = f"[{pad[0]}" + f"{pad[1]},{pad[2]}".join(items) + f"{pad[3]}]"
    ticket = Ticket("a-1", Path("a-1.md"), {"deps": raw})
    assert ticket.list_field("deps") == _tk_split(raw) == items


@pytest.mark.parametrize(
    "raw",
    ["[]", "[a]", "[a, b]", "[ a ,b ]", "[component:parser, api]", "[a,, b]", "", "[tm-1,tm-2]"],
)
def test_list_field_agrees_with_tk_awk(tmp_path: Path, raw: str) -> None:
    path = tmp_path / "t.md"
    path.write_text(f"---\nid: a-1\ntags: {raw}\n---\n# T\n", encoding="utf-8")
    ticket = parse(path.read_text("utf-8"), path)
    assert ticket.list_field("tags") == _tk_list(path, "tags") == _tk_split(raw)


def test_list_field_removes_inner_spaces_like_tk(tmp_path: Path) -> None:
    path = tmp_path / "t.md"
    path.write_text("---\nid: a-1\ntags: [needs review, api]\n---\n# T\n", encoding="utf-8")
    ticket = parse(path.read_text("utf-8"), path)
    assert _tk_list(path, "tags") == ["needsreview", "api"]
    assert ticket.list_field("tags") == ["needsreview", "api"]


def test_only_newline_separates_frontmatter_lines() -> None:
    text = "---\nid: a-1\nstatus: open\nexternal-ref: first\u2028second\n---\n# T\n"
    ticket = parse(text, Path("a-1.md"))
    assert ticket.fields["external-ref"] == "first\u2028second"
    assert ticket.status == "open"
