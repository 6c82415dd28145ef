"""`tf-fsm ui` in a real browser: Debian's chromium (/usr/bin/chromium) driven by Playwright,
against a real server process, while real `tf-fsm run` processes run real agent scripts.

The browser and its fixtures are tests/browser.py. With TF_FSM_SCREENSHOTS=1 the screenshots
are written to docs/images/ (docs/ui.md shows them); otherwise to the test's directory."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from tests.browser import live, needs_chromium, until
from tests.conftest import tk_ticket
from tests.test_ui import XSS
from tests.ui_server import demo_project, slow_project, start_run, ui_server

DOCS_IMAGES = Path(__file__).resolve().parent.parent / "docs" / "images"

pytestmark = needs_chromium


def test_a_run_beside_the_board_moves_its_card_without_a_reload(page: Any, project: Path) -> None:
    root = slow_project(project / "p", ("t-1", "t-2"))
    with ui_server(root) as server:
        live(page, server.base + "/")
        assert page.locator("#col-ready #card-t-1").count() == 1
        run = start_run(root, "t-1")
        try:
            running = page.wait_for_selector("#col-running #card-t-1", timeout=20_000)
            assert "attempt 1/3" in running.inner_text()
            page.wait_for_selector("#col-running #card-t-1 .card-run", timeout=20_000)
            page.wait_for_selector("#col-closed #card-t-1", timeout=60_000)
        finally:
            assert run.wait(timeout=60) == 0, run.stderr.read() if run.stderr else ""
        assert page.evaluate("window.__sameDocument") == 42, "the page was reloaded"
        assert page.locator("#col-ready #card-t-2").count() == 1
        assert "1/2 closed" in page.inner_text("#totals")


def test_a_ticket_that_needs_a_human_raises_a_notification(browser: Any, project: Path) -> None:
    unfixable = {
        "findings": [
            {
                "id": "f1",
                "severity": "Major",
                "text": "still broken",
                "reviewer": "reviewer-general",
                "fixedBy": [],
            }
        ]
    }
    root = slow_project(project / "p", ("t-1",), seconds=0.1, plan=unfixable, max_retries=1)
    context = browser.new_context()
    context.grant_permissions(["notifications"])
    # the browser's Notification, recorded (headless chromium shows none)
    context.add_init_script(
        "window.__shown = []; window.Notification = class { constructor(title, o) {"
        " window.__shown.push(title + ' | ' + (o && o.body)); } };"
        " window.Notification.permission = 'granted';"
    )
    page = context.new_page()
    try:
        with ui_server(root) as server:
            live(page, server.base + "/")
            run = start_run(root, "t-1")
            assert run.wait(timeout=60) == 4, run.stderr.read() if run.stderr else ""
            until(page, "document.querySelector('#col-human #card-t-1') !== null")
            until(page, "window.__shown.length > 0")
            assert page.evaluate("window.__shown") == ["tf-fsm: t-1 needs a human | Ticket t-1"]
            assert "retries exhausted" in page.inner_text("#card-t-1")
    finally:
        context.close()


def test_the_ticket_page_shows_the_path_the_artifacts_and_a_live_log(
    page: Any, project: Path
) -> None:
    root = slow_project(project / "p", ("t-1",))
    with ui_server(root) as server:
        live(page, server.base + "/ticket/t-1")
        assert "not run yet" in page.inner_text("#panel")
        run = start_run(root, "t-1")
        try:
            until(page, "document.getElementById('log').textContent.length > 0", 30)
            first = page.inner_text("#log-name")
            until(page, f"document.getElementById('log-name').textContent !== {first!r}", 30)
            page.wait_for_selector("#artifact-close-summary\\.md", timeout=60_000)
        finally:
            assert run.wait(timeout=60) == 0
        assert page.evaluate("window.__sameDocument") == 42
        until(page, "document.getElementById('diagram').naturalWidth > 100")
        names = page.locator(".artifact summary").all_inner_texts()
        assert {"implementation.md", "review.md", "close-summary.md"} <= set(names)
        assert "attempt 1 (initial)" in page.inner_text("#panel")


def test_agent_payloads_render_inert_in_the_browser(page: Any, project: Path) -> None:
    root = demo_project(project / "p")
    (root / ".tf/knowledge/tickets/demo-1/review.md").write_text(XSS, encoding="utf-8")
    with ui_server(root) as server:
        live(page, server.base + "/ticket/demo-1")
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        for link in page.locator("#artifact-review\\.md a").all():
            link.click(modifiers=["Alt"], no_wait_after=True, trial=False, timeout=2000)
        page.wait_for_timeout(300)
        assert page.evaluate("window.__xss") is None
        assert page.locator("#panel [onerror], #panel script").count() == 0
        assert page.locator("#panel a[href^='javascript:' i]").count() == 0
        assert "<script>window.__xss = 1</script>" in page.inner_text("#artifact-review\\.md")


def test_screenshots_of_the_demo_board_and_ticket_page(page: Any, project: Path) -> None:
    root = demo_project(project / "p")
    (root / ".tickets/demo-2.md").write_text(
        tk_ticket("demo-2", title="Report the parser's depth in --verbose"), encoding="utf-8"
    )
    (root / ".tickets/demo-3.md").write_text(
        tk_ticket("demo-3", title="Document the depth limit").replace("deps: []", "deps: [demo-2]"),
        encoding="utf-8",
    )
    where = DOCS_IMAGES if os.environ.get("TF_FSM_SCREENSHOTS") == "1" else project
    with ui_server(root) as server:
        live(page, server.base + "/")
        page.set_viewport_size({"width": 1500, "height": 520})
        board = where / "ui-board.png"
        page.screenshot(path=str(board))
        page.emulate_media(color_scheme="dark")  # as a system in dark mode asks for it
        dark = where / "ui-board-dark.png"
        page.screenshot(path=str(dark))
        page.emulate_media(color_scheme="light")
        page.set_viewport_size({"width": 390, "height": 844})  # a phone
        phone = where / "ui-board-phone.png"
        page.screenshot(path=str(phone))
        live(page, server.base + "/ticket/demo-1")
        page.evaluate(
            "document.querySelector('#artifact-review\\\\.md').open = true;"
            "document.querySelector('#artifact-close-summary\\\\.md').open = false;"
        )
        until(page, "document.getElementById('diagram').naturalWidth > 100")
        page.set_viewport_size({"width": 1500, "height": 1100})
        ticket = where / "ui-ticket.png"
        page.screenshot(path=str(ticket))
    for shot in (board, dark, phone, ticket):
        data = shot.read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000, shot
    assert shutil.which("dot") is None or page.locator("#diagram").count() == 1
