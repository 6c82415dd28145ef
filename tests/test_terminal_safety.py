"""Untrusted text on the terminal: ticket titles (`.tickets/<id>.md`) and what agents write
(their error reports, `--version` output) reach tf_fsm's own tables and lines escaped, never
as raw control sequences or rich markup. Real processes: `tf-fsm run`, `status`, `ralph` and
`doctor` against a stub agent CLI that speaks Claude Code's JSON output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli, run_with_terminal_stderr
from tf_fsm.views.terminal import terminal_safe

#: sets the terminal's title, then clears the screen
TITLE = "\x1b]0;pwned\x07\x1b[2J Add a parser"
#: what the stub agent reports as its error: an OSC, CSI (7-bit and the C1 byte), colours, a
#: bidi override, and rich markup with no spaces (so that no table wraps inside it)
AGENT_ERROR = (
    "401 \x1b]0;pwned\x07\x1b[2J \x1b[31mbad\x1b[0m \x9b31m \u202eevil [red]x[/red] "
    "[link=http://evil.example]y[/link]"
)
STUB = """\
#!{python}
import json, os, sys
if "--version" in sys.argv:
    if os.environ.get("STUB_VERSION_FAILS"):
        print("cannot start \\x1b]0;pwned\\x07\\x1b[2J", file=sys.stderr)
        sys.exit(1)
    print("2.1.0 (Claude Code) \\x1b]0;pwned\\x07\\x1b[2J")
    sys.exit(0)
sys.stdin.read()
print(json.dumps({{"type": "result", "is_error": True, "result": {error!r}}}))
sys.exit(1)
"""
RAW = ("\x1b", "\x07", "\x9b", "\u202e")


def assert_no_raw_control(*texts: str) -> None:
    for text in texts:
        for raw in RAW:
            assert raw not in text, f"raw {raw!r} reached the terminal: {text!r}"


@pytest.fixture
def stub_project(project: Path, tmp_path: Path) -> Path:
    """A project whose agent CLI (preset claude) is the stub, with one ticket titled TITLE."""
    stub = tmp_path / "claude"
    stub.write_text(STUB.format(python=sys.executable, error=AGENT_ERROR), encoding="utf-8")
    stub.chmod(0o755)
    settings = {
        "workflow": {
            "enableResearcher": False,
            "enableReviewers": ["reviewer-general"],
            "enableCloser": False,
        },
        "executor": {
            "kind": "command",
            "preset": "claude",
            "program": str(stub),
            "restartBackoffSeconds": 0,
        },
    }
    (project / ".tf" / "config" / "settings.json").write_text(json.dumps(settings))
    (project / ".tickets").mkdir()
    (project / ".tickets" / "pt-1.md").write_text(
        "---\nid: pt-1\nstatus: open\ndeps: []\nlinks: []\ncreated: 2026-02-10T12:00:00Z\n"
        f"type: task\npriority: 2\ntags: [component:parser]\n---\n# {TITLE}\n\nBody.\n",
        encoding="utf-8",
    )
    return project


# --- the function --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b[2J", "\\x1b[2J"),
        ("a\x07b", "a\\x07b"),
        ("\x00", "\\x00"),
        ("tab\there", "tab\\x09here"),
        ("two\nlines\r", "two\\x0alines\\x0d"),
        ("\x7f", "\\x7f"),
        ("\x9b31m", "\\x9b31m"),
        ("\x85", "\\x85"),
        ("\u202eevil", "\\u202eevil"),
        ("\u202a\u202b\u202c\u202d", "\\u202a\\u202b\\u202c\\u202d"),
        ("\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"),
        ("\udc9b", "\\x9b"),  # the byte 0x9b of a file that is not UTF-8 (surrogateescape)
        ("\ud800", "\\ud800"),
    ],
)
def test_control_characters_are_shown_escaped(raw: str, shown: str) -> None:
    assert terminal_safe(raw) == shown


@pytest.mark.parametrize(
    "text", ["plain ASCII", "Café, 東京, emoji 🚀", "[bold]markup[/bold] stays text", "a\\x1b"]
)
def test_printable_text_is_unchanged(text: str) -> None:
    assert terminal_safe(text) == text


# --- the commands --------------------------------------------------------------------------


def _run_failing_ticket() -> subprocess.CompletedProcess[str]:
    """`tf-fsm run pt-1`: the stub reports AGENT_ERROR, the attempt ends in error."""
    result = run_cli("run", "pt-1")
    assert result.returncode == 5, result.stderr
    return result


def test_run_status_and_status_json_show_the_failure_escaped(stub_project: Path) -> None:
    run = _run_failing_ticket()
    final = run.stderr.splitlines()[-1]  # `run`'s own last line
    assert final.startswith("pt-1: ERROR")
    assert_no_raw_control(final)
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in final

    status = run_cli("status")
    assert status.returncode == 0, status.stderr
    assert_no_raw_control(status.stdout, status.stderr)
    for shown in ("\\x1b]0;pwned\\x07\\x1b[2J", "\\x9b31m", "\\u202eevil", "\\x1b[31mbad"):
        assert shown in status.stdout, status.stdout
    # rich markup is shown as it is, not interpreted (nor dropped)
    for literal in ("[agent_error]:", "[red]x[/red]", "[link=http://evil.example]y[/link]"):
        assert literal in status.stdout, status.stdout

    as_json = run_cli("status", "--json")
    assert as_json.returncode == 0, as_json.stderr
    assert_no_raw_control(as_json.stdout, as_json.stderr)
    row = json.loads(as_json.stdout)
    assert "\x1b]0;pwned\x07\x1b[2J" in row["lastFailure"]  # JSON keeps the text exact


def test_status_table_shows_rich_markup_as_text(stub_project: Path) -> None:
    _run_failing_ticket()
    status = run_cli("status")
    for literal in ("[agent_error]:", "[red]x[/red]", "[link=http://evil.example]y[/link]"):
        assert literal in status.stdout, status.stdout


def test_status_table_shows_a_named_ticket_s_failure_escaped(stub_project: Path) -> None:
    _run_failing_ticket()
    status = run_cli("status", "pt-1")
    assert_no_raw_control(status.stdout, status.stderr)
    assert "\\u202eevil" in status.stdout


def test_ralph_lines_summary_and_progress_show_titles_and_reasons_escaped(
    stub_project: Path,
) -> None:
    done = run_cli("ralph")
    assert done.returncode == 0, done.stderr
    assert_no_raw_control(done.stdout, done.stderr)
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in done.stderr  # the per-ticket line on stderr
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in done.stdout  # the summary table
    assert "[red]x[/red]" in done.stdout and "[agent_error]:" in done.stdout
    progress = (stub_project / ".tf" / "ralph" / "progress.md").read_text(encoding="utf-8")
    assert_no_raw_control(progress)
    assert "  - Summary: \\x1b]0;pwned\\x07\\x1b[2J Add a parser" in progress
    assert "\\u202eevil" in progress


def test_ralph_json_lines_are_json_escaped(stub_project: Path) -> None:
    done = run_cli("ralph", "--json")
    assert done.returncode == 0, done.stderr
    assert_no_raw_control(done.stdout, done.stderr)
    finish = next(e for e in map(json.loads, done.stdout.splitlines()) if e["event"] == "finish")
    assert "\x1b]0;pwned\x07" in finish["reason"]


def test_ralph_dry_run_shows_a_skip_reason_escaped(stub_project: Path) -> None:
    """A ticket whose `id:` differs from its file name is skipped, naming the id it holds."""
    (stub_project / ".tickets" / "pt-2.md").write_text(
        "---\nid: pt-2\x1b[2J\nstatus: open\n---\n# T\n", encoding="utf-8"
    )
    done = run_cli("ralph", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert_no_raw_control(done.stdout, done.stderr)
    assert "skip pt-2\\x1b[2J: its id is pt-2\\x1b[2J but its file is pt-2.md" in done.stdout


def test_ralph_live_view_on_a_terminal_shows_the_reason_escaped(stub_project: Path) -> None:
    """On a terminal rich draws the live view with its own escape sequences; the agent's are
    not among them."""
    done, screen = run_with_terminal_stderr(["ralph"], {"COLUMNS": "400"})
    assert done.returncode == 0
    assert "pwned\x07" not in screen and "\x1b]0;" not in screen and "\x1b[2J" not in screen
    assert "\u202e" not in screen and "\x9b" not in screen
    assert "\\x1b]0;pwned\\x07\\x1b[2J" in screen


def test_doctor_shows_the_agent_s_version_escaped(stub_project: Path) -> None:
    done = run_cli("doctor")
    # 3: the package's default models are not Claude's (doctor names each); the CLI is there
    assert done.returncode == 3, done.stdout + done.stderr
    assert_no_raw_control(done.stdout, done.stderr)
    assert "(2.1.0 (Claude Code) \\x1b]0;pwned\\x07\\x1b[2J)" in done.stdout


def test_doctor_shows_a_failing_version_check_escaped(stub_project: Path) -> None:
    done = run_cli("doctor", env={"STUB_VERSION_FAILS": "1"})
    assert done.returncode == 2, done.stdout + done.stderr
    assert_no_raw_control(done.stdout, done.stderr)
    assert "cannot start \\x1b]0;pwned\\x07\\x1b[2J" in done.stderr


def test_doctor_json_is_json_escaped(stub_project: Path) -> None:
    done = run_cli("doctor", "--json")
    assert_no_raw_control(done.stdout, done.stderr)
    assert "\x1b]0;pwned" in json.loads(done.stdout)["version"]


def test_tickets_output_stays_tk_s_bytes_and_its_warnings_are_escaped(project: Path) -> None:
    """`tickets ready` prints what tk prints (a title's escape sequence included, on purpose:
    docs/ralph.md); its own warnings (here, a file with no `id:` line) name the file escaped."""
    tickets = project / ".tickets"
    tickets.mkdir()
    (tickets / "pt-1.md").write_text(
        f"---\nid: pt-1\nstatus: open\ndeps: []\n---\n# {TITLE}\n", encoding="utf-8"
    )
    (tickets / "\x1b[2Jnotes.md").write_text("no frontmatter\n", encoding="utf-8")
    done = run_cli("tickets", "ready")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"pt-1     [P2][open] - {TITLE}\n"
    assert_no_raw_control(done.stderr)
    assert "\\x1b[2Jnotes.md: no `id:` line" in done.stderr
