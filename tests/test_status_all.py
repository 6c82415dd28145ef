"""`tf-fsm status`: `skip` and `next` are one decision, `--all` shows the whole backlog in tk's
order, and the blocked-attempts count cannot read as a contradiction of the attempt number
after a close (the table, and `tf-fsm run`'s and `ralph`'s last lines). Real processes, the
scripted agent (attempt 1 blocks on a Major finding, attempt 2 escalates the fixer and closes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tf_fsm.cli.demo import SETTINGS, TICKET_TEXT


def write_project(project: Path, max_retries: int = 3) -> None:
    settings = json.loads(json.dumps(SETTINGS))
    settings["workflow"]["escalation"]["maxRetries"] = max_retries
    (project / ".tf/config/settings.json").write_text(json.dumps(settings), encoding="utf-8")
    (project / ".tickets").mkdir(exist_ok=True)


def ticket(project: Path, tid: str, priority: str = "2", status: str = "open") -> None:
    """A ticket as `tk create` writes it; the scripted agent's demo scenario applies to it."""
    text = TICKET_TEXT.replace("id: demo-1", f"id: {tid}")
    text = text.replace("priority: 2", f"priority: {priority}")
    text = text.replace("status: open", f"status: {status}")
    (project / ".tickets" / f"{tid}.md").write_text(text, encoding="utf-8")


def rows(*args: str) -> list[dict[str, Any]]:
    result = run_cli("status", *args, "--json")
    assert result.returncode == 0, result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


# --- skip and next -------------------------------------------------------------------------


def test_a_closed_ticket_is_skipped_as_its_next_step_says(project: Path) -> None:
    write_project(project)
    ticket(project, "demo-1")
    run = run_cli("run", "demo-1")
    assert run.returncode == 0, run.stderr
    (row,) = rows("demo-1")
    assert row["next"].startswith("nothing: closed")
    assert row["skip"] is True


def test_skip_is_true_exactly_when_next_is_nothing(project: Path) -> None:
    write_project(project, max_retries=1)
    for tid in ("pt-1", "pt-3"):
        ticket(project, tid)
    assert run_cli("run", "pt-1").returncode == 4  # blocked, and its one retry spent
    seen = {row["ticket"]: row for row in rows("--all")}
    assert set(seen) == {"pt-1", "pt-3"}
    assert seen["pt-1"]["skip"] is True
    assert seen["pt-3"]["skip"] is False and seen["pt-3"]["next"] == "attempt 1 (initial)"
    for row in seen.values():
        assert row["skip"] == row["next"].startswith("nothing:"), row


# --- blocked attempts, not "retries 0/3" beside "attempt 2" ----------------------------------


def test_after_a_close_the_count_says_it_was_reset(project: Path) -> None:
    write_project(project)
    ticket(project, "demo-1")
    run = run_cli("run", "demo-1")
    assert run.returncode == 0, run.stderr
    assert "demo-1: CLOSED after attempt 2 (blocked attempts reset on close): " in run.stdout
    assert "retries 0/3" not in run.stdout
    table = run_cli("status").stdout
    assert "blocked attempts" in table and "reset on close" in table, table
    assert "0/3" not in table


def test_a_blocked_run_counts_its_blocked_attempts(project: Path) -> None:
    write_project(project)
    ticket(project, "demo-1")
    run = run_cli("run", "demo-1", "--once")
    assert run.returncode == 3, run.stderr
    assert "demo-1: BLOCKED (retries left) after attempt 1 (blocked attempts 1/3): " in run.stderr
    table = run_cli("status").stdout
    assert "│ 1/3 " in table, table


def test_ralph_words_the_count_the_same_way(project: Path) -> None:
    write_project(project)
    ticket(project, "demo-1")
    done = run_cli("ralph")
    assert done.returncode == 0, done.stderr
    assert "demo-1: BLOCKED after attempt 1 (blocked attempts 1/3, " in done.stderr
    assert "demo-1: CLOSED after attempt 2 (blocked attempts reset on close, " in done.stderr
    assert "blocked attempts" in done.stdout and "reset on close" in done.stdout
    assert "retries" not in done.stdout


# --- --all ---------------------------------------------------------------------------------


def test_all_lists_the_whole_backlog_in_tk_order(project: Path) -> None:
    write_project(project)
    ticket(project, "b-9")
    ticket(project, "b-10")  # ids compare as strings: b-10 before b-9
    ticket(project, "a-1", priority="3")
    ticket(project, "p-1", priority="10")  # priorities compare as numbers: 10 after 3
    ticket(project, "z-1", priority="0")
    ticket(project, "c-1", status="closed")  # closed in tk, never run: still listed
    assert run_cli("run", "b-9", "--once").returncode == 3
    (project / ".tf/knowledge/tickets/gone-1").mkdir()  # state, no ticket file: listed last
    found = rows("--all")
    assert [r["ticket"] for r in found] == ["z-1", "b-10", "b-9", "c-1", "a-1", "p-1", "gone-1"]
    never = {r["ticket"]: r for r in found if r["ticket"] != "b-9"}
    for row in never.values():
        assert row["attempt"] is None and row["status"] is None
        assert row["next"] == "attempt 1 (initial)", row
    # without --all: the tickets with state only, as before
    assert [r["ticket"] for r in rows()] == ["b-9", "gone-1"]


def test_all_table_shows_never_run_tickets_with_their_next_step_and_no_state(
    project: Path,
) -> None:
    write_project(project)
    ticket(project, "pt-1")
    result = run_cli("status", "--all")
    assert result.returncode == 0, result.stderr
    (line,) = [ln for ln in result.stdout.splitlines() if "pt-1" in ln]
    cells = [c.strip() for c in line.strip("│ ").split("│")]
    assert cells == ["pt-1", "-", "-", "0/3", "-", "-", "attempt 1 (initial)"]


def test_all_on_a_project_where_nothing_ran(project: Path) -> None:
    (project / ".tickets").mkdir()
    ticket(project, "pt-1")
    result = run_cli("status", "--all")
    assert result.returncode == 0, result.stderr
    assert "pt-1" in result.stdout and "attempt 1 (initial)" in result.stdout
    assert not (project / ".tf/knowledge").exists()  # read-only


def test_all_on_an_empty_backlog_says_so(project: Path) -> None:
    result = run_cli("status", "--all")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "the backlog has no tickets\n"


def test_all_with_ticket_names_is_a_usage_error(project: Path) -> None:
    result = run_cli("status", "--all", "pt-1")
    assert result.returncode == 2
    assert "--all shows every ticket of the backlog; drop the TICKET names" in result.stderr


def test_all_says_which_tickets_run_cannot_take(project: Path) -> None:
    write_project(project)
    tickets = project / ".tickets"
    ticket(project, "pt-1")
    (tickets / "notes.md").write_text("no frontmatter here\n", encoding="utf-8")
    (tickets / "pt-8.md").write_text("---\nid: pt-9\nstatus: open\n---\n# T\n", encoding="utf-8")
    (tickets / "pt-7.md").write_text("---\nid: bad id\nstatus: open\n---\n# T\n", encoding="utf-8")
    result = run_cli("status", "--all", "--json")
    assert result.returncode == 0, result.stderr
    assert f"tf-fsm: warning: {tickets / 'notes.md'}: no `id:` line" in result.stderr
    found = {r["ticket"]: r for r in map(json.loads, result.stdout.splitlines())}
    assert set(found) == {"pt-1", "pt-9", "bad id"}
    assert found["pt-9"]["next"].startswith("nothing: its id is pt-9 but its file is pt-8.md")
    assert found["bad id"]["next"].startswith("nothing: invalid ticket id")
    assert found["pt-9"]["skip"] and found["bad id"]["skip"]
    assert not found["pt-1"]["skip"]


@pytest.mark.parametrize("args", [(), ("--all",)])
def test_all_keeps_the_corrupt_state_rule(project: Path, args: tuple[str, ...]) -> None:
    write_project(project)
    ticket(project, "pt-1")
    state = project / ".tf/knowledge/tickets/pt-1/retry-state.json"
    state.parent.mkdir(parents=True)
    state.write_text("{not json", encoding="utf-8")
    result = run_cli("status", *args)
    assert result.returncode == 2
    assert "corrupt" in result.stdout and "retry-state.json" in result.stderr
