"""`tf-fsm tickets create|edit`: tickets written as tk writes them. tk is not installed here, so
the create is compared with the bytes of tk's `cmd_create` (tests/test_tickets.py's TK_TICKET,
without its --design section, which tf-fsm does not write), and the title and description
edits with tk's own awk programs (`update_title`, `update_description`), run for real."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli, tk_ticket
from tests.test_tickets import TK_TICKET, TK_TICKET_MINIMAL
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.tk import authoring

# tk's update_title and update_description, as its script runs them (awk over the file)
TK_UPDATE_TITLE = """
/^---$/ { front++; print; next }
front == 2 && /^# / && !done { print "# " title; done=1; next }
{ print }
"""
TK_UPDATE_DESCRIPTION = """
BEGIN { front=0; past_title=0; in_desc=0; printed_desc=0 }
/^---$/ { front++; print; next }
front == 2 && /^# / && !past_title {
    print
    print ""
    if (content != "") { print content; print "" }
    printed_desc=1
    past_title=1
    in_desc=1
    next
}
in_desc && /^##/ { in_desc=0; print; next }
in_desc { next }
{ print }
"""
# what tk create writes for the TK_TICKET command without --design
TK_CREATED = TK_TICKET.split("## Design")[0]


def _awk(program: str, var: str, value: str, text: str, tmp: Path) -> str:
    path = tmp / "ticket.md"
    path.write_text(text, encoding="utf-8")
    done = subprocess.run(
        ["awk", "-v", f"{var}={value}", program, str(path)],
        capture_output=True,
        check=True,
        timeout=30,
    )
    return done.stdout.decode("utf-8")


def _json(*args: str) -> dict[str, object]:
    done = run_cli(*args, "--json")
    assert done.returncode == 0, done.stderr
    out: dict[str, object] = json.loads(done.stdout)
    return out


def test_create_writes_what_tk_create_writes(project: Path) -> None:
    made = _json(
        "tickets",
        "create",
        "--title",
        "Add a depth limit to the parser",
        "-t",
        "feature",
        "-p",
        "1",
        "-a",
        "Jane Doe",
        "--tags",
        "api,parser",
        "-d",
        "The parser recurses without bound on nested input.",
    )
    tid = str(made["ticket"])
    text = (project / ".tickets" / f"{tid}.md").read_text(encoding="utf-8")
    created = re.search(r"^created: (.*)$", text, re.MULTILINE)
    assert created is not None
    expected = TK_CREATED.replace("tm-5c46", tid).replace("2026-02-10T12:00:00Z", created[1])
    assert text == expected
    # tk's id: the project directory's initials ("project" -> "p"), 4 hex digits
    assert re.fullmatch(r"p-[0-9a-f]{4}", tid)
    assert made["hash"] == authoring.content_hash(text.encode())


def test_create_never_takes_an_existing_id(project: Path) -> None:
    prefix = authoring.id_prefix(project)
    first = next(iter(authoring.candidate_ids(prefix, pid=1, now=0)))
    (project / ".tickets").mkdir()
    (project / ".tickets" / f"{first}.md").write_text(tk_ticket(first), encoding="utf-8")
    from tf_fsm.engine.ticket_edit import Draft, create_ticket

    ids = authoring.candidate_ids(prefix, pid=1, now=0)
    assert next(iter(ids)) == first  # the same seed gives tk's id first
    done = create_ticket(project, Draft("Another"))
    assert done.path.is_file() and done.ticket_id != first
    assert (project / ".tickets" / f"{first}.md").read_text(encoding="utf-8") == tk_ticket(first)


@pytest.mark.parametrize(
    ("name", "prefix"),
    [
        ("my-cool_project", "mcp"),
        ("tf_fsm", "tf"),
        ("project", "p"),
        ("-", "t"),
        ("a.b", "a"),
        (".dot", "t"),
    ],
)
def test_id_prefix_is_tk_initials(name: str, prefix: str) -> None:
    assert authoring.id_prefix(Path("/x") / name) == prefix


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (["--title", ""], "title"),
        (["--title", "T", "-p", "7"], "priority"),
        (["--title", "T", "-t", "a type"], "type"),
        (["--title", "T", "--tags", "a b,c"], "tags"),
        (["--title", "T", "--deps", "nope-1"], "deps"),
        (["--title", "T", "-a", "x: y"], "assignee"),
        ([], "title"),
    ],
)
def test_create_bad_input_names_the_field_and_writes_nothing(
    project: Path, args: list[str], field: str
) -> None:
    done = run_cli("tickets", "create", *args)
    assert done.returncode == 2
    assert f"error: {field}:" in done.stderr
    assert not list((project / ".tickets").glob("*")) if (project / ".tickets").exists() else True


def _ticket(project: Path, tid: str, text: str) -> Path:
    path = project / ".tickets" / f"{tid}.md"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


@pytest.mark.parametrize("text", [TK_TICKET, TK_TICKET_MINIMAL])
def test_edit_title_and_description_match_tk_edit(project: Path, tmp_path: Path, text: str) -> None:
    path = _ticket(project, "tm-1", text)
    title, description = "A new title", "First line.\n\nSecond paragraph."
    done = run_cli("tickets", "edit", "tm-1", "--title", title, "-d", description)
    assert done.returncode == 0, done.stderr
    assert "changed title, description" in done.stdout
    expected = _awk(TK_UPDATE_TITLE, "title", title, text, tmp_path)
    expected = _awk(TK_UPDATE_DESCRIPTION, "content", description, expected, tmp_path)
    assert path.read_text(encoding="utf-8") == expected
    assert "## Design" not in text or "## Design\n\nCount the depth" in expected


def test_edit_fields_match_tk_edit_and_tk_dep(project: Path) -> None:
    _ticket(project, "tm-0001", tk_ticket("tm-0001"))
    _ticket(project, "tm-0002", tk_ticket("tm-0002"))
    path = _ticket(project, "tm-5c46", TK_TICKET)
    done = run_cli(
        "tickets", "edit", "tm-5c46", "-p", "3", "--tags", "db,ui", "--deps", "tm-0001,tm-0002"
    )
    assert done.returncode == 0, done.stderr
    # tk edit -p 3 --tags db,ui; tk dep tm-5c46 tm-0001; tk dep tm-5c46 tm-0002
    expected = (
        TK_TICKET.replace("priority: 1", "priority: 3")
        .replace("tags: [api, parser]", "tags: [db, ui]")
        .replace("deps: []", "deps: [tm-0001, tm-0002]")
    )
    assert path.read_text(encoding="utf-8") == expected


def test_edit_keeps_crlf_lines(project: Path) -> None:
    path = _ticket(project, "t-1", "")
    head = b"---\r\nid: t-1\r\nstatus: open\r\ndeps: []\r\n---\r\n"
    path.write_bytes(head + b"# T\r\n\r\nold\r\n\r\n## Notes\r\nn\r\n")
    assert run_cli("tickets", "edit", "t-1", "--title", "U", "-d", "new").returncode == 0
    assert path.read_bytes() == head + b"# U\r\n\r\nnew\r\n\r\n## Notes\r\nn\r\n"


def test_edit_refuses_a_cycle_naming_it(project: Path) -> None:
    _ticket(project, "a-1", tk_ticket("a-1").replace("deps: []", "deps: [a-2]"))
    _ticket(project, "a-2", tk_ticket("a-2").replace("deps: []", "deps: [a-3]"))
    before = _ticket(project, "a-3", tk_ticket("a-3")).read_bytes()
    done = run_cli("tickets", "edit", "a-3", "--deps", "a-1")
    assert done.returncode == 2
    assert "deps: would make a cycle: a-3 -> a-1 -> a-2 -> a-3" in done.stderr
    assert (project / ".tickets/a-3.md").read_bytes() == before
    assert "cannot depend on itself" in run_cli("tickets", "edit", "a-3", "--deps", "a-3").stderr


def test_edit_refuses_a_file_changed_since_read(project: Path) -> None:
    path = _ticket(project, "t-1", tk_ticket("t-1"))
    stale = authoring.content_hash(path.read_bytes())
    path.write_text(tk_ticket("t-1", title="Changed by someone"), encoding="utf-8")
    after = path.read_bytes()
    done = run_cli("tickets", "edit", "t-1", "--title", "Mine", "--if-hash", stale)
    assert done.returncode == 75
    assert "changed on disk since you opened it" in done.stderr
    assert path.read_bytes() == after
    fresh = authoring.content_hash(after)
    assert run_cli("tickets", "edit", "t-1", "--title", "Mine", "--if-hash", fresh).returncode == 0


def test_edit_refuses_a_ticket_a_run_holds(project: Path) -> None:
    path = _ticket(project, "t-1", tk_ticket("t-1"))
    store = open_store(project, load_settings(project), "t-1")
    with store.lock(note="a run"):
        done = run_cli("tickets", "edit", "t-1", "--title", "Mine")
    assert done.returncode == 75
    assert "locked" in done.stderr
    assert path.read_text(encoding="utf-8") == tk_ticket("t-1")
    assert run_cli("tickets", "edit", "t-1", "--title", "Mine").returncode == 0


def test_edit_of_a_missing_ticket_is_bad_input(project: Path) -> None:
    done = run_cli("tickets", "edit", "t-9", "--title", "x")
    assert done.returncode == 2 and "not found" in done.stderr
