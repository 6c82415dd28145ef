"""The board's columns from real runs: tickets run by `tf-fsm run` with the fake agent script
into each state, then read by the board as the server reads them (in-process `Board`)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

from tests.conftest import run_cli, tk_ticket
from tests.ui_server import AGENT
from tf_fsm.settings.load import load_settings
from tf_fsm.ui.app import BoardApp, Options
from tf_fsm.ui.board import Board
from tf_fsm.ui.diagram import fallback_svg
from tf_fsm.ui.filters import Filter
from tf_fsm.ui.page import ticket_page
from tf_fsm.views.history import load_history

UNFIXABLE = {
    "findings": [{"id": "f1", "severity": "Major", "text": "still broken",
                  "reviewer": "reviewer-general", "fixedBy": []}],
}  # fmt: skip
CRASH = {"crash": [{"phase": "implement", "exitCode": 3, "stderr": "agent crashed", "times": 99}]}


def _project(root: Path) -> Path:
    plans = root.parent / "plans"
    plans.mkdir()
    agent = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
    plan = shlex.quote(str(plans)) + "/{ticket_id}.json"
    settings = {
        "workflow": {
            "enableResearcher": False,
            "enableReviewers": ["reviewer-general"],
            "escalation": {"maxRetries": 2, "maxCostUsd": 5.0},
        },
        "executor": {
            "kind": "command",
            "command": ["/bin/sh", "-c", f"FAKE_AGENT_PLAN={plan} exec {agent}"],
            "restartBackoffSeconds": 0,
        },
    }
    (root / ".tf/config/settings.json").write_text(json.dumps(settings), encoding="utf-8")
    (root / ".tickets").mkdir()
    plans_of = {"t-block": UNFIXABLE, "t-exh": UNFIXABLE, "t-err": CRASH}
    for tid in ("t-block", "t-exh", "t-err", "t-done", "t-ready", "t-dep"):
        tags = "[component:api]" if tid < "t-e" else "[]"
        text = tk_ticket(tid, title=f"Ticket {tid}", tags=tags)
        if tid == "t-dep":
            text = text.replace("deps: []", "deps: [t-ready]")
        (root / ".tickets" / f"{tid}.md").write_text(text, encoding="utf-8")
        (plans / f"{tid}.json").write_text(json.dumps(plans_of.get(tid, {})), encoding="utf-8")
    return root


def test_each_state_stands_in_its_column(project: Path) -> None:
    root = _project(project)
    assert run_cli("run", "t-exh").returncode == 3  # escalation off: a run is one attempt
    codes = {
        tid: run_cli("run", tid, *extra).returncode
        for tid, extra in (("t-block", ["--once"]), ("t-exh", []), ("t-err", []), ("t-done", []))
    }
    assert codes == {"t-block": 3, "t-exh": 4, "t-err": 5, "t-done": 0}
    board = Board(root, load_settings(root))
    board.rescan()
    cards = board.snapshot.cards
    placed = {tid: (card.column, card.note) for tid, card in cards.items()}
    assert placed == {
        "t-block": ("blocked", "1 retries left"),
        "t-exh": ("human", "retries exhausted"),
        "t-err": ("error", "crash: resumable"),
        "t-done": ("closed", "closed in tk"),
        "t-ready": ("ready", "tk ready"),
        "t-dep": ("waiting", "open dependencies"),
    }
    assert cards["t-exh"].attempt == 2 and cards["t-exh"].max_attempts == 2
    assert cards["t-exh"].budget == 5.0
    assert list(cards) == sorted(cards)  # same priority: tk's order is the id's
    totals = board.snapshot.totals
    assert (totals.tickets, totals.closed) == (6, 1)
    assert totals.per_hour is not None and totals.per_hour > 0
    assert board.snapshot.tags == ["component:api"]
    html = BoardApp(Options(root, load_settings(root))).board_html(Filter(tag="component:api"))
    assert 'id="card-t-block"' in html and 'id="card-t-ready"' not in html


def test_a_refresh_reads_only_what_changed_and_a_ticket_without_its_file_still_shows(
    project: Path,
) -> None:
    root = _project(project)
    assert run_cli("run", "t-block", "--once").returncode == 3
    settings = load_settings(root)
    board = Board(root, settings)
    assert board.rescan() == list(board.snapshot.cards)  # every card is new
    before = board.snapshot
    assert board.refresh({"t-block"}) == []  # nothing changed on disk: the same card
    assert board.snapshot.cards["t-block"] is before.cards["t-block"]
    assert board.snapshot.version == before.version
    assert run_cli("reset", "t-block").returncode == 0
    assert board.refresh({"t-block"}) == ["t-block"]
    assert board.snapshot.cards["t-block"].column == "ready"
    (root / ".tickets/t-block.md").unlink()
    board.rescan()
    assert board.snapshot.cards["t-block"].title == "(no ticket file)"
    page = ticket_page(root, settings, "t-block")
    assert page["title"] == "t-block" and "No ticket file" in page["body"]


def test_the_path_picture_without_graphviz(project: Path) -> None:
    root = _project(project)
    assert [run_cli("run", "t-exh").returncode for _ in range(2)] == [3, 4]
    history, _ = load_history(root, "t-exh")
    svg = fallback_svg(history).decode()
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "t-exh: now blocked" in svg
    assert 'stroke="#b03a2e"' in svg  # the current state is outlined
    assert svg.count("<path") == sum(1 for _ in history.taken)


def test_the_page_shows_the_ticket_s_branch_checkpoints_and_merge(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import httpx

    from tests.gitrepo import commit_all, git, init_repo, isolate
    from tests.ui_server import ui_server

    isolate(monkeypatch)
    root = _project(project)
    (project.parent / "plans" / "t-done.json").write_text(
        json.dumps({"edits": [{"phase": "implement", "file": "work.txt"}]}), encoding="utf-8"
    )
    init_repo(root)
    commit_all(root, "the project")
    assert run_cli("run", "t-done", "--worktree").returncode == 0
    with ui_server(root) as server:
        html = httpx.get(server.base + "/ticket/t-done").text
    merged = git(root, "log", "-1", "--format=%H", "main")
    assert "branch <code>tf/t-done</code> (base <code>main</code>)" in html
    assert "implement <code>" in html  # the implement phase's checkpoint
    assert f"merged into main as <code>{merged[:10]}</code>" in html


def test_a_ticket_waiting_for_a_hand_off_needs_a_human(project: Path) -> None:
    """The run ends after PhaseWaiting with events of no attempt (ViewSaved, ViewsSynced):
    the card still reads the current attempt's last step."""
    (project / ".tf/config/settings.json").write_text('{"executor": {"kind": "handoff"}}')
    (project / ".tickets").mkdir()
    (project / ".tickets/t-1.md").write_text(tk_ticket("t-1"), encoding="utf-8")
    assert run_cli("run", "t-1").returncode == 6
    journal = (project / ".tf/knowledge/tickets/t-1/events.jsonl").read_text(encoding="utf-8")
    assert json.loads(journal.splitlines()[-1])["event"] == "ViewsSynced"
    board = Board(project, load_settings(project))
    board.rescan()
    card = board.snapshot.cards["t-1"]
    assert (card.column, card.note) == ("human", "waiting for a hand-off artifact")


def test_a_passed_ticket_waiting_for_tf_fsm_merge_needs_a_human(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ralph.parallelAutoMerge false: the ticket passed, is not closed, and waits for a
    person's `tf-fsm merge`; its dependent waits on it."""
    from tests.gitrepo import commit_all, init_repo, isolate

    isolate(monkeypatch)
    root = _project(project)
    path = root / ".tf/config/settings.json"
    settings = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**settings, "ralph": {"parallelAutoMerge": False}}))
    init_repo(root)
    commit_all(root, "the project")
    assert run_cli("run", "t-ready", "--worktree").returncode == 0
    board = Board(root, load_settings(root))
    board.rescan()
    card = board.snapshot.cards["t-ready"]
    assert (card.column, card.note) == ("human", "passed, waiting for `tf-fsm merge`")
    assert board.snapshot.cards["t-dep"].column == "waiting"
