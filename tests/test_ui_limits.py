"""The board at 10,000 tickets, through a real `tf-fsm ui` process and httpx: what a change
sends (only the cards a page shows, bounded, a resync beyond), the true counts, the filters
and the search on the stream, the page's size and its compression, "show more", the closed
column's order, a log that grows by megabytes, redirects that stay on the board, and a page
too far behind that is dropped instead of growing the server."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import tk_ticket
from tests.ui_backlog import TAGS, big_ticket, replace, status_of, ticket_id, write_backlog
from tests.ui_server import Server, ui_server

COUNT = 10_000
EVENT_LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Server]]:
    root = write_backlog(tmp_path_factory.mktemp("big") / "p", COUNT)
    with ui_server(root) as server:
        yield root, server


def _events(lines: Iterator[str]) -> Iterator[tuple[str, dict[str, Any], int]]:
    """Each server-sent event: (type, data, size of its data line)."""
    kind = None
    for line in lines:
        if line.startswith("event: "):
            kind = line[len("event: ") :]
        elif line.startswith("data: ") and kind is not None:
            yield kind, json.loads(line[len("data: ") :]), len(line)


def _next(events: Iterator[tuple[str, dict[str, Any], int]], *kinds: str) -> tuple[str, Any, int]:
    for event in events:
        if event[0] in kinds:
            return event
    raise AssertionError(f"the stream ended before a {kinds} event")


def _true_counts(closed: set[int] = frozenset()) -> dict[str, int]:  # type: ignore[assignment]
    """Each column's count from the files: what the board must say."""
    counts = dict.fromkeys(("waiting", "ready", "running", "blocked", "human", "error"), 0)
    counts["closed"] = 0
    for n in range(COUNT):
        status = "closed" if n in closed else status_of(n)
        if status == "closed":
            counts["closed"] += 1
        elif n % 10 == 1 and status_of(n - 1) != "closed" and n - 1 not in closed:
            counts["waiting"] += 1
        else:
            counts["ready"] += 1
    return counts


def test_the_first_change_after_start_sends_only_what_changed(big: tuple[Path, Server]) -> None:
    root, server = big
    path = root / ".tickets" / f"{ticket_id(3)}.md"  # open, ready, nothing depends on it
    with httpx.stream("GET", server.base + "/events", timeout=30) as stream:
        events = _events(stream.iter_lines())
        replace(path, big_ticket(3, "closed"))
        kind, message, size = _next(events, "cards", "resync")
    replace(path, big_ticket(3, "open"))
    assert kind == "cards" and size < 8 * 1024, (kind, size)
    moved = [c for c in message["cards"] if c["id"] == ticket_id(3)]
    assert moved == [{**moved[0], "column": "closed", "after": None}]  # newest closed: first
    # the closed window's last card is pushed off the page; nothing else is sent
    assert len(message["cards"]) <= 3, [c["id"] for c in message["cards"]]
    assert message["counts"] == _true_counts({3})
    assert f"<b>{_true_counts({3})['closed']}</b>/{COUNT} closed" in message["totals"]


def test_the_board_is_a_fraction_and_compressed_and_the_stream_is_not(
    big: tuple[Path, Server],
) -> None:
    _, server = big
    page = httpx.get(server.base + "/")
    assert page.headers["content-encoding"] == "gzip"
    assert page.num_bytes_downloaded < 32 * 1024, page.num_bytes_downloaded
    html = page.text
    assert len(html) < 200 * 1024, len(html)  # 200 cards a column were 650 KB
    ready = html.split('id="col-ready"')[1].split("</section>")[0]
    assert ready.count('class="card ') == 50
    assert f'data-count="{_true_counts()["ready"]}"' in ready and "show more" in ready
    for name in ("live.js", "board.js", "ui.css"):
        asset = httpx.get(f"{server.base}/static/{name}")
        assert asset.headers.get("content-encoding") == "gzip", name
    with httpx.stream("GET", server.base + "/events", timeout=10) as stream:
        assert "content-encoding" not in stream.headers
        assert next(stream.iter_lines()).startswith("retry:")  # not held back by a compressor


def test_show_more_fetches_the_next_cards_up_to_the_cap(big: tuple[Path, Server]) -> None:
    _, server = big
    html = httpx.get(server.base + "/?tag=component:db").text
    shown = html.split('id="col-ready"')[1].split("</section>")[0].count('class="card ')
    more = httpx.get(server.base + "/column/ready?offset=50&tag=component:db").text
    last = httpx.get(server.base + "/column/ready?offset=190&tag=component:db").text
    ids = [part.split('"')[0] for part in more.split('id="card-')[1:]]
    assert shown == 50 and len(ids) == 50 and last.count('class="card ') == 10  # cap: 200
    assert all(int(i[3:]) % 3 == 1 for i in ids) and ids == sorted(ids)  # tk's order, db only
    assert httpx.get(server.base + "/column/nowhere").status_code == 404


def test_a_large_change_is_a_resync_and_the_columns_route_serves_it(
    big: tuple[Path, Server], tmp_path: Path
) -> None:
    root, server = big
    picked = [n for n in range(4000, 4900, 3) if status_of(n) == "open"][:250]
    staged = []
    for n in picked:  # written aside, then renamed in at once: one burst of 250 changes
        staged.append(tmp_path / f"{ticket_id(n)}.md")
        staged[-1].write_text(big_ticket(n, "closed"), encoding="utf-8")
    with httpx.stream("GET", server.base + "/events", timeout=30) as stream:
        events = _events(stream.iter_lines())
        for path in staged:
            path.replace(root / ".tickets" / path.name)
        kinds = []
        while "resync" not in kinds:
            kind, _, size = _next(events, "cards", "resync")
            assert size <= EVENT_LIMIT
            kinds.append(kind)
    for n in picked:
        replace(root / ".tickets" / f"{ticket_id(n)}.md", big_ticket(n, "open"))
    columns = httpx.get(server.base + "/columns").text
    assert columns.startswith('<div class="board"') and "<html" not in columns
    assert columns.count('class="card ') <= 7 * 50


def test_filters_and_search_narrow_the_stream(big: tuple[Path, Server]) -> None:
    root, server = big
    hit, miss = 5, 8  # bk-00005 (ui) holds the word searched for; bk-00008 does not
    q = "needle-in-a-haystack"
    hit_path = root / ".tickets" / f"{ticket_id(hit)}.md"
    replace(hit_path, big_ticket(hit, body=f"Find the {q.upper()} here."))
    board = httpx.get(server.base + f"/?q={q}&tag={TAGS[hit % 3]}").text
    assert board.count('class="card ') == 1 and f'id="card-{ticket_id(hit)}"' in board
    with httpx.stream("GET", f"{server.base}/events?q={q}", timeout=30) as stream:
        events = _events(stream.iter_lines())
        replace(root / ".tickets" / f"{ticket_id(miss)}.md", big_ticket(miss, "closed"))
        replace(hit_path, big_ticket(hit, "closed", body=f"Find the {q} here."))
        seen: list[dict[str, Any]] = []
        while not any(c["id"] == ticket_id(hit) for c in seen):
            _, message, _ = _next(events, "cards")
            seen += message["cards"]
            counts = message["counts"]
    for n in (hit, miss):
        replace(root / ".tickets" / f"{ticket_id(n)}.md", big_ticket(n, "open"))
    assert [c["id"] for c in seen] == [ticket_id(hit)] and seen[0]["column"] == "closed"
    assert counts == {**dict.fromkeys(counts, 0), "closed": 1}


def test_closed_tickets_newest_first_and_empty_columns_say_so(project: Path) -> None:
    tickets = project / ".tickets"
    tickets.mkdir()
    for n, tid in enumerate(("c-old", "c-new", "c-mid")):
        path = tickets / f"{tid}.md"
        path.write_text(tk_ticket(tid).replace("status: open", "status: closed"), "utf-8")
        stamp = 1_700_000_000 + {"c-old": 0, "c-new": 200, "c-mid": 100}[tid] + n
        import os

        os.utime(path, (stamp, stamp))
    with ui_server(project) as server:
        html = httpx.get(server.base + "/").text
    closed = html.split('id="col-closed"')[1].split("</section>")[0]
    order = [part.split('"')[0] for part in closed.split('id="card-')[1:]]
    assert order == ["c-new", "c-mid", "c-old"]
    running = html.split('id="col-running"')[1].split("</section>")[0]
    assert '<p class="empty">no ticket is running</p>' in running


def test_a_log_that_grows_by_megabytes_is_sent_as_a_capped_tail(project: Path) -> None:
    (project / ".tickets").mkdir()
    (project / ".tickets" / "lg-1.md").write_text(tk_ticket("lg-1"), "utf-8")
    logs = project / ".tf/knowledge/tickets/lg-1/logs/attempt-1"
    logs.mkdir(parents=True)
    log = logs / "implement.live.log"
    log.write_text("first line\n", encoding="utf-8")
    with ui_server(project) as server:
        assert httpx.get(server.base + "/ticket/lg-1").status_code == 200  # follows the log
        with httpx.stream("GET", server.base + "/events?ticket=lg-1", timeout=30) as stream:
            events = _events(stream.iter_lines())
            with log.open("a", encoding="utf-8") as handle:
                handle.write(("x" * 99 + "\n") * 120_000)  # 12 MB at once
            _, message, size = _next(events, "log")
    assert message["reset"] is True and message["to"] == log.stat().st_size
    assert size < 64 * 1024 and message["text"].endswith("x\n")


@pytest.mark.parametrize(
    "shape",
    ["//evil.example/x", "///evil.example/x", "/\\evil.example/x", "//evil.example",
     "/%2F%2Fevil.example/x", "/%0d%0aSet-Cookie:%20a=b"],
)  # fmt: skip
def test_the_token_redirect_stays_on_the_board(demo_root: Path, shape: str) -> None:
    with ui_server(demo_root, "--host", "0.0.0.0") as server:  # noqa: S104 - what is tested
        token = server.url.split("token=")[1]
        port = int(server.base.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(f"GET {shape}?token={token}&a=1 HTTP/1.1\r\nHost: x\r\n\r\n".encode())
            head = sock.recv(65536).decode("latin-1")
        via_httpx = httpx.get(f"http://127.0.0.1:{port}{shape}?token={token}")
    location = next(
        line.split(": ", 1)[1] for line in head.split("\r\n") if line.lower().startswith("location")
    )
    for where in (location, via_httpx.headers.get("location", "/")):
        assert where.startswith("/") and not where.startswith(("//", "/\\")), where
        assert "\r" not in where and "\n" not in where and where == where.strip()
    assert head.startswith("HTTP/1.1 303") and location.endswith("?a=1")
    assert httpx.URL(f"http://board.example{location}").host == "board.example"


@pytest.fixture(scope="module")
def demo_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("small") / "p"
    (root / ".tf" / "config").mkdir(parents=True)
    (root / ".tickets").mkdir()
    (root / ".tickets" / "d-1.md").write_text(tk_ticket("d-1"), "utf-8")
    return root


def test_a_page_too_far_behind_is_dropped_and_its_stream_ends(project: Path) -> None:
    from tf_fsm.settings.load import load_settings
    from tf_fsm.ui.app import BoardApp, Options
    from tf_fsm.ui.live import QUEUE_BYTES, Hub, Listener

    (project / ".tickets").mkdir()
    (project / ".tickets" / "q-1.md").write_text(tk_ticket("q-1"), "utf-8")
    board = BoardApp(Options(project, load_settings(project)))
    board.board.rescan()

    async def scenario() -> tuple[list[str], bool, int, bool]:
        hub = Hub(board.board, board.render_cards, board.read_log_since)
        slow, closing = Listener("q-1"), asyncio.Event()
        stream = hub.stream(slow, closing)
        first = [await anext(stream)]  # connected; then it reads nothing
        line = "y" * 1000
        for _ in range(QUEUE_BYTES // 1000 + 10):
            hub.send("q-1", {"type": "log", "text": line})
        held, gone = slow.size, slow not in hub.listeners
        rest = [text async for text in stream]  # ends: nothing of what was queued
        return first + rest, gone, held, slow.dropped

    texts, gone, held, dropped = asyncio.run(scenario())
    assert texts == ["retry: 1000\n\n"] and gone and dropped and held == 0
