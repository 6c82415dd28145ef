"""Debian's chromium (/usr/bin/chromium) driven by Playwright, for the web board's browser
tests: the `browser` and `page` fixtures (registered by tests/conftest.py), `until` and `live`.

No browser is downloaded: without /usr/bin/chromium (`apt-get install chromium`, which
.ci/run does) a test marked `needs_chromium` is skipped, saying so."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.is_file(),
    reason="Debian's chromium is not installed at /usr/bin/chromium "
    "(apt-get install chromium; .ci/run installs it): the browser tests of tf-fsm ui are skipped",
)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=FLAGS)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1500, "height": 900})
    tab = context.new_page()
    tab.on("dialog", lambda d: pytest.fail(f"a dialog opened: {d.message}"))
    yield tab
    context.close()


def until(page: Any, expression: str, timeout: float = 20.0) -> None:
    """Wait until `expression` is true in the page. Polled from here with `evaluate`: the
    board's Content-Security-Policy forbids the eval that Playwright's own waiting uses."""
    deadline = time.monotonic() + timeout
    while not page.evaluate(expression):
        assert time.monotonic() < deadline, f"not true within {timeout} s: {expression}"
        time.sleep(0.05)


def live(page: Any, url: str) -> None:
    """Open `url` and wait for its live stream; marks the document so that a test can tell a
    reload (`window.__sameDocument` is 42 until the page reloads)."""
    page.goto(url)
    until(page, "document.getElementById('live').textContent === 'live'")
    page.evaluate("window.__sameDocument = 42")
