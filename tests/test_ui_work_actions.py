"""The board's actions and diffs over HTTP, against real server processes and real runs: what
the server refuses (403 read-only, 400 without the page's header, 409 while a run holds the
ticket, or a stop when none does) whatever a page sends, a stop from the board ending a run
resumably, and a ticket's diff and its checkpoints' (only its own) from a real git workspace."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import run_cli, tk_ticket, wait_for
from tests.gitrepo import git, init_repo, isolate
from tests.test_ui import _next_event
from tests.ui_server import Server, demo_project, slow_project, start_run, ui_server
from tf_fsm.storage.lock import lock_holder

SECRET = "sk-ant-" + "api03-AbCdEfGhIjKlMnOpQrStUv0123456789-xyz"
STATE = ".tf/knowledge/tickets"


def csrf_of(server: Server, ticket: str) -> dict[str, str]:
    page = httpx.get(f"{server.base}/ticket/{ticket}").text
    csrf = re.search(r'data-csrf="([^"]+)"', page).group(1)  # type: ignore[union-attr]
    return {"X-TF-FSM-Action": csrf}


def workspace_project(root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository whose ticket t-1 ran in its own worktree and passed, its merge held
    (`run --hold-merge`): its implement phase wrote src/app.py (with a secret in it), its
    fix phase appended to notes.txt, each a checkpoint commit on branch tf/t-1."""
    isolate(monkeypatch)
    edits = [
        {"phase": "implement", "file": "src/app.py", "text": f"TOKEN = '{SECRET}'\nX = 1"},
        {"phase": "review", "file": "notes.txt", "text": "reviewed"},
    ]
    slow_project(root, ("t-1",), seconds=0, plan={"edits": edits})
    init_repo(root, {"README.md": "a project\n"})
    done = run_cli("--root", str(root), "run", "t-1", "--hold-merge")
    assert done.returncode == 0, done.stderr
    assert "PASSED, not merged" in done.stdout, done.stdout
    return root


def checkpoints(root: Path, ticket: str) -> list[str]:
    status = json.loads(run_cli("--root", str(root), "status", ticket, "--json").stdout)
    return [c["sha"] for c in status["workspace"]["checkpoints"]]


@pytest.fixture
def held(project: Path) -> Iterator[Path]:
    """t-1 being run (slowly) by a `tf-fsm run` of its own."""
    root = slow_project(project / "p", ("t-1",), seconds=30)
    run = start_run(root, "t-1")
    state = root / STATE / "t-1"
    wait_for(lambda: lock_holder(state) == run.pid, 30, "the run holds t-1")
    try:
        yield root
    finally:
        if run.poll() is None:
            run.kill()
        run.wait(timeout=10)


def test_actions_are_refused_read_only_and_without_the_header(project: Path) -> None:
    root = demo_project(project / "p")
    with ui_server(root) as server:
        for action in ("run", "stop", "merge"):
            refused = httpx.post(f"{server.base}/ticket/demo-1/action/{action}")
            assert refused.status_code == 403, action
        page = httpx.get(server.base + "/ticket/demo-1").text
        assert 'data-action="run"' not in page  # no buttons on a read-only board
    with ui_server(root, "--allow-actions") as server:
        for action in ("run", "stop", "merge"):
            bare = httpx.post(f"{server.base}/ticket/demo-1/action/{action}")
            assert bare.status_code == 400, action
            wrong = httpx.post(
                f"{server.base}/ticket/demo-1/action/{action}", headers={"X-TF-FSM-Action": "x"}
            )
            assert wrong.status_code == 400, action
        headers = csrf_of(server, "demo-1")
        idle = httpx.post(server.base + "/ticket/demo-1/action/stop", headers=headers)
        assert idle.status_code == 409 and "nothing to stop" in idle.json()["error"]


def test_while_a_run_holds_the_ticket_only_stop_starts_and_it_ends_the_run_resumably(
    held: Path,
) -> None:
    state = held / STATE / "t-1"
    with ui_server(held, "--allow-actions") as server:
        page = httpx.get(server.base + "/ticket/t-1").text
        found = re.findall(r'data-action="(\w+)"([^>]*)>', page)
        buttons = {name: "disabled" in rest for name, rest in found}
        assert buttons == {"run": True, "stop": False, "resume": True, "reset": True}
        headers = csrf_of(server, "t-1")
        for action in ("run", "resume", "reset", "merge"):
            refused = httpx.post(f"{server.base}/ticket/t-1/action/{action}", headers=headers)
            assert refused.status_code == 409, action
            assert "a run holds it now" in refused.json()["error"]
        assert lock_holder(state) > 0  # nothing was started beside the run
        with httpx.stream("GET", server.base + "/events?ticket=t-1", timeout=60) as events:
            lines = events.iter_lines()
            stop = httpx.post(server.base + "/ticket/t-1/action/stop", headers=headers)
            assert stop.status_code == 202
            assert _next_event(lines, "action")["state"] == "running"
            done = _next_event(lines, "action")
        assert done["action"] == "stop" and done["exitCode"] == 0, done
        assert "the attempt is resumable" in str(done["output"])
        assert lock_holder(state) == 0
        board = httpx.get(server.base + "/").text
        error = board.split('id="col-error"')[1].split("</section>")[0]
        assert 'id="card-t-1"' in error and "interrupted at implement: resumable" in error
        fragment = httpx.get(server.base + "/ticket/t-1/actions").text
        assert re.search(r'data-action="stop"[^>]*disabled', fragment)
        assert not re.search(r'data-action="resume"[^>]*disabled', fragment)


def test_a_diff_shows_the_branch_and_only_the_tickets_own_checkpoints(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = workspace_project(project / "p", monkeypatch)
    points = checkpoints(root, "t-1")
    assert points
    base = git(root, "rev-parse", "main")
    with ui_server(root) as server:  # read-only: a diff changes nothing
        page = httpx.get(server.base + "/ticket/t-1").text
        assert 'href="/ticket/t-1/diff"' in page
        whole = httpx.get(server.base + "/ticket/t-1/diff")
        assert whole.status_code == 200
        assert '<span class="d-add">+X = 1' in whole.text
        assert "notes.txt" in whole.text
        assert SECRET not in whole.text and "TOKEN = " in whole.text  # redacted, still shown
        first = httpx.get(server.base + "/ticket/t-1/diff", params={"checkpoint": points[0]})
        assert first.status_code == 200 and "src/app.py" in first.text
        assert "notes.txt" not in first.text  # the implement checkpoint alone
        for foreign in (base, "HEAD", "main", "--output=/tmp/x", points[0][:10]):
            refused = httpx.get(server.base + "/ticket/t-1/diff", params={"checkpoint": foreign})
            assert refused.status_code == 404, foreign
            assert "not a checkpoint of t-1" in refused.text
        (root / ".tickets/t-2.md").write_text(tk_ticket("t-2"), encoding="utf-8")
        wait_for(lambda: httpx.get(server.base + "/ticket/t-2/diff").status_code == 404, 10, "t-2")
        assert "no git workspace" in httpx.get(server.base + "/ticket/t-2/diff").text
        assert httpx.get(server.base + "/ticket/..%2Fx/diff").status_code == 404
