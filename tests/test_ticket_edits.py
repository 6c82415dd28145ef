"""Ticket edits are byte-faithful: tf_fsm changes the one line it means to change (or appends
its note) and keeps every other byte of `.tickets/<id>.md`, CRLF and lone CR included; a line
it writes ends as most lines of the file do (CRLF or LF)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import run_cli
from tf_fsm.engine.orchestrator import RunOptions, run_ticket
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.tk.tickets import parse, read, rewrite, scan, with_field, with_note

NOW = datetime(2026, 2, 10, 12, 34, 56, tzinfo=UTC)
STAMP = "2026-02-10T12:34:56Z"

# The brief's repro: every line CRLF, and a lone CR inside a body line.
CRLF = b"---\r\nid: t-1\r\nstatus: open\r\ndeps: []\r\n---\r\n# T\r\nbody with lone\rCR\r\n"
# Mostly LF, with one CRLF line in the frontmatter and one in the body, and lone CRs.
MIXED = (
    b"---\nid: t-1\nstatus: open\r\ndeps: []\nx-note: a\rb\n---\n# T\n\n"
    b"crlf line\r\nlone\rCR\n\xc3\xbcnicode\n"
)


def _segments(text: str) -> list[str]:
    """The lines of `text`, each with its terminator; only LF ends a line (as in awk)."""
    return re.findall(r"[^\n]*\n|[^\n]+\Z", text)


def _eol(text: str) -> str:
    endings = [seg[-2:] == "\r\n" for seg in _segments(text) if seg.endswith("\n")]
    return "\r\n" if endings.count(True) > endings.count(False) else "\n"


def _setup(project: Path, data: bytes, findings: list[dict[str, object]], **wf: object) -> Path:
    tickets = project / ".tickets"
    tickets.mkdir(exist_ok=True)
    path = tickets / "t-1.md"
    path.write_bytes(data)
    (project / "scenario.json").write_text(json.dumps({"findings": findings}))
    settings_ = {
        "workflow": {"failOn": ["Critical", "Major"], **wf},
        "executor": {"kind": "scripted", "scenario": "scenario.json"},
    }
    (project / ".tf/config/settings.json").write_text(json.dumps(settings_))
    return path


# --- a real run, through the CLI and in-process ------------------------------------------------


def test_cli_run_closing_a_crlf_ticket_keeps_every_byte(project: Path) -> None:
    path = _setup(project, CRLF, [])
    done = run_cli("run", "t-1")
    assert done.returncode == 0, done.stderr
    assert "CLOSED" in done.stdout
    after = path.read_bytes()
    head = CRLF.replace(b"status: open\r\n", b"status: closed\r\n")
    assert after[: len(head)] == head
    tail = after[len(head) :]
    note = rb"tf-fsm: closed attempt 1 \(started [^\r\n]+\): quality gate passed; [^\r\n]+"
    stamp = rb"\*\*\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\*\*"
    assert re.fullmatch(rb"\r\n## Notes\r\n\r\n" + stamp + rb"\r\n\r\n" + note + rb"\r\n", tail)
    assert re.search(rb"(?<!\r)\n", after) is None  # no bare LF anywhere
    assert b"lone\rCR\r\n" in after


def test_run_closing_a_mixed_ticket_changes_only_the_status_line(project: Path) -> None:
    path = _setup(project, MIXED, [])
    outcome = run_ticket(project, "t-1", RunOptions(), now=lambda: NOW)
    assert outcome.status == "closed"
    store = open_store(project, load_settings(project), "t-1")
    started = store.load_retry_state().attempts[0].startedAt  # type: ignore[union-attr]
    note = (
        f"tf-fsm: closed attempt 1 (started {started}): quality gate passed; "
        f"{outcome.reason}. Artifacts: .tf/knowledge/tickets/t-1"
    )
    # Mostly LF: the status line (CRLF before) is written with LF, the note lines too.
    expected = MIXED.replace(b"status: open\r\n", b"status: closed\n") + (
        f"\n## Notes\n\n**{STAMP}**\n\n{note}\n".encode()
    )
    assert path.read_bytes() == expected


def test_exhausted_note_on_a_crlf_ticket_keeps_every_byte(project: Path) -> None:
    major = {"id": "N", "severity": "Major", "text": "`a.py:2` - never", "fixedBy": []}
    path = _setup(project, CRLF, [major], escalation={"enabled": True, "maxRetries": 1})
    outcome = run_ticket(project, "t-1", RunOptions(), now=lambda: NOW)
    assert outcome.status == "exhausted"
    after = path.read_bytes()
    head = CRLF.replace(b"status: open\r\n", b"status: in_progress\r\n")
    assert after[: len(head)] == head
    tail = after[len(head) :].decode()
    assert re.fullmatch(rf"\r\n## Notes\r\n\r\n\*\*{STAMP}\*\*\r\n\r\ntf-fsm: [^\r\n]+\r\n", tail)


def test_read_keeps_the_body_byte_for_byte_and_strips_cr_from_values(project: Path) -> None:
    _setup(project, CRLF, [])
    ticket = read(project, "t-1")
    assert ticket.body == "# T\r\nbody with lone\rCR\r\n"
    assert (ticket.id, ticket.status, ticket.title) == ("t-1", "open", "T")  # as before


def test_tickets_ready_reads_crlf_as_tks_awk_does(project: Path) -> None:
    """Unchanged by the fix: `---\\r` toggles nothing in awk, and `status: open\\r` is `open\\r`
    (docs/ralph.md), so tk's ready lists neither ticket; tf-fsm says why it skips the first."""
    _setup(project, CRLF, [])
    (project / ".tickets/t-2.md").write_bytes(b"---\nid: t-2\nstatus: open\r\n---\n# T2\n")
    assert scan(project / ".tickets").records["t-2"].status == "open\r"
    done = run_cli("tickets", "ready")
    assert (done.returncode, done.stdout) == (0, "")
    assert "t-1.md: no `id:` line" in done.stderr


# --- with_field / with_note / rewrite on exact bytes -------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (CRLF.decode(), CRLF.decode().replace("status: open\r\n", "status: closed\r\n")),
        (MIXED.decode(), MIXED.decode().replace("status: open\r\n", "status: closed\n")),
        ("---\nstatus: open\n---\r\nlone\r\n", "---\nstatus: closed\n---\r\nlone\r\n"),
    ],
)
def test_with_field_exact(text: str, expected: str) -> None:
    assert with_field(text, "status", "closed") == expected


def test_with_field_inserts_with_the_dominant_ending() -> None:
    out = with_field(CRLF.decode(), "assignee", "Bob")
    assert out == CRLF.decode().replace("---\r\n", "---\r\nassignee: Bob\r\n", 1)


def test_with_note_multiline_note_on_crlf() -> None:
    out = with_note(CRLF.decode(), "two\nlines", NOW)
    assert out == CRLF.decode() + f"\r\n## Notes\r\n\r\n**{STAMP}**\r\n\r\ntwo\r\nlines\r\n"


def test_rewrite_of_a_crlf_ticket_is_byte_identical() -> None:
    text = (
        "---\r\nid: a-1\r\nstatus: open\r\ndeps: []\r\nx-custom: kept\r\n---\r\n"
        "# T\r\n\r\nBody\rwith a lone CR.\r\n"
    )
    assert rewrite(parse(text, Path("a-1.md"))) == text


# --- for any text: only the intended line changes ----------------------------------------------

_ENDING = st.sampled_from(["\n", "\r\n"])
_VALUE = st.text(st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)))
_KEYS = ["id", "status", "deps", "status_note", "x-custom"]


@st.composite
def _ticket_texts(draw: st.DrawFn) -> str:
    """A frontmatter of `key: value` lines (values may hold a lone CR), every line ending in
    LF or CRLF at random, then any body at all."""
    lines = ["---" + draw(_ENDING)]
    for key in draw(st.lists(st.sampled_from(_KEYS), unique=True)):
        lines.append(f"{key}: {draw(_VALUE)}{draw(_ENDING)}")
    lines.append("---" + draw(_ENDING))
    return "".join(lines) + draw(st.text(st.characters(blacklist_categories=("Cs",))))


@settings(max_examples=400)
@given(
    text=_ticket_texts(),
    key=st.sampled_from([*_KEYS, "assignee"]),
    value=st.from_regex(r"[a-z_0-9]{1,12}", fullmatch=True),
)
def test_with_field_changes_only_the_intended_line(text: str, key: str, value: str) -> None:
    before = _segments(text)
    after = _segments(with_field(text, key, value))
    new = f"{key}: {value}{_eol(text)}"
    end = next(i for i, seg in enumerate(before) if i and seg.rstrip() == "---")
    found = next((i for i in range(1, end) if before[i].startswith(f"{key}:")), None)
    if found is None:  # inserted after the first line; nothing else moves
        assert after == [before[0], new, *before[1:]]
    else:  # that one line replaced; every other line, terminator included, as it was
        assert after == [*before[:found], new, *before[found + 1 :]]
    assert parse("".join(after), Path("t.md")).fields[key] == value


@settings(max_examples=400)
@given(text=_ticket_texts(), note=_VALUE)
def test_with_note_only_appends(text: str, note: str) -> None:
    eol = _eol(text)
    out = with_note(text, note, NOW)
    assert out.startswith(text)  # every byte of the file kept
    heading = "" if re.search(r"^## Notes", text, re.M) else f"{eol}## Notes{eol}"
    assert out[len(text) :] == f"{heading}{eol}**{STAMP}**{eol}{eol}{note}{eol}"
