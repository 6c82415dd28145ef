"""The board's forms in a real browser (Debian's chromium through Playwright) against a real
`tf-fsm ui --allow-actions` process: a ticket created from the board appears in ready, an
edit of its title and dependencies moves its card, and a hand-off answered from a ticket's
page lands byte for byte and the ticket goes on to its next phase (a real `tf-fsm run`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.browser import live, needs_chromium, until
from tests.conftest import run_cli, tk_ticket
from tests.ui_server import ui_server

pytestmark = needs_chromium


def _project(project: Path, *ids: str, settings: dict[str, Any] | None = None) -> Path:
    (project / ".tf/config/settings.json").write_text(json.dumps(settings or {}), "utf-8")
    (project / ".tickets").mkdir(exist_ok=True)
    for tid in ids:
        (project / ".tickets" / f"{tid}.md").write_text(tk_ticket(tid), encoding="utf-8")
    return project


def test_create_then_edit_moves_the_card(page: Any, project: Path) -> None:
    root = _project(project, "t-1")
    with ui_server(root, "--allow-actions") as server:
        live(page, server.base + "/")
        page.click("#new-ticket-open")
        page.fill("#new-ticket-form [name=title]", "")
        page.click("#new-ticket-form .edit-save")  # the browser's own check: nothing sent
        page.fill("#new-ticket-form [name=title]", "Made in the browser")
        page.fill("#new-ticket-form [name=tags]", "a b")
        page.click("#new-ticket-form .edit-save")
        until(page, "document.querySelector('#new-ticket-form .edit-error').textContent !== ''")
        assert "tags:" in page.inner_text("#new-ticket-form .edit-error")
        page.fill("#new-ticket-form [name=tags]", "ui")
        page.click("#new-ticket-form .edit-save")
        until(page, "document.getElementById('edit-result').textContent.startsWith('created ')")
        tid = page.inner_text("#edit-result").split()[-1]
        page.wait_for_selector(f"#col-ready #card-{tid}", timeout=20_000)
        assert "Made in the browser" in page.inner_text(f"#card-{tid}")
        assert "tags: [ui]\n" in (root / ".tickets" / f"{tid}.md").read_text()

        live(page, f"{server.base}/ticket/{tid}")
        page.click("#edit-open")
        until(page, "document.querySelector('#edit-ticket-form [name=hash]').value !== ''")
        page.fill("#edit-ticket-form [name=title]", "Renamed in the browser")
        page.fill("#edit-ticket-form [name=deps]", "t-1")
        page.click("#edit-ticket-form .edit-save")
        save = page.inner_text("#edit-ticket-form .edit-save")
        assert save == "confirm: overwrite title, deps"  # the in-page confirmation
        assert "Renamed" not in (root / ".tickets" / f"{tid}.md").read_text()
        page.click("#edit-ticket-form .edit-save")
        until(page, "document.getElementById('edit-result').textContent.startsWith('saved')")
        text = (root / ".tickets" / f"{tid}.md").read_text()
        assert "# Renamed in the browser\n" in text and "deps: [t-1]\n" in text

        live(page, server.base + "/")  # t-1 is open: the new ticket now waits on it
        page.wait_for_selector(f"#col-waiting #card-{tid}", timeout=20_000)
        assert "Renamed in the browser" in page.inner_text(f"#card-{tid}")


def test_a_hand_off_answered_from_its_page_goes_on(page: Any, project: Path) -> None:
    settings = {"executor": {"kind": "handoff", "stableSeconds": 0.3}}
    root = _project(project, "t-1", settings=settings)
    run = run_cli("--root", str(root), "run", "t-1")
    assert run.returncode == 6, run.stderr  # waiting for research.md
    area = root / ".tf/knowledge/tickets/t-1"
    with ui_server(root, "--allow-actions") as server:
        live(page, server.base + "/ticket/t-1")
        assert "Waiting for you: research.md" in page.inner_text("#handoff h2")
        prompt = page.inner_text("#handoff .handoff-prompt")
        assert "prompts/attempt-1/research-researcher.md" in prompt
        assert "research.md" in prompt and "Add a depth limit" in prompt
        text = "# Research\n\nLine one.\n\n- a point with <b>markup</b> & ünïcode\n"
        page.fill("#handoff-form textarea", text)
        page.click("#handoff-form .edit-save")
        until(
            page,
            "document.querySelector('#handoff-form .edit-error').textContent.startsWith('written')",
        )
        assert (area / "research.md").read_bytes() == text.encode()
        # the board resumes it: the next phase's prompt replaces the section, no reload
        until(
            page,
            "document.querySelector('#handoff h2').textContent.includes('implementation.md')",
            timeout=30,
        )
        assert page.evaluate("window.__sameDocument") == 42
        assert "implement" in page.inner_text("#handoff .handoff-what")
    events = (area / "events.jsonl").read_text(encoding="utf-8").splitlines()
    waits = [json.loads(e) for e in events if '"PhaseWaiting"' in e]
    assert [w["phase"] for w in waits][-1] == "implement"
