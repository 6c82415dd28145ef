"""A 10,000-ticket board in a real browser (Debian's chromium through Playwright, tests/
browser.py) against a real `tf-fsm ui` process: the first change after start moves one card
and leaves the page at its 50 cards a column, the counts stay the backlog's true totals, "show
more" fetches the next cards, a search narrows the board (and is a link), live updates respect
it, and a change too large for one event makes the page fetch its columns again."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser import live, needs_chromium, until
from tests.ui_backlog import big_ticket, replace, status_of, ticket_id, write_backlog
from tests.ui_server import Server, ui_server

pytestmark = needs_chromium

COUNT = 10_000
CARDS = "document.querySelectorAll('.card').length"


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Server]]:
    root = write_backlog(tmp_path_factory.mktemp("big") / "p", COUNT)
    with ui_server(root) as server:
        yield root, server


def _count(page: Any, column: str) -> int:
    return int(page.inner_text(f"#col-{column} .count"))


def _first(page: Any, column: str) -> str | None:
    return page.evaluate(  # type: ignore[no-any-return]
        f"(document.querySelector('#col-{column} .card') || {{}}).id || null"
    )


def test_the_first_change_moves_one_card_and_the_counts_stay_true(
    page: Any, big: tuple[Path, Server]
) -> None:
    root, server = big
    live(page, server.base + "/")
    closed, ready = _count(page, "closed"), _count(page, "ready")
    assert closed == sum(status_of(n) == "closed" for n in range(COUNT)) and ready > 6000
    assert page.evaluate(CARDS) <= 7 * 50
    path = root / ".tickets" / f"{ticket_id(6)}.md"  # open and ready; nothing waits on it
    replace(path, big_ticket(6, "closed"))
    try:
        until(page, f"document.querySelector('#col-closed .card').id === 'card-{ticket_id(6)}'")
        assert _count(page, "closed") == closed + 1 and _count(page, "ready") == ready - 1
        assert page.evaluate(CARDS) <= 7 * 50 + 1
        assert page.evaluate("window.__sameDocument") == 42, "the page was reloaded"
        shown = "document.querySelectorAll('#col-ready .card').length"
        assert page.evaluate(shown) == 49  # it left the first 50; the 51st is not fetched
        page.click("#col-ready .show-more")
        until(page, f"{shown} === 99")
        more = page.inner_text("#col-ready .more-text")
        assert more == f"and {ready - 1 - 99} more"
    finally:
        replace(path, big_ticket(6, "open"))
    until(page, f"document.querySelector('#card-{ticket_id(6)}.col-ready') !== null")


def test_a_search_narrows_the_board_and_live_updates_respect_it(
    page: Any, big: tuple[Path, Server]
) -> None:
    root, server = big
    hit, miss = 9, 12
    hit_path, miss_path = (root / ".tickets" / f"{ticket_id(n)}.md" for n in (hit, miss))
    replace(hit_path, big_ticket(hit, body="The Wombat ate the parser."))
    live(page, server.base + "/")
    assert page.locator("label[for=q]").inner_text() == "search"
    page.fill("#q", "wombat")
    page.press("#q", "Enter")
    until(page, "document.body.dataset.q === 'wombat'")
    until(page, "document.getElementById('live').textContent === 'live'")
    assert "q=wombat" in page.url
    assert page.evaluate(CARDS) == 1 and _count(page, "ready") == 1
    assert _count(page, "closed") == 0
    try:
        replace(miss_path, big_ticket(miss, "closed"))
        replace(hit_path, big_ticket(hit, "closed", body="The Wombat ate the parser."))
        until(page, f"document.querySelector('#col-closed #card-{ticket_id(hit)}') !== null")
        assert page.evaluate(CARDS) == 1 and _count(page, "closed") == 1
        assert page.locator(f"#card-{ticket_id(miss)}").count() == 0
        assert page.locator("#col-ready .empty").is_visible()
    finally:
        replace(miss_path, big_ticket(miss))
        replace(hit_path, big_ticket(hit))


def test_a_change_too_large_for_an_event_refetches_the_columns(
    page: Any, big: tuple[Path, Server], tmp_path: Path
) -> None:
    root, server = big
    live(page, server.base + "/")
    closed = _count(page, "closed")
    picked = [n for n in range(6000, 7000) if status_of(n) == "open" and n % 10 != 1][:200]
    staged = [tmp_path / f"{ticket_id(n)}.md" for n in picked]
    for n, path in zip(picked, staged, strict=True):
        path.write_text(big_ticket(n, "closed"), encoding="utf-8")
    try:
        for path in staged:
            path.replace(root / ".tickets" / path.name)
        count = "Number(document.querySelector('#col-closed .count').textContent)"
        until(page, f"{count} === {closed + 200}")  # the cards come in the same message
        assert page.evaluate(CARDS) <= 7 * 50 + 1
        closed_ids = page.evaluate(
            "[...document.querySelectorAll('#col-closed .card')].map(c => c.dataset.id)"
        )
        assert set(closed_ids) <= {ticket_id(n) for n in picked}  # newest closed first
        assert page.evaluate("window.__sameDocument") == 42, "the page was reloaded"
    finally:
        for n in picked:
            replace(root / ".tickets" / f"{ticket_id(n)}.md", big_ticket(n))
