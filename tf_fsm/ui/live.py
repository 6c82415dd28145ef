"""Live updates: file events in (the observer `tf-fsm watch` uses), messages out to every open
page over server-sent events.

The observer thread only notes which tickets changed. One task on the server's event loop
then refreshes the board once for all of them and reads each changed log once, whatever the
number of pages open: a page gets the cards that moved and the lines a log gained."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tf_fsm.storage.ticket_id import TICKET_ID_RE
from tf_fsm.ui.board import Board
from tf_fsm.ui.page import LogTail

#: how long a burst of file events is gathered before the board is refreshed (a phase writes
#: several files at once); well inside the one second a change may take to reach a page
GATHER_SECONDS = 0.1
#: a comment line sent this often keeps proxies and the browser from closing a quiet stream
KEEPALIVE_SECONDS = 15.0
#: messages a slow page may fall behind by before it is told to reload
QUEUE_LIMIT = 256


@dataclass(eq=False)  # each page is its own listener (hashed by identity)
class Listener:
    ticket: str | None  # a ticket's page listens for its ticket too
    queue: asyncio.Queue[dict[str, Any] | None] = field(
        default_factory=lambda: asyncio.Queue(QUEUE_LIMIT)
    )


@dataclass
class _Changes:
    tk: bool = False
    tickets: set[str] = field(default_factory=set)
    logs: dict[str, str] = field(default_factory=dict)  # ticket -> log name changed last


class Hub:
    """Between the observer thread and the pages. `render_cards` makes the messages of the
    cards that changed; `read_log(ticket, name, start)` reads a log's new lines."""

    def __init__(
        self,
        board: Board,
        render_cards: Callable[[list[str]], dict[str, Any]],
        read_log: Callable[[str, str, int | None], LogTail | None],
    ) -> None:
        self.board, self.render_cards, self.read_log = board, render_cards, read_log
        self.listeners: set[Listener] = set()
        self.tails: dict[str, tuple[str, int]] = {}  # ticket -> (log name, bytes sent up to)
        self._changes = _Changes()
        self._lock = threading.Lock()
        self._wake = asyncio.Event()
        self.loop = asyncio.get_running_loop()
        self.problems: list[str] = []

    # -- the observer thread -------------------------------------------------------------------

    def on_path(self, path: Path) -> None:
        """A file changed: under `.tickets/` (a tk file) or a ticket's state directory."""
        board = self.board
        with self._lock:
            if path.parent == board.tickets_dir and path.suffix == ".md":
                self._changes.tk = True
            elif board.state_dir in path.parents:
                parts = path.relative_to(board.state_dir).parts
                if not TICKET_ID_RE.fullmatch(parts[0]):
                    return
                if parts[1:2] == ("logs",) and path.suffix == ".log":
                    self._changes.logs[parts[0]] = "/".join(parts[1:])
                else:
                    self._changes.tickets.add(parts[0])
            else:
                return
        self.loop.call_soon_threadsafe(self._wake.set)

    def on_error(self, problem: str) -> None:
        """What the observer thread or a refresh raised: said on stderr and listed on the
        board (its last few)."""
        print(f"tf-fsm ui: live updates: {problem}", file=sys.stderr, flush=True)
        self.problems.append(problem)

    # -- the event loop --------------------------------------------------------------------------

    async def run(self) -> None:
        """Forever: wait for changes, gather a burst, publish it."""
        while True:
            await self._wake.wait()
            await asyncio.sleep(GATHER_SECONDS)
            self._wake.clear()
            with self._lock:
                changes, self._changes = self._changes, _Changes()
            try:
                await self.publish(changes)
            except Exception as exc:  # the live updates must outlive one bad refresh
                self.on_error(f"{type(exc).__name__}: {exc}")

    async def publish(self, changes: _Changes) -> None:
        board = self.board
        if changes.tk:
            await asyncio.to_thread(board.rescan)
        elif changes.tickets:
            await asyncio.to_thread(board.refresh, changes.tickets)
        moved = board.take_changed()
        if moved:
            self.send(None, {"type": "cards", **await asyncio.to_thread(self.render_cards, moved)})
        for ticket in changes.tickets | set(moved):
            self.send(ticket, {"type": "ticket"})
        for ticket, name in changes.logs.items():
            if any(listener.ticket == ticket for listener in self.listeners):
                await self._send_log(ticket, name)

    async def _send_log(self, ticket: str, name: str) -> None:
        """The lines `name` gained since they were last sent; a log the page does not show
        yet (a new phase, a new attempt) is sent from its tail, marked `reset`."""
        shown, upto = self.tails.get(ticket, (None, 0))
        start = upto if name == shown else None
        tail = await asyncio.to_thread(self.read_log, ticket, name, start)
        if tail is None or (name == shown and tail.size == upto):
            return
        self.tails[ticket] = (name, tail.size)
        since = upto if name == shown else 0
        message = {"type": "log", "name": name, "from": since, "to": tail.size, "text": tail.text}
        self.send(ticket, {**message, "reset": name != shown})

    def send(self, ticket: str | None, message: dict[str, Any]) -> None:
        """To every page (ticket None) or to the pages of `ticket`."""
        for listener in list(self.listeners):
            if ticket is None or listener.ticket == ticket:
                try:
                    listener.queue.put_nowait(message)
                except asyncio.QueueFull:  # too far behind: the page reloads itself
                    while not listener.queue.empty():
                        listener.queue.get_nowait()
                    listener.queue.put_nowait({"type": "reload"})

    def follow(self, ticket: str, name: str | None, upto: int) -> None:
        """A ticket page shows `name` up to byte `upto`: later lines are sent from there."""
        if name is not None and ticket not in self.tails:
            self.tails[ticket] = (name, upto)

    async def stream(self, listener: Listener, closing: asyncio.Event) -> AsyncIterator[str]:
        """The server-sent events of one page, until it goes or the server stops."""
        self.listeners.add(listener)
        try:
            yield "retry: 1000\n\n"
            while not closing.is_set():
                get = asyncio.ensure_future(listener.queue.get())
                stop = asyncio.ensure_future(closing.wait())
                done, _ = await asyncio.wait(
                    {get, stop}, timeout=KEEPALIVE_SECONDS, return_when=asyncio.FIRST_COMPLETED
                )
                stop.cancel()
                if get not in done:
                    get.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await get
                    yield ": keepalive\n\n"
                    continue
                message = get.result()
                if message is None:
                    return
                yield f"event: {message['type']}\ndata: {json.dumps(message)}\n\n"
        finally:
            self.listeners.discard(listener)
