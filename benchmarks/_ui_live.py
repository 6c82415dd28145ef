"""The live half of the web board's benchmark (bench_ui.py): a change on disk to the card in
its new column in Debian's chromium, the size of the events the board's stream sends meanwhile,
and the server's memory under clients that never read."""

from __future__ import annotations

import os
import socket
import statistics
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from _budget import budget, ms
from _ui_backlog import ticket_text, ui_server
from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

DOM_LIMIT = 1.0
#: the first change after start against the later ones (a page load must not queue cards)
FIRST_RATIO = 1.5
EVENT_LIMIT = 64 * 1024
MEMORY_LIMIT_MB = 150.0
SLOW_CLIENTS = 100
LOG_GROWTH = 12 * 1024 * 1024
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]  # fmt: skip


class Seen(FileSystemEventHandler):
    """When the watchdog observer saw each tk file land (an atomic rename's destination)."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self.lock = threading.Lock()

    def on_moved(self, event: FileSystemEvent) -> None:
        with self.lock:
            self.times.setdefault(os.fsdecode(event.dest_path), []).append(time.monotonic())

    def after(self, path: Path, start: float, timeout: float = 5.0) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                later = [t for t in self.times.get(str(path), []) if t >= start]
            if later:
                return later[0] - start
            time.sleep(0.001)
        raise SystemExit(f"watchdog saw no rename onto {path} within {timeout:.0f} s")


class EventSizes:
    """A client of the board's stream (no filter) that records each event's size in bytes."""

    def __init__(self, url: str) -> None:
        import httpx

        self.sizes: list[int] = []
        self.client = httpx.Client(timeout=60)
        self.thread = threading.Thread(target=self._read, args=(url,), daemon=True)
        self.thread.start()

    def _read(self, url: str) -> None:
        size = 0
        try:
            with self.client.stream("GET", url) as response:
                for line in response.iter_lines():
                    if line:
                        size += len(line.encode()) + 1
                    elif size:
                        self.sizes.append(size + 1)
                        size = 0
        except Exception:  # the client is closed when the benchmark is done with it
            return

    def close(self) -> None:
        self.client.close()


def replace(path: Path, text: str) -> float:
    """Writes `path` by rename (as tk and editors do); the monotonic time just before."""
    tmp = path.with_name(f".{path.name}.bench")
    start = time.monotonic()
    tmp.write_text(text)
    tmp.replace(path)
    return start


def browser_latency(root: Path, ticket: str, flips: int) -> None:
    name = "change on disk -> DOM updated"
    if not CHROMIUM.exists():
        print(f"SKIP  {name}: no chromium at {CHROMIUM}")
        return
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        print(f"SKIP  {name}: Playwright for Python is not installed")
        return
    seen, observer = Seen(), Observer()
    observer.schedule(seen, str(root / ".tickets"))
    observer.start()
    try:
        with ui_server(root) as served, sync_playwright() as pw:
            events = EventSizes(served.url.rstrip("/") + "/events")
            browser = pw.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
            )
            # the board's CSP forbids eval, which Playwright's polled predicates use
            page = browser.new_page(bypass_csp=True)
            page.goto(served.url)
            page.wait_for_function("document.getElementById('live').textContent === 'live'")
            path = root / ".tickets" / f"{ticket}.md"
            dom, inotify = flip_cards(page, path, seen, flips)
            browser.close()
            events.close()
    finally:
        observer.stop()
        observer.join()
    first, later = dom[0], dom[1:]
    med, base = statistics.median(later), statistics.median(inotify)
    print(
        f"write -> card in its new column: first change {ms(first)}; later median {ms(med)}, "
        f"max {ms(max(later))} over {len(later)}; baseline: write -> watchdog event "
        f"{ms(base)} (median); ratio {med / base:.0f}"
    )
    detail = f"median {ms(med)}, max {ms(max(later))} (budget median <= {ms(DOM_LIMIT)})"
    budget(name, med, DOM_LIMIT, detail)
    limit = FIRST_RATIO * med
    detail = f"{ms(first)} against the later ones' median {ms(med)} (budget <= {FIRST_RATIO}x)"
    budget("the first change after start", first, limit, detail)
    largest = max(events.sizes, default=0)
    detail = (
        f"{largest / 1024:.1f} KB of {len(events.sizes)} events, "
        f"{sum(events.sizes) / 1024:.0f} KB in all (budget <= {EVENT_LIMIT // 1024} KB)"
    )
    budget("the largest event of the board's stream", largest, EVENT_LIMIT, detail)


def flip_cards(page: Any, path: Path, seen: Seen, flips: int) -> tuple[list[float], list[float]]:
    """`flips` writes of the tk file at `path`, closed and open in turn: (write -> the card in
    its new column, write -> watchdog's event), in seconds."""
    dom: list[float] = []
    inotify: list[float] = []
    for i in range(flips):
        status, column = ("closed", "closed") if i % 2 == 0 else ("open", "ready")
        start = replace(path, ticket_text(path.stem, status, priority=0))
        page.wait_for_function(
            f"document.querySelector('#col-{column} #card-{path.stem}') !== null",
            polling="raf",
            timeout=30_000,
        )
        dom.append(time.monotonic() - start)
        inotify.append(seen.after(path, start))
        time.sleep(0.05)  # the server's next burst starts from quiet
    return dom, inotify


def _never_reading(url: str, path: str) -> socket.socket:
    """A client that asks for `path` and then reads nothing (a small receive buffer, so the
    server's writes to it back up soon)."""
    parts = urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((parts.hostname or "127.0.0.1", parts.port or 80))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    return sock


def _grow(log: Path, tickets: list[Path]) -> None:
    """The log grows by LOG_GROWTH in 64 KiB appends while tk files change, a few a second."""
    chunk = ("agent: " + "x" * 120 + "\n").encode() * (64 * 1024 // 128)
    written = 0
    with log.open("ab") as out:
        while written < LOG_GROWTH:
            out.write(chunk)
            out.flush()
            written += len(chunk)
            if written % (1024 * 1024) < len(chunk) and tickets:
                path = tickets.pop()
                replace(path, ticket_text(path.stem, "closed"))
            time.sleep(0.005)


def slow_clients(root: Path) -> None:
    import httpx

    state = root / ".tf" / "knowledge" / "tickets"
    ticket = sorted(p.name for p in state.iterdir() if (p / "events.jsonl").exists())[0]
    log = state / ticket / "logs" / "attempt-9" / "bench-agent.live.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("agent: started\n")
    tickets = sorted((root / ".tickets").glob("*.md"))[-12:]
    with ui_server(root) as served, httpx.Client(timeout=120) as client:
        client.get(served.url).raise_for_status()
        idle = served.rss_mb()
        socks = [
            _never_reading(served.url, "/events" if n % 2 else f"/events?ticket={ticket}")
            for n in range(SLOW_CLIENTS)
        ]
        try:
            start = time.perf_counter()
            _grow(log, tickets)
            grown = time.perf_counter() - start
            time.sleep(2.0)  # the server's last bursts
            start = time.perf_counter()
            client.get(served.url).raise_for_status()
            page_s = time.perf_counter() - start
            peak, now = served.rss_mb(peak=True), served.rss_mb()
        finally:
            for sock in socks:
                sock.close()
    print(
        f"{SLOW_CLIENTS} clients that never read, the log of {ticket} grown by "
        f"{LOG_GROWTH // 2**20} MB in {grown:.1f} s and 12 tk files changed: server memory "
        f"{idle:.0f} MB idle, {now:.0f} MB after, peak {peak:.0f} MB; GET / then {ms(page_s)}"
    )
    detail = f"peak {peak:.0f} MB, {peak / idle:.1f}x idle (budget <= {MEMORY_LIMIT_MB:.0f} MB)"
    budget("server memory with slow clients", peak, MEMORY_LIMIT_MB, detail)
