"""The board's web application (Starlette): the pages, their fragments, the live stream and,
with `--allow-actions`, the actions (tf_fsm.ui.work). Read-only otherwise: nothing here writes
a file."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

from tf_fsm.errors import TfFsmError
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.backends import open_store
from tf_fsm.storage.ticket_id import TICKET_ID_RE
from tf_fsm.ui.actions import Actions
from tf_fsm.ui.board import Board, Elsewhere, Snapshot
from tf_fsm.ui.cards import COLUMNS
from tf_fsm.ui.edit import Editing
from tf_fsm.ui.favicon import ROUTES as FAVICON_ROUTES
from tf_fsm.ui.filters import COLUMN_CAP, EMPTY_NOTES, PAGE_CARDS, Change, Columns, Filter, Shown
from tf_fsm.ui.live import Hub, Listener
from tf_fsm.ui.page import LogTail, neighbours, newest_log, read_tail, ticket_page
from tf_fsm.ui.work import Work
from tf_fsm.views.file_events import observe

HERE = Path(__file__).parent
#: a log that grew more than this between two reads is sent as its tail, marked `reset`
LOG_MESSAGE_BYTES = 64 * 1024


@dataclass
class Options:
    root: Path
    settings: LoadedSettings
    allow_actions: bool = False
    token: str | None = None
    elsewhere: Elsewhere | None = None  # `ui --temporal`: the cluster's workflows


def templates() -> Environment:
    """The board's own templates (package files, not the project's), HTML-escaped."""
    env = Environment(
        loader=FileSystemLoader(HERE / "templates"),
        autoescape=select_autoescape(default=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["money"] = lambda v: "-" if v is None else f"${v:,.2f}"
    return env


class BoardApp:
    """The routes, over one board, one hub and one set of actions."""

    def __init__(self, options: Options, board: Board | None = None) -> None:
        self.options = options
        self.board = board or Board(options.root, options.settings, options.elsewhere)
        self.env = templates()
        self.csrf = secrets.token_urlsafe(24)  # actions must send it back in a header
        self.actions = Actions(options.root)
        self.work = Work(self)
        self.closing = asyncio.Event()
        self.hub: Hub | None = None
        self.editing = Editing(self)  # the forms: create, edit, answer a hand-off

    # -- pages -----------------------------------------------------------------------------

    def board_html(self, board_filter: Filter | None = None, fragment: bool | None = False) -> str:
        """The board as the files are now: a rescan (a stat per unchanged file) and a render,
        each column's first PAGE_CARDS cards (`fragment`: the columns alone). No filter: the
        whole board (what benchmarks/bench_ui.py times)."""
        board_filter = board_filter or Filter()
        self.board.rescan()
        snap, columns = self.board.view(board_filter)
        name = "columns.html" if fragment else "board.html"
        return self.env.get_template(name).render(
            columns=self._columns(columns),
            version=snap.version,
            totals=snap.totals,
            tags=snap.tags,
            assignees=snap.assignees,
            filter=board_filter,
            problems=snap.problems + (self.hub.problems[-5:] if self.hub else []),
            root=self.options.root,
            editing=self.editing.board_context(),
        )

    @staticmethod
    def _columns(columns: Columns) -> list[dict[str, Any]]:
        return [
            {
                "key": key,
                "title": title,
                "cards": columns[key][:PAGE_CARDS],
                "count": len(columns[key]),
                "cap": COLUMN_CAP,
                "empty": EMPTY_NOTES[key],
            }
            for key, title in COLUMNS
        ]

    async def board_page(self, request: Request) -> Response:
        board_filter = Filter.of(request.query_params)
        fragment = request.url.path == "/columns"
        return HTMLResponse(await run_in_threadpool(self.board_html, board_filter, fragment))

    async def column_cards(self, request: Request) -> Response:
        """The next cards of a column ("show more"): from `offset`, at most PAGE_CARDS, never
        past the column's cap, under the page's filter."""
        key = str(request.path_params["column"])
        if key not in EMPTY_NOTES:
            raise _NotFound(f"no column {key!r}")
        try:
            offset = max(0, int(request.query_params.get("offset", "0")))
        except ValueError:
            return Response("offset: not a number\n", 400, media_type="text/plain")
        _, columns = self.board.view(Filter.of(request.query_params))
        cards = columns[key][offset : min(offset + PAGE_CARDS, COLUMN_CAP)]
        card = self.env.get_template("card.html")
        return HTMLResponse("".join(card.render(card=c) for c in cards))

    def render_cards(self, snap: Snapshot, changes: list[Change], shown: Shown) -> dict[str, Any]:
        """The body of a `cards` message: each changed card (its column, the card it follows,
        its HTML; no column: off the page), each column's count, the header, the version."""
        card = self.env.get_template("card.html")
        out = [
            {
                "id": change.id,
                "column": change.card.column if change.card else None,
                "after": change.after,
                "html": card.render(card=change.card) if change.card else "",
            }
            for change in changes
        ]
        totals = self.env.get_template("totals.html").render(totals=snap.totals)
        return {"cards": out, "counts": shown.counts, "totals": totals, "version": shown.version}

    def _ticket(self, request: Request) -> str:
        tid = str(request.path_params["ticket"])
        if not TICKET_ID_RE.fullmatch(tid):
            raise _NotFound(f"not a ticket id: {tid!r}")
        return tid

    async def ticket(self, request: Request) -> Response:
        tid = self._ticket(request)
        # the card as the files are now (the live updates refresh it only after a burst of
        # file events): else a page loaded just after a change would show the one before
        await run_in_threadpool(self.board.refresh, {tid})
        snap = self.board.snapshot
        data = await run_in_threadpool(ticket_page, self.options.root, self.options.settings, tid)
        card = snap.cards.get(tid)
        data["before"], data["after"] = neighbours(snap.cards, tid)
        if self.hub is not None and data["log"] is not None:
            self.hub.follow(tid, data["log"].name, data["log"].size)
        name = "panel.html" if request.url.path.endswith("/panel") else "ticket.html"
        view = data["view"]
        editing = await run_in_threadpool(self.editing.ticket_context, tid, view)
        work = await run_in_threadpool(self.work.view, tid, view) if name == "ticket.html" else None
        html = self.env.get_template(name).render(
            page=data, card=card, work=work, csrf=self.csrf, editing=editing, version=snap.version
        )
        return HTMLResponse(html)

    async def diagram(self, request: Request) -> Response:
        tid = self._ticket(request)
        body = await run_in_threadpool(self._diagram, tid)
        return Response(body, media_type="image/svg+xml")

    def _diagram(self, tid: str) -> bytes:
        """The ticket's path; a ticket never run has none yet: the lifecycle, nothing taken."""
        from tf_fsm.errors import TicketError
        from tf_fsm.tk.tickets import read
        from tf_fsm.ui.diagram import svg
        from tf_fsm.views.history import History, load_history

        try:
            history, _ = load_history(self.options.root, tid)
        except TicketError:
            read(self.options.root, tid)  # no ticket at all: not found
            history = History(tid)
        return svg(history)

    async def log(self, request: Request) -> Response:
        """The newest log's tail, for a page that fell out of step with the stream."""
        tid = self._ticket(request)
        tail = await run_in_threadpool(self.read_log, tid, None, None)
        if tail is None:
            return JSONResponse({"name": None, "text": "", "size": 0})
        return JSONResponse({"name": tail.name, "text": tail.text, "size": tail.size})

    def read_log(self, tid: str, name: str | None, start: int | None) -> LogTail | None:
        store = open_store(self.options.root, self.options.settings, tid)
        name = name or newest_log(store)
        return read_tail(store, name, start) if name else None

    def read_log_since(self, tid: str, name: str, start: int | None) -> tuple[LogTail | None, bool]:
        """The log from `start`, or its tail when it grew more than LOG_MESSAGE_BYTES since
        (then True: the page starts over from that tail)."""
        if start is not None:
            store = open_store(self.options.root, self.options.settings, tid)
            with contextlib.suppress(OSError, TfFsmError):  # gone or refused: read_tail says
                if store.files.path(name).stat().st_size - start > LOG_MESSAGE_BYTES:
                    return self.read_log(tid, name, None), True
        return self.read_log(tid, name, start), False

    async def events(self, request: Request) -> Response:
        if self.hub is None:
            return Response("not started", status_code=503)
        ticket = request.query_params.get("ticket")
        if ticket is not None and not TICKET_ID_RE.fullmatch(ticket):
            raise _NotFound(f"not a ticket id: {ticket!r}")
        listener = Listener(ticket)
        since = request.query_params.get("since", "")  # the version its page was rendered from
        listener.since = int(since) if since.isdigit() else None
        if ticket is None:  # a board: the changes under its filter
            listener.board = Filter.of(request.query_params)
        stream = self.hub.stream(listener, self.closing)
        headers = {"X-Accel-Buffering": "no"}
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)

    # -- the application --------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self.hub = Hub(self.board, self.render_cards, self.read_log_since)
        observer = observe(
            [self.board.tickets_dir, self.board.state_dir], self.hub.on_path, self.hub.on_error
        )
        pump = asyncio.create_task(self.hub.run())
        try:
            yield
        finally:
            self.closing.set()
            pump.cancel()
            observer.stop()
            observer.join(5)
            self.actions.stop()

    def app(self) -> Compressed:
        routes = [
            Route("/", self.board_page),
            Route("/columns", self.board_page),
            Route("/column/{column}", self.column_cards),
            Route("/events", self.events),
            Route("/ticket/{ticket}", self.ticket),
            Route("/ticket/{ticket}/panel", self.ticket),
            Route("/ticket/{ticket}/diagram.svg", self.diagram),
            Route("/ticket/{ticket}/log", self.log),
            *self.editing.routes(),
            *self.work.routes(),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
            *FAVICON_ROUTES,
        ]
        handlers = {_NotFound: _not_found, TfFsmError: _not_found}  # e.g. no such ticket
        app = Starlette(routes=routes, lifespan=self.lifespan, exception_handlers=handlers)
        return Compressed(app)


class Compressed:
    """gzip for every response but the event stream, which must reach the page message by
    message (a compressor holds small writes back); decided here, not by the installed
    Starlette's own list of content types it leaves alone."""

    def __init__(self, app: Starlette) -> None:
        from starlette.middleware.gzip import GZipMiddleware

        self.app, self.gzip = app, GZipMiddleware(app, minimum_size=512)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        plain = scope["type"] != "http" or scope.get("path") == "/events"
        await (self.app if plain else self.gzip)(scope, receive, send)


class _NotFound(Exception):
    pass


async def _not_found(request: Request, exc: Exception) -> Response:
    """A ticket that does not exist is 404; any other refusal of tf_fsm's (a corrupt state
    file, a symlink out of the project) is 500 with its message, as the CLI would print it."""
    from tf_fsm.errors import TicketError

    status = 404 if isinstance(exc, _NotFound | TicketError) else 500
    return Response(f"tf-fsm ui: {exc}\n", status_code=status, media_type="text/plain")
