"""`tf-fsm ui` over HTTP: a real server process on a real project, requests with httpx.
The browser tests are in test_ui_browser.py."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
import pytest

from tests.conftest import tk_ticket
from tests.ui_server import demo_project, slow_project, start_run, ui_server

XSS = """# Review

<script>window.__xss = 1</script>
<img src=x onerror="window.__xss = 2">
[click me](javascript:window.__xss=3)
<a href="javascript:window.__xss=4">raw link</a>
[fine](https://example.org/docs)

token in a finding: OPENAI_API_KEY=sk-proj-abcdefghijklmnopqrstuvwxyz0123456789ABCD
"""


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_project(tmp_path_factory.mktemp("ui") / "demo")


def test_board_lists_the_demo_ticket_closed_and_the_ticket_page_has_its_parts(demo: Path) -> None:
    started = time.monotonic()
    with ui_server(demo) as server:
        up = time.monotonic() - started
        board = httpx.get(server.base + "/")
        assert board.status_code == 200
        closed = board.text.split('id="col-closed"')[1].split("</section>")[0]
        assert 'id="card-demo-1"' in closed
        assert "Add a depth limit to the config parser" in closed
        assert "1/1 closed" in re.sub(r"<[^>]+>", "", board.text)
        page = httpx.get(server.base + "/ticket/demo-1")
        assert page.status_code == 200
        for part in (
            "attempt 1 (initial)",
            "attempt 2",
            "review.md",
            "close-summary.md",
            'src="/ticket/demo-1/diagram.svg"',
            "fixer → openai-codex/gpt-5.3-codex",
        ):
            assert part in page.text, part
        assert 'id="log"' in page.text and "scripted agent" in page.text
        svg = httpx.get(server.base + "/ticket/demo-1/diagram.svg")
        assert svg.headers["content-type"].startswith("image/svg+xml")
        assert b"<svg" in svg.content and b"closed" in svg.content
        headers = board.headers
        assert "script-src 'self'" in headers["content-security-policy"]
        assert headers["x-content-type-options"] == "nosniff"
    assert up < 10, f"the server took {up:.1f} s to print its URL"


def test_no_path_outside_the_project_is_served(demo: Path, tmp_path: Path) -> None:
    with ui_server(demo) as server:
        for path in (
            "/static/../app.py",
            "/static/%2e%2e/app.py",
            "/ticket/..%2f..%2fetc",
            "/ticket/demo-1/../../etc/passwd",
            "/ticket/nope-9",
            "/static/nothing.js",
        ):
            response = httpx.get(server.base + path)
            assert response.status_code == 404, path
            assert "import" not in response.text


def test_artifact_payloads_are_inert_and_secrets_redacted(project: Path) -> None:
    root = demo_project(project / "p")
    state = root / ".tf/knowledge/tickets/demo-1"
    (state / "review.md").write_text(XSS, encoding="utf-8")
    outside = project / "outside.md"
    outside.write_text("# outside secret text", encoding="utf-8")
    (state / "research.md").unlink()
    (state / "research.md").symlink_to(outside)
    with ui_server(root) as server:
        html = httpx.get(server.base + "/ticket/demo-1").text
    review = html.split('id="artifact-review.md"')[1].split("</details>")[0]
    tags = _tags(review)
    assert "script" not in [tag for tag, _ in tags] and "&lt;script&gt;" in review
    attrs = [(name, value or "") for _, pairs in tags for name, value in pairs]
    assert not [a for a in attrs if a[0].startswith("on")], "an event handler survived"
    assert not [a for a in attrs if a[1].strip().lower().startswith("javascript:")]
    assert ("href", "https://example.org/docs") in attrs
    assert "sk-proj-abcdefghijklmnopqrstuvwxyz" not in html and "[REDACTED]" in review
    research = html.split('id="artifact-research.md"')[1].split("</details>")[0]
    assert "outside secret text" not in html and "not shown" in research


def test_non_loopback_bind_requires_the_printed_token(demo: Path) -> None:
    with ui_server(demo, "--host", "0.0.0.0") as server:  # noqa: S104 - what is tested
        assert "token=" in server.url
        token = server.url.split("token=")[1]
        printed = "".join(server.first_lines)
        assert printed.count(token) == 1, "the token is printed once"
        port = server.base.rsplit(":", 1)[1]
        base = f"http://127.0.0.1:{port}"
        assert httpx.get(base + "/").status_code == 403
        assert httpx.get(base + "/?token=" + "x" * len(token)).status_code == 403
        assert httpx.get(base + "/events").status_code == 403
        traded = httpx.get(f"{base}/?token={token}&tag=a")
        assert traded.status_code == 303 and traded.headers["location"] == "/?tag=a"
        assert "HttpOnly" in traded.headers["set-cookie"]
        with httpx.Client(base_url=base) as client:
            assert client.get(f"/?token={token}", follow_redirects=True).status_code == 200
            assert client.get("/ticket/demo-1").status_code == 200  # the cookie carries it


def test_loopback_board_refuses_other_host_names(demo: Path) -> None:
    with ui_server(demo) as server:
        assert "token" not in server.url
        rebound = httpx.get(server.base + "/", headers={"Host": "attacker.example:80"})
        assert rebound.status_code == 421
        assert httpx.get(server.base + "/", headers={"Host": "localhost"}).status_code == 200


def test_actions_are_refused_read_only_and_without_the_page_header(demo: Path) -> None:
    with ui_server(demo) as server:
        refused = httpx.post(server.base + "/ticket/demo-1/action/reset")
        assert refused.status_code == 403 and "--allow-actions" in refused.json()["error"]
    with ui_server(demo, "--allow-actions") as server:
        bare = httpx.post(server.base + "/ticket/demo-1/action/reset")
        assert bare.status_code == 400
        assert httpx.post(server.base + "/ticket/demo-1/action/rm").status_code == 400
    assert (demo / ".tf/knowledge/tickets/demo-1/retry-state.json").is_file()


def test_reset_action_runs_the_cli_and_reports_its_exit_code(project: Path) -> None:
    root = demo_project(project / "p")
    state = root / ".tf/knowledge/tickets/demo-1"
    with ui_server(root, "--allow-actions") as server:
        page = httpx.get(server.base + "/ticket/demo-1").text
        csrf = re.search(r'data-csrf="([^"]+)"', page).group(1)  # type: ignore[union-attr]
        with httpx.stream("GET", server.base + "/events?ticket=demo-1", timeout=20) as events:
            lines = events.iter_lines()
            assert next(lines).startswith("retry:")
            started = httpx.post(
                server.base + "/ticket/demo-1/action/reset", headers={"X-TF-FSM-Action": csrf}
            )
            assert started.status_code == 202
            running = _next_event(lines, "action")
            report = _next_event(lines, "action")
    assert running == {"type": "action", "ticket": "demo-1", "action": "reset", "state": "running"}
    assert report["state"] == "done" and report["exitCode"] == 0, report
    assert "retries reset" in report["output"] or "moved aside" in report["output"]
    assert not (state / "retry-state.json").exists()
    assert list(state.glob("retry-state.json.bak.*"))
    journal = (state / "events.jsonl").read_text(encoding="utf-8")
    assert '"RetryStateReset"' in journal


def test_a_corrupt_state_file_is_a_card_in_error_and_the_board_goes_on(project: Path) -> None:
    root = demo_project(project / "p")
    retry = root / ".tf/knowledge/tickets/demo-1/retry-state.json"
    with (
        ui_server(root) as server,
        httpx.stream("GET", server.base + "/events", timeout=20) as events,
    ):
        lines = events.iter_lines()
        assert next(lines).startswith("retry:")
        retry.write_text("{not json", encoding="utf-8")
        broken = _next_event(lines, "cards")
        (root / ".tickets/new-1.md").write_text(tk_ticket("new-1"), "utf-8")
        later = _next_event(lines, "cards")
        board = httpx.get(server.base + "/").text
    (card,) = broken["cards"]
    assert card["id"] == "demo-1" and card["column"] == "error"
    assert "unreadable state" in card["html"] and "retry-state.json" in card["html"]
    assert [c["id"] for c in later["cards"]] == ["new-1"]
    assert 'id="card-demo-1"' in board.split('id="col-error"')[1].split("</section>")[0]


def test_a_ticket_page_shows_its_card_as_the_files_are_and_hears_of_a_change_before_its_stream(
    project: Path,
) -> None:
    plan = {"findings": [{"id": "f1", "severity": "Major", "text": "never read",
                          "reviewer": "reviewer-general", "fixedBy": []}]}  # fmt: skip
    root = slow_project(project / "p", ("t-1",), seconds=0.05, plan=plan, max_retries=2)
    with (
        ui_server(root) as server,
        httpx.stream("GET", server.base + "/events", timeout=20) as board,
    ):
        lines = board.iter_lines()
        assert next(lines).startswith("retry:")
        pages = []
        for code, column in ((3, "blocked"), (4, "human")):
            run = start_run(root, "t-1")
            assert run.wait(timeout=60) == code, run.stderr.read() if run.stderr else ""
            # at once, inside the watcher's 100 ms burst: the page reads the card's files itself
            pages.append(httpx.get(server.base + "/ticket/t-1").text)
            assert f'class="badge col-{column}"' in pages[-1], column
        while "human" not in json.dumps(_next_event(lines, "cards")):
            pass  # until the board has heard of the second run's end
        # the blocked page's stream opens only after that: it is told on opening
        found = re.search(r'data-version="(\d+)"', pages[0])
        assert found is not None
        url = f"{server.base}/events?ticket=t-1&since={found.group(1)}"
        with httpx.stream("GET", url, timeout=10) as events:
            told = events.iter_lines()
            assert next(told).startswith("retry:")
            assert _next_event(told, "ticket") == {"type": "ticket"}


def test_open_hands_the_url_to_the_browser(
    demo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened = tmp_path / "opened.txt"
    browser = tmp_path / "browser.sh"
    browser.write_text(f'#!/bin/sh\necho "$1" > {opened}\n', encoding="utf-8")
    browser.chmod(0o755)
    monkeypatch.setenv("BROWSER", f"{browser} %s")  # what Python's webbrowser starts
    with ui_server(demo, "--open") as server:
        deadline = time.monotonic() + 10
        while not opened.is_file() and time.monotonic() < deadline:
            time.sleep(0.05)
    assert opened.read_text(encoding="utf-8").strip() == server.url


def test_a_bad_port_is_bad_input(demo: Path) -> None:
    from tests.conftest import run_cli

    done = run_cli("--root", str(demo), "ui", "--port", "70000")
    assert done.returncode == 2 and "--port 70000" in done.stderr


def test_a_new_tk_file_reaches_an_open_event_stream(project: Path) -> None:
    root = demo_project(project / "p")
    with (
        ui_server(root) as server,
        httpx.stream("GET", server.base + "/events", timeout=20) as events,
    ):
        lines = events.iter_lines()
        assert next(lines).startswith("retry:")
        (root / ".tickets/new-1.md").write_text(tk_ticket("new-1", title="Fresh"), "utf-8")
        message = _next_event(lines, "cards")
    (card,) = [c for c in message["cards"] if c["id"] == "new-1"]
    assert card["column"] == "ready" and "Fresh" in card["html"]
    assert "2</b>" in message["totals"] or "/2 closed" in message["totals"]


def _tags(html: str) -> list[tuple[str, list[tuple[str, str | None]]]]:
    """Every real tag of `html` and its attributes, as a browser's parser finds them."""
    from html.parser import HTMLParser

    found: list[tuple[str, list[tuple[str, str | None]]]] = []

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found.append((tag, attrs))

    Collect().feed(html)
    return found


def _next_event(lines: object, kind: str) -> dict[str, object]:
    """The data of the next server-sent event of type `kind`."""
    current = None
    for line in lines:  # type: ignore[attr-defined]
        if line.startswith("event: "):
            current = line[len("event: ") :]
        elif line.startswith("data: ") and current == kind:
            return json.loads(line[len("data: ") :])  # type: ignore[no-any-return]
    raise AssertionError(f"the stream ended before a {kind} event")
