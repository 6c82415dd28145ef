"""Working from the board in a real browser (Debian's chromium through Playwright), against a
real server with `--allow-actions`, real `tf-fsm` runs of the fake agent and real git
repositories: run now, stop and resume, the buttons disabled while a run holds the ticket, a
ticket's diff and a checkpoint's, and the merge of a ticket waiting for it. Each action is
confirmed in the page's own dialog."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.browser import live, needs_chromium, until
from tests.gitrepo import git
from tests.test_ui_work_actions import SECRET, STATE, checkpoints, wait_for, workspace_project
from tests.ui_server import slow_project, start_run, ui_server
from tf_fsm.storage.lock import lock_holder

pytestmark = needs_chromium

BADGE = "(document.querySelector('#panel .badge') || {}).textContent"


def disabled(name: str) -> str:
    return f"document.querySelector('#work-buttons [data-action={name}]').disabled"


def confirm(page: Any, name: str) -> None:
    """Click the action's button, check the dialog names its command, and confirm."""
    page.click(f"#work-buttons [data-action={name}]")
    until(page, "document.getElementById('work-confirm').open")
    command = page.inner_text("#work-confirm-command")
    assert command.startswith("tf-fsm ") and command.endswith(" t-1"), command
    page.click("#work-confirm-ok")
    until(page, "!document.getElementById('work-confirm').open")


def test_run_now_moves_the_card_to_running_then_closed(page: Any, project: Path) -> None:
    root = slow_project(project / "p", ("t-1",), seconds=1.0)
    with ui_server(root, "--allow-actions") as server:
        board = page.context.new_page()
        live(board, server.base + "/")
        live(page, server.base + "/ticket/t-1")
        assert not page.evaluate(disabled("run")) and page.evaluate(disabled("stop"))
        page.click("#work-buttons [data-action=run]")
        until(page, "document.getElementById('work-confirm').open")
        page.click("#work-confirm button[value=cancel]")  # cancelled: nothing starts
        until(page, "!document.getElementById('work-confirm').open")
        assert page.inner_text("#action-result") == ""
        confirm(page, "run")
        board.wait_for_selector("#col-running #card-t-1", timeout=30_000)
        until(page, f"{BADGE} === 'running'", 30)
        # while it runs: only stop may be clicked, in the page as the live updates left it
        until(page, disabled("run") + " && !" + disabled("stop"), 10)
        assert page.evaluate(disabled("resume")) and page.evaluate(disabled("reset"))
        board.wait_for_selector("#col-closed #card-t-1", timeout=90_000)
        until(page, "document.getElementById('action-result').textContent"
              ".startsWith('run: done, exit code 0')", 30)  # fmt: skip
        until(page, f"{BADGE} === 'closed'", 10)
        until(page, "!" + disabled("run") + " && " + disabled("stop"), 10)
        assert board.evaluate("window.__sameDocument") == 42, "the board was reloaded"


def test_stop_interrupts_the_run_resumably_and_resume_finishes_it(page: Any, project: Path) -> None:
    root = slow_project(project / "p", ("t-1",), seconds=120)
    run = start_run(root, "t-1")
    # held before the board starts: this test is about stopping it, not about seeing it start
    wait_for(lambda: lock_holder(root / STATE / "t-1") == run.pid, 30, "the run holds t-1")
    try:
        with ui_server(root, "--allow-actions") as server:
            live(page, server.base + "/ticket/t-1")
            until(page, f"{BADGE} === 'running'", 30)
            until(page, "!" + disabled("stop") + " && " + disabled("resume"), 10)
            confirm(page, "stop")
            until(page, f"{BADGE} === 'error'", 30)
            assert "interrupted at implement: resumable" in page.inner_text("#panel .summary")
            until(page, "document.getElementById('action-result').textContent"
                  ".startsWith('stop: done, exit code 0')", 30)  # fmt: skip
            assert run.wait(timeout=10) == 130
            (root / "agent-plan.json").write_text(json.dumps({}), encoding="utf-8")  # fast now
            until(page, "!" + disabled("resume"), 10)
            confirm(page, "resume")
            until(page, f"{BADGE} === 'closed'", 60)
            until(page, "document.getElementById('action-result').textContent"
                  ".startsWith('resume: done, exit code 0')", 30)  # fmt: skip
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()


def test_a_workspace_tickets_diff_and_a_checkpoints_diff(
    page: Any, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = workspace_project(project / "p", monkeypatch)
    first = checkpoints(root, "t-1")[0]
    with ui_server(root) as server:
        live(page, server.base + "/ticket/t-1")
        page.click("#panel a.diff-link[href='/ticket/t-1/diff']")
        page.wait_for_selector("#diff")
        assert "branch tf/t-1 against main" in page.inner_text("h1")
        added = [line.strip() for line in page.locator("#diff .d-add").all_inner_texts()]
        assert "+X = 1" in added and "+reviewed" in added
        assert SECRET not in page.inner_text("#diff")
        page.click(f".diff-nav a[href$='{first}']")
        page.wait_for_selector(f".diff-nav a[href$='{first}'][aria-current=page]")
        assert "+X = 1\n" in page.locator("#diff .d-add").all_inner_texts()
        assert "notes.txt" not in page.inner_text("#diff")


def test_the_merge_button_merges_a_ticket_waiting_for_its_merge(
    page: Any, project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = workspace_project(project / "p", monkeypatch)
    before = git(root, "rev-parse", "main")
    with ui_server(root, "--allow-actions") as server:
        live(page, server.base + "/ticket/t-1")
        assert "waiting for `tf-fsm merge`" in page.inner_text("#panel .summary")
        assert page.inner_text("#work-buttons [data-action=merge]") == "merge"
        confirm(page, "merge")
        until(page, "document.getElementById('action-result').textContent"
              ".startsWith('merge: done, exit code 0')", 60)  # fmt: skip
        until(page, f"{BADGE} === 'closed'", 20)
        until(page, "document.querySelector('#work-buttons [data-action=merge]') === null", 10)
    assert git(root, "rev-parse", "main^1") == before  # one merge commit on top of the base
    assert "X = 1" in (root / "src/app.py").read_text()
