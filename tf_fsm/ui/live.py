"""Live updates: file events in (the observer `tf-fsm watch` uses), messages out to every open
page over server-sent events.

The observer thread only notes which tickets changed. One task on the server's event loop
then refreshes the board once for all of them and reads each changed log once, whatever the
number of pages open. A board gets, once per filter pages are open with, the cards that
changed among those its columns show and each column's true count (a change too large for
one event is a `resync`: the page fetches its columns again); a ticket's page hears that its
ticket changed and gets the lines its log gained. Every page's queue is bounded in bytes: a
page that falls further behind has its stream ended, and fetches what it shows again when it
reconnects."""

from __future__ import annotations

import asyncio
import json
import sys
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tf_fsm.storage.ticket_id import TICKET_ID_RE
from tf_fsm.ui.board import Board, Snapshot
from tf_fsm.ui.filters import Change, Filter, Shown, changes
from tf_fsm.ui.page import LogTail

#: how long a burst of file events is gathered before the board is refreshed (a phase writes
#: several files at once); well inside the one second a change may take to reach a page
GATHER_SECONDS = 0.1
#: a comment line sent this often keeps proxies and the browser from closing a quiet stream
KEEPALIVE_SECONDS = 15.0
#: bytes of messages a page may fall behind by before its stream is ended (it reconnects and
#: fetches what it shows again): a page that does not read costs the server this much at most
QUEUE_BYTES = 1 << 20
#: the largest `cards` message: a change that needs more is a `resync` (the page fetches its
#: columns again), never a giant event
EVENT_BYTES = 64 * 1024
EVENT_CARDS = 80


@dataclass(eq=False)  # each page is its own listener (hashed by identity)
class Listener:
    """One open page: a ticket's page (`ticket`) or a board (`board`: its filter); `since`: the
    board version the page was rendered from. Its queue holds encoded messages, bounded in bytes."""

    ticket: str | None
    board: Filter | None = None
    since: int | None = None
    queue: deque[str] = field(default_factory=deque)
    size: int = 0
    dropped: bool = False  # fell QUEUE_BYTES behind: its stream ends
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    def put(self, text: str) -> None:
        if self.dropped:
            return
        self.queue.append(text)
        self.size += len(text)
        if self.size > QUEUE_BYTES:
            self.dropped, self.size = True, 0
            self.queue.clear()
        self.wake.set()


def encode(message: dict[str, Any]) -> str:
    """A message as a server-sent event: its type is the event's name."""
    return f"event: {message['type']}\ndata: {json.dumps(message)}\n\n"


@dataclass
class _Changes:
    tk: bool = False
    tickets: set[str] = field(default_factory=set)
    logs: dict[str, str] = field(default_factory=dict)  # ticket -> log name changed last


class Hub:
    """Between the observer thread and the pages. `render_cards(snapshot, changes, shown)` makes
    the body of a `cards` message; `read_log(ticket, name, start)` reads a log's new lines (and
    whether it cut them to their tail, the log having grown too much at once)."""

    def __init__(
        self,
        board: Board,
        render_cards: Callable[[Snapshot, list[Change], Shown], dict[str, Any]],
        read_log: Callable[[str, str, int | None], tuple[LogTail | None, bool]],
    ) -> None:
        self.board, self.render_cards, self.read_log = board, render_cards, read_log
        self.listeners: set[Listener] = set()
        self.tails: dict[str, tuple[str, int]] = {}  # ticket -> (log name, bytes sent up to)
        snap, columns = board.view(Filter())
        #: what the boards of each filter were last told (the unfiltered board's always)
        self.shown: dict[Filter, Shown] = {Filter(): Shown.of(snap.version, columns)}
        self.cards = snap.cards  # the cards the ticket pages were last told of
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
        snap = board.snapshot  # compared with what was sent, not with the last refresh: a
        # page load's rescan may have seen a change first, and every page must still hear it
        messages = await asyncio.to_thread(self._board_messages, snap)
        for listener in list(self.listeners):
            text = messages.get(listener.board) if listener.board is not None else None
            if text is not None:
                self._put(listener, text)
        for ticket in changes.tickets | self._changed_cards(snap):
            self.send(ticket, {"type": "ticket"})
        for ticket, name in changes.logs.items():
            if any(listener.ticket == ticket for listener in self.listeners):
                await self._send_log(ticket, name)

    def _board_messages(self, snap: Snapshot) -> dict[Filter, str]:
        """Per filter a board is open with, the message that brings it to `snap` (on a worker
        thread: a filter is applied to the whole backlog)."""
        wanted = {Filter()} | {lis.board for lis in list(self.listeners) if lis.board is not None}
        out: dict[Filter, str] = {}
        for board_filter in wanted:
            old = self.shown.get(board_filter)
            if old is None or old.version == snap.version:
                continue  # a filter first seen: its page's stream set its baseline
            new = Shown.of(snap.version, board_filter.select(snap.columns, self.board.search))
            self.shown[board_filter] = new
            out[board_filter] = self._cards_message(snap, old, new)
        for gone in set(self.shown) - wanted:
            self.shown.pop(gone, None)
        return out

    def _cards_message(self, snap: Snapshot, old: Shown, new: Shown) -> str:
        """The cards that changed among those the pages show, each column's count and the
        header; a change too large for one event is a `resync`."""
        found = changes(old, new)
        resync = encode({"type": "resync", "version": new.version})
        if len(found) > EVENT_CARDS:
            return resync
        text = encode({"type": "cards", **self.render_cards(snap, found, new)})
        return resync if len(text) > EVENT_BYTES else text

    def _changed_cards(self, snap: Snapshot) -> set[str]:
        """The tickets whose card is not the one the ticket pages were last told of."""
        old, self.cards = self.cards, snap.cards
        changed = {tid for tid, card in snap.cards.items() if old.get(tid) is not card}
        return changed | old.keys() - snap.cards.keys()

    async def _send_log(self, ticket: str, name: str) -> None:
        """The lines `name` gained since they were last sent; a log the page does not show
        yet (a new phase, a new attempt) or one that grew too much at once is sent from its
        tail, marked `reset`."""
        shown, upto = self.tails.get(ticket, (None, 0))
        start = upto if name == shown else None
        tail, cut = await asyncio.to_thread(self.read_log, ticket, name, start)
        if tail is None or (start is not None and not cut and tail.size == upto):
            return
        self.tails[ticket] = (name, tail.size)
        reset = start is None or cut
        since = 0 if reset else upto
        message = {"type": "log", "name": name, "from": since, "to": tail.size, "text": tail.text}
        self.send(ticket, {**message, "reset": reset})

    def send(self, ticket: str | None, message: dict[str, Any]) -> None:
        """To every page (ticket None) or to the pages of `ticket`; encoded once for all."""
        text = encode(message)
        for listener in list(self.listeners):
            if ticket is None or listener.ticket == ticket:
                self._put(listener, text)

    def _put(self, listener: Listener, text: str) -> None:
        listener.put(text)
        if listener.dropped:  # too far behind: its stream ends, and it is told nothing more
            self.listeners.discard(listener)

    def follow(self, ticket: str, name: str | None, upto: int) -> None:
        """A ticket page shows `name` up to byte `upto`: later lines are sent from there."""
        if name is not None and ticket not in self.tails:
            self.tails[ticket] = (name, upto)

    async def stream(self, listener: Listener, closing: asyncio.Event) -> AsyncIterator[str]:
        """The server-sent events of one page, until it goes, falls too far behind, or the
        server stops."""
        self.listeners.add(listener)
        try:
            if listener.board is not None:
                await self._baseline(listener, listener.board)
            elif self._changed_since_page(listener):
                listener.put(encode({"type": "ticket"}))
            yield "retry: 1000\n\n"
            while (text := await self._next(listener, closing)) is not None:
                yield text
        finally:
            self.listeners.discard(listener)

    def _changed_since_page(self, listener: Listener) -> bool:
        """Whether a ticket page's card changed between its render and its stream: what was
        sent then did not reach it (asked with no await since it joined the listeners, so no
        change falls between the two)."""
        ticket, since = listener.ticket, listener.since
        return ticket is not None and since is not None and self.board.changed_since(ticket, since)

    async def _baseline(self, listener: Listener, board_filter: Filter) -> None:
        """A board's filter is followed from now on; a page rendered before the board's last
        change is told to fetch its columns again (`resync`)."""
        shown = self.shown.get(board_filter)
        if shown is None:
            snap, columns = await asyncio.to_thread(self.board.view, board_filter)
            shown = self.shown.setdefault(board_filter, Shown.of(snap.version, columns))
        if listener.since is not None and listener.since < shown.version:
            listener.put(encode({"type": "resync", "version": shown.version}))

    @staticmethod
    async def _next(listener: Listener, closing: asyncio.Event) -> str | None:
        """The listener's next message, a keepalive after a quiet while, None at its end."""
        while not (closing.is_set() or listener.dropped):
            if listener.queue:
                text = listener.queue.popleft()
                listener.size -= len(text)
                return text
            listener.wake.clear()
            wake = asyncio.ensure_future(listener.wake.wait())
            stop = asyncio.ensure_future(closing.wait())
            done, _ = await asyncio.wait(
                {wake, stop}, timeout=KEEPALIVE_SECONDS, return_when=asyncio.FIRST_COMPLETED
            )
            wake.cancel()
            stop.cancel()
            if not done:
                return ": keepalive\n\n"
        return None
