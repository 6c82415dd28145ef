"""`tf-fsm ui` for people, in a real browser (Debian's chromium through Playwright, against a
real server process and real `tf-fsm run` processes running the fake agent): a phone-width
layout, dark mode, AA contrast, no 404, a log that follows its tail only at the bottom, the
keys, a ticket page built around its state (the log first while it runs, the deciding findings
first when it is blocked) and the running node of its path in blue."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from tests.browser import live, needs_chromium, until
from tests.conftest import tk_ticket
from tests.ui_server import demo_project, slow_project, start_run, ui_server

pytestmark = needs_chromium

# The WCAG contrast of an element's text against the background it is drawn on (the first
# ancestor with an opaque background), and the product of its ancestors' opacity.
CONTRAST = """(selector) => [...document.querySelectorAll(selector)].map((el) => {
  const rgb = (c) => c.match(/[\\d.]+/g).map(Number);
  const lum = ([r, g, b]) => {
    const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
    return 0.2126 * f(r) + 0.7152 * f(g) + 0.0722 * f(b);
  };
  let bg = null, opacity = 1;
  for (let n = el; n; n = n.parentElement) {
    const s = getComputedStyle(n);
    opacity *= Number(s.opacity);
    const c = rgb(s.backgroundColor);
    if (!bg && (c.length < 4 || c[3] === 1)) bg = c;
  }
  const a = lum(rgb(getComputedStyle(el).color)), b = lum(bg || [255, 255, 255]);
  return [el.className, (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05), opacity];
})"""
MEASURED = (
    ".column h2", ".count", ".card-note", ".card.col-closed .card-title",
    ".card.col-closed .card-id", ".card.col-closed .card-note", ".total", ".brand", ".live",
)  # fmt: skip


def board_project(where: Path) -> Path:
    """The demo project (demo-1 closed) with three more tickets, two ready and one waiting."""
    root = demo_project(where)
    tickets = root / ".tickets"
    (tickets / "demo-2.md").write_text(tk_ticket("demo-2", title="Second"), encoding="utf-8")
    (tickets / "demo-3.md").write_text(tk_ticket("demo-3", title="Third"), encoding="utf-8")
    waiting = tk_ticket("demo-4", title="Fourth").replace("deps: []", "deps: [demo-2]")
    (tickets / "demo-4.md").write_text(waiting, encoding="utf-8")
    return root


def no_page_overflow(page: Any) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def test_a_phone_reaches_every_column_and_the_whole_ticket_page(
    browser: Any, project: Path
) -> None:
    root = board_project(project / "p")
    context = browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = context.new_page()
    try:
        with ui_server(root) as server:
            live(page, server.base + "/")
            assert no_page_overflow(page), "the page itself scrolls sideways"
            columns = page.locator(".column")
            assert columns.count() == 7
            for i in range(7):
                columns.nth(i).scroll_into_view_if_needed()
                box = columns.nth(i).bounding_box()
                assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 391, i
            assert no_page_overflow(page)
            # the column bar jumps to a column, with its true count, and follows live updates
            page.evaluate("window.scrollTo(0, 0); document.querySelector('.board').scrollLeft = 0")
            chip = page.locator(".column-nav a[href='#col-closed']")
            assert chip.is_visible() and chip.inner_text() == "closed 1"
            chip.click()
            shown = "(r => r.x >= 0 && r.right <= 391)(document.getElementById('col-closed')"
            until(page, shown + ".getBoundingClientRect())")
            ticket = root / ".tickets" / "demo-2.md"
            ticket.write_text(ticket.read_text().replace("status: open", "status: closed"))
            until(page, "document.querySelector(\"[data-count-for='closed']\").textContent === '2'")
            live(page, server.base + "/ticket/demo-1")
            assert no_page_overflow(page), "the ticket page scrolls sideways"
            for part in ("#timeline-heading", ".attempt summary", ".steps li", "#log"):
                box = page.locator(part).first.bounding_box()
                assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 391, part
    finally:
        context.close()


def test_dark_mode_follows_the_system_and_every_text_keeps_aa_contrast(
    browser: Any, project: Path
) -> None:
    root = board_project(project / "p")
    backgrounds = {}
    with ui_server(root) as server:
        for scheme in ("light", "dark"):
            context = browser.new_context(color_scheme=scheme)
            page = context.new_page()
            try:
                live(page, server.base + "/")
                backgrounds[scheme] = page.evaluate("getComputedStyle(document.body).background")
                for selector in MEASURED:
                    measured = page.evaluate(CONTRAST, selector)
                    assert measured, f"nothing matches {selector}"
                    for name, ratio, opacity in measured:
                        assert ratio >= 4.5, f"{scheme}: {selector} ({name}) is {ratio:.2f}:1"
                        assert opacity == 1, f"{scheme}: {selector} is dimmed by opacity"
                live(page, server.base + "/ticket/demo-1")
                for selector in ("h1", "h2", ".summary", ".steps time", ".log-name"):
                    for name, ratio, _ in page.evaluate(CONTRAST, selector):
                        assert ratio >= 4.5, f"{scheme}: {selector} ({name}) is {ratio:.2f}:1"
            finally:
                context.close()
    assert backgrounds["light"] != backgrounds["dark"]
    dark = [int(v) for v in re.findall(r"\d+", backgrounds["dark"])[:3]]
    assert max(dark) < 60, backgrounds["dark"]


def test_no_request_of_any_page_gets_a_404_and_the_favicon_is_answered(
    page: Any, project: Path
) -> None:
    root = board_project(project / "p")
    failed: list[str] = []
    page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else 0)
    with ui_server(root) as server:
        live(page, server.base + "/")
        live(page, server.base + "/ticket/demo-1")
        until(page, "document.getElementById('diagram').naturalWidth > 100")
        page.goto(server.base + "/ticket/demo-1/diagram.svg")
        icon = page.request.get(server.base + "/favicon.ico")
        assert icon.status == 200 and icon.headers["content-type"] == "image/svg+xml"
        assert icon.body().startswith(b"<svg")
        linked = page.request.get(server.base + "/static/favicon.svg")
        assert linked.status == 200 and linked.body() == icon.body()
    assert failed == []


def _live_log(root: Path, ticket: str) -> Path:
    logs = root / ".tf/knowledge/tickets" / ticket / "logs"
    deadline = time.monotonic() + 30
    while not (found := sorted(logs.glob("attempt-*/*.live.log"))):
        assert time.monotonic() < deadline, "no live log appeared"
        time.sleep(0.05)
    return found[0]


def _append(log: Path, first: int, count: int) -> None:
    with log.open("a", encoding="utf-8") as handle:
        handle.writelines(f"line {n} of the agent's output\n" for n in range(first, first + count))


def test_a_running_ticket_s_page_leads_with_its_log_which_follows_only_at_the_bottom(
    page: Any, project: Path
) -> None:
    gate = project / "go"
    plan = {"pause": [{"phase": "implement", "until": str(gate), "seconds": 120}]}
    root = slow_project(project / "p", ("t-1", "t-2"), seconds=0.05, plan=plan)
    with ui_server(root) as server:
        run = start_run(root, "t-1")
        try:
            log = _live_log(root, "t-1")
            live(page, server.base + "/ticket/t-1")
            until(page, "document.getElementById('step').textContent.startsWith('running')")
            summary = page.inner_text("#summary")
            assert "running: implement, attempt 1/3" in summary and "resume" not in summary
            # the log first: above the fold, before the description
            assert page.evaluate(
                "document.getElementById('log-section').getBoundingClientRect().top"
                " < window.innerHeight"
            )
            assert page.evaluate(
                "!!(document.getElementById('log-section').compareDocumentPosition("
                "document.getElementById('body-heading')) & Node.DOCUMENT_POSITION_FOLLOWING)"
            )
            # the running node of the path is blue, not red
            svg = page.request.get(server.base + "/ticket/t-1/diagram.svg").text()
            node = _node(svg, "in_progress.implement")
            assert 'stroke="#1f5fbf"' in node and 'fill="#a9c8f5"' in node, node
            assert "#b03a2e" not in svg
            log_js = "document.getElementById('log')"
            _append(log, 0, 200)
            until(page, f"{log_js}.textContent.includes('line 199 ')")
            bottom = f"{log_js}.scrollHeight - {log_js}.scrollTop - {log_js}.clientHeight < 4"
            until(page, bottom)  # it followed the tail
            page.evaluate(f"{log_js}.scrollTop = 300")
            until(page, f"{log_js}.scrollTop === 300")
            _append(log, 200, 100)
            until(page, f"{log_js}.textContent.includes('line 299 ')")
            page.wait_for_timeout(200)  # a follow would have happened with the lines
            assert page.evaluate(f"{log_js}.scrollTop") == 300, "the view moved"
            assert page.is_visible("#log-follow")
            page.evaluate(f"{log_js}.scrollTop = {log_js}.scrollHeight")
            until(page, bottom)
            _append(log, 300, 100)
            until(page, f"{log_js}.textContent.includes('line 399 ')")
            until(page, bottom)  # back at the bottom, it follows again
            assert not page.is_visible("#log-follow")
        finally:
            gate.write_text("", encoding="utf-8")
            assert run.wait(timeout=60) == 0, run.stderr.read() if run.stderr else ""
        until(page, "document.getElementById('step').textContent.startsWith('next')", 30)
        assert page.evaluate("window.__sameDocument") == 42


def _node(svg: str, state: str) -> str:
    """The drawing of `state` in Graphviz's SVG (its <g class="node"> group)."""
    for group in re.findall(r'<g id="node\d+" class="node">.*?</g>', svg, re.S):
        if f"<title>{state}</title>" in group:
            return str(group)
    raise AssertionError(f"no node {state} in the SVG")


def test_a_blocked_ticket_s_page_leads_with_the_findings_that_decided(
    page: Any, project: Path
) -> None:
    unfixable = {
        "findings": [
            {"id": "f1", "severity": "Major", "text": "the depth limit is never read",
             "reviewer": "reviewer-general", "fixedBy": []},
            {"id": "f2", "severity": "Minor", "text": "a typo", "reviewer": "reviewer-general",
             "fixedBy": []},
        ]
    }  # fmt: skip
    root = slow_project(project / "p", ("t-1",), seconds=0.05, plan=unfixable, max_retries=2)
    with ui_server(root) as server:
        for code, column in ((3, "blocked"), (4, "human")):
            run = start_run(root, "t-1")
            assert run.wait(timeout=60) == code, run.stderr.read() if run.stderr else ""
            live(page, server.base + "/ticket/t-1")
            until(page, f"document.querySelector('.badge').textContent === '{column}'")
            deciding = page.locator("#deciding")
            assert deciding.count() == 1, column
            findings = page.locator("#deciding .finding").all_inner_texts()
            assert findings == ["Major the depth limit is never read reviewer-general"], findings
            assert page.evaluate(
                "!!(document.getElementById('deciding').compareDocumentPosition("
                "document.getElementById('artifacts')) & Node.DOCUMENT_POSITION_FOLLOWING)"
            )
        # one h1; each artifact an h3 inside the Artifacts h2; no artifact heading above h4
        assert page.locator("h1").count() == 1
        names = page.locator("#artifacts > .artifact > summary > h3").all_inner_texts()
        assert "review.md" in names and len(names) == page.locator(".artifact").count()
        assert page.locator(".markdown h1, .markdown h2, .markdown h3").count() == 0
        assert page.locator(".markdown h4").count() > 0
        assert page.get_attribute("#diagram", "alt").startswith("t-1's path")


def test_the_keys_move_between_cards_open_one_and_go_next_and_back(
    page: Any, project: Path
) -> None:
    root = board_project(project / "p")
    with ui_server(root) as server:
        live(page, server.base + "/")
        focused = "document.activeElement.closest('.card')?.dataset.id || null"
        order = page.evaluate("[...document.querySelectorAll('.card')].map(c => c.dataset.id)")
        assert page.evaluate(focused) is None
        page.keyboard.press("j")  # nothing focused yet: the first card of the board
        assert page.evaluate(focused) == order[0] == "demo-4"  # waiting on dependencies
        page.keyboard.press("l")  # ready: the same place, demo-2 then demo-3
        assert page.evaluate(focused) == "demo-2"
        page.keyboard.press("j")
        assert page.evaluate(focused) == "demo-3"
        page.keyboard.press("ArrowUp")
        assert page.evaluate(focused) == "demo-2"
        page.keyboard.press("ArrowRight")  # the next column with cards: closed
        assert page.evaluate(focused) == "demo-1"
        page.keyboard.press("h")
        assert page.evaluate(focused) == "demo-2"
        page.keyboard.press("?")
        assert page.evaluate("document.getElementById('keys').open")
        page.keyboard.press("?")
        assert not page.evaluate("document.getElementById('keys').open")
        page.keyboard.press("/")  # the search box
        assert page.evaluate("document.activeElement.id") == "q"
        page.keyboard.press("j")  # typed into the box, not a move
        assert page.evaluate("document.activeElement.id") == "q"
        page.locator("#card-demo-3 .card-id").focus()
        page.keyboard.press("Enter")
        page.wait_for_url("**/ticket/demo-3")
        assert page.get_attribute("#prev-ticket", "href") == "/ticket/demo-2"
        assert page.get_attribute("#next-ticket", "href") == "/ticket/demo-4"  # tk's order
        page.keyboard.press("n")
        page.wait_for_url("**/ticket/demo-4")
        page.keyboard.press("p")
        page.wait_for_url("**/ticket/demo-3")
        page.keyboard.press("p")
        page.wait_for_url("**/ticket/demo-2")
        page.keyboard.press("u")
        page.wait_for_url(server.base + "/")
        page.goto(server.base + "/ticket/demo-1")
        assert page.locator("#prev-ticket").count() == 0  # the first ticket
        page.keyboard.press("Escape")
        page.wait_for_url(server.base + "/")
        # a card the reader is on keeps the focus when a live update moves it
        until(page, "document.getElementById('live').textContent === 'live'")
        page.locator("#card-demo-2 .card-id").focus()
        ticket = root / ".tickets" / "demo-2.md"
        ticket.write_text(ticket.read_text().replace("status: open", "status: closed"))
        until(page, "document.querySelector('#col-closed #card-demo-2') !== null")
        assert page.evaluate(focused) == "demo-2"
