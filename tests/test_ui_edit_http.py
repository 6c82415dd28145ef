"""The board's forms over HTTP against a real `tf-fsm ui` process: what it writes, and each
refusal (403 read-only, 400 without the action header or with a bad field, 404 no ticket,
409 a run holds the ticket, the file changed on disk, a hand-off no longer waited for)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx

from tests.conftest import run_cli, tk_ticket
from tests.ui_server import ui_server
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.tk.authoring import content_hash


def _project(project: Path, *ids: str, handoff: bool = False) -> Path:
    settings = {"executor": {"kind": "handoff", "stableSeconds": 0.3}} if handoff else {}
    (project / ".tf/config/settings.json").write_text(json.dumps(settings), encoding="utf-8")
    (project / ".tickets").mkdir(exist_ok=True)
    for tid in ids:
        (project / ".tickets" / f"{tid}.md").write_text(tk_ticket(tid), encoding="utf-8")
    return project


def _csrf(client: httpx.Client, path: str) -> dict[str, str]:
    found = re.search(r'data-csrf="([^"]+)"', client.get(path).text)
    assert found, "no form on the page"
    return {"X-TF-FSM-Action": found[1]}


def test_read_only_board_refuses_every_write_and_shows_no_form(project: Path) -> None:
    root = _project(project, "t-1")
    with ui_server(root) as server:
        client = httpx.Client(base_url=server.base)
        assert "new-ticket" not in client.get("/").text
        assert 'id="edit-open"' not in client.get("/ticket/t-1").text
        for path in ("/tickets", "/ticket/t-1/edit", "/ticket/t-1/handoff"):
            answer = client.post(path, json={"title": "x"})
            assert answer.status_code == 403, path
            assert "read-only" in answer.json()["error"]
    assert sorted(p.name for p in (root / ".tickets").iterdir()) == ["t-1.md"]


def test_create_and_edit_with_their_refusals(project: Path) -> None:
    root = _project(project, "t-1", "t-2")
    path = root / ".tickets/t-1.md"
    with ui_server(root, "--allow-actions") as server:
        client = httpx.Client(base_url=server.base)
        header = _csrf(client, "/")
        assert client.post("/tickets", json={"title": "x"}).status_code == 400  # no header
        bad = client.post("/tickets", json={"title": "T", "priority": "9"}, headers=header)
        assert bad.status_code == 400 and bad.json()["field"] == "priority"
        made = client.post(
            "/tickets", json={"title": "New", "tags": "a,b", "deps": "t-1"}, headers=header
        )
        assert made.status_code == 201
        new = root / ".tickets" / f"{made.json()['ticket']}.md"
        assert "deps: [t-1]\n" in new.read_text() and "tags: [a, b]\n" in new.read_text()

        fields = client.get("/ticket/t-1/fields").json()
        assert fields["hash"] == content_hash(path.read_bytes())
        assert fields["description"] == "The parser recurses without bound on nested input."
        assert (
            client.post("/ticket/t-1/edit", json={"title": "x"}, headers=header).status_code == 400
        )
        cycle = client.post(
            "/ticket/t-1/edit",
            json={"hash": fields["hash"], "deps": made.json()["ticket"]},
            headers=header,
        )
        assert cycle.status_code == 400 and "cycle" in cycle.json()["error"]
        saved = client.post(
            "/ticket/t-1/edit",
            json={"hash": fields["hash"], "title": "Renamed", "deps": "t-2"},
            headers=header,
        )
        assert saved.status_code == 200, saved.text
        assert saved.json()["changed"] == ["deps", "title"]
        assert path.read_text() == tk_ticket("t-1", title="Renamed").replace(
            "deps: []", "deps: [t-2]"
        )
        stale = client.post(
            "/ticket/t-1/edit", json={"hash": fields["hash"], "title": "Mine"}, headers=header
        )
        assert stale.status_code == 409
        assert "changed on disk since you opened it" in stale.json()["error"]
        assert "# Renamed" in path.read_text()
        missing = client.post("/ticket/t-9/edit", json={"hash": "x", "title": "y"}, headers=header)
        assert missing.status_code == 404


def test_an_edit_while_a_run_holds_the_ticket_is_409(project: Path) -> None:
    root = _project(project, "t-1")
    before = (root / ".tickets/t-1.md").read_bytes()
    store = open_store(root, load_settings(root), "t-1")
    with ui_server(root, "--allow-actions") as server:
        client = httpx.Client(base_url=server.base)
        header = _csrf(client, "/ticket/t-1")
        fields = client.get("/ticket/t-1/fields").json()
        with store.lock(note="a run"):
            page = client.get("/ticket/t-1").text
            assert re.search(r'id="edit-open"[^>]* disabled', page)
            assert client.get("/ticket/t-1/fields").json()["held"] is not None
            held = client.post(
                "/ticket/t-1/edit", json={"hash": fields["hash"], "title": "x"}, headers=header
            )
            assert held.status_code == 409 and "a run holds this ticket" in held.json()["error"]
        assert (root / ".tickets/t-1.md").read_bytes() == before


def test_a_hand_off_is_answered_from_the_page_and_the_ticket_goes_on(project: Path) -> None:
    root = _project(project, "t-1", handoff=True)
    run = run_cli("--root", str(root), "run", "t-1")
    assert run.returncode == 6, run.stderr
    area = root / ".tf/knowledge/tickets/t-1"
    with ui_server(root, "--allow-actions") as server:
        client = httpx.Client(base_url=server.base)
        page = client.get("/ticket/t-1").text
        assert "Waiting for you: research.md" in page
        assert "prompts/attempt-1/research-researcher.md" in page
        header = _csrf(client, "/ticket/t-1")
        form = {"attempt": "1", "phase": "research", "output": "research.md"}
        wrong = client.post(
            "/ticket/t-1/handoff", json={**form, "output": "fixes.md", "text": "x"}, headers=header
        )
        assert wrong.status_code == 409 and not (area / "fixes.md").exists()
        text = "# Research\n\nThe parser recurses — here: `parse_expr`.\n"
        sent = client.post("/ticket/t-1/handoff", json={**form, "text": text}, headers=header)
        assert sent.status_code == 202, sent.text
        assert (area / "research.md").read_bytes() == text.encode()
        deadline = time.monotonic() + 30
        while "Waiting for you: implementation.md" not in client.get("/ticket/t-1/handoff").text:
            assert time.monotonic() < deadline, "the ticket did not go on to implement"
            time.sleep(0.1)
        again = client.post("/ticket/t-1/handoff", json={**form, "text": "y"}, headers=header)
        assert again.status_code == 409  # research is done: it waits for implementation.md
    assert (area / "research.md").read_bytes() == text.encode()
