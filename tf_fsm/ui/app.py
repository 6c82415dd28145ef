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

from tf_fsm.errors import TfFsmError
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.backends import open_store
from tf_fsm.storage.ticket_id import TICKET_ID_RE
from tf_fsm.ui.actions import Actions
from tf_fsm.ui.board import Board, Elsewhere, filtered
from tf_fsm.ui.cards import COLUMNS
from tf_fsm.ui.live import Hub, Listener
from tf_fsm.ui.page import LogTail, newest_log, read_tail, ticket_page
from tf_fsm.ui.work import Work
from tf_fsm.views.file_events import observe

HERE = Path(__file__).parent
#: cards a column shows before "and N more" (a filter narrows it)
COLUMN_CAP = 200


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

    # -- pages -----------------------------------------------------------------------------

    def board_html(self, tag: str | None, assignee: str | None) -> str:
        """The board as the files are now: a rescan (a stat per unchanged file) and a render."""
        self.board.rescan()
        snap = self.board.snapshot
        cards = filtered(snap.cards, tag, assignee)
        columns = [(key, title, [c for c in cards if c.column == key]) for key, title in COLUMNS]
        return self.env.get_template("board.html").render(
            columns=columns,
            cap=COLUMN_CAP,
            totals=snap.totals,
            tags=snap.tags,
            assignees=snap.assignees,
            tag=tag or "",
            assignee=assignee or "",
            problems=snap.problems + (self.hub.problems[-5:] if self.hub else []),
            root=self.options.root,
        )

    async def board_page(self, request: Request) -> Response:
        tag = request.query_params.get("tag") or None
        assignee = request.query_params.get("assignee") or None
        return HTMLResponse(await run_in_threadpool(self.board_html, tag, assignee))

    def render_cards(self, ids: list[str]) -> dict[str, Any]:
        """The live message of cards that changed: each card's column and HTML, the header."""
        snap, card = self.board.snapshot, self.env.get_template("card.html")
        out = []
        for tid in ids:
            c = snap.cards.get(tid)
            html = card.render(card=c) if c else ""
            tags, who = (list(c.tags), c.assignee) if c else ([], "")
            column = c.column if c else None
            out.append({"id": tid, "column": column, "html": html, "tags": tags, "assignee": who})
        totals = self.env.get_template("totals.html").render(totals=snap.totals)
        return {"cards": out, "totals": totals}

    def _ticket(self, request: Request) -> str:
        tid = str(request.path_params["ticket"])
        if not TICKET_ID_RE.fullmatch(tid):
            raise _NotFound(f"not a ticket id: {tid!r}")
        return tid

    async def ticket(self, request: Request) -> Response:
        tid = self._ticket(request)
        data = await run_in_threadpool(ticket_page, self.options.root, self.options.settings, tid)
        card = self.board.snapshot.cards.get(tid)
        if self.hub is not None and data["log"] is not None:
            self.hub.follow(tid, data["log"].name, data["log"].size)
        name = "panel.html" if request.url.path.endswith("/panel") else "ticket.html"
        work = await run_in_threadpool(self.work.view, tid) if name == "ticket.html" else None
        html = self.env.get_template(name).render(page=data, card=card, work=work, csrf=self.csrf)
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

    async def events(self, request: Request) -> Response:
        if self.hub is None:
            return Response("not started", status_code=503)
        ticket = request.query_params.get("ticket")
        if ticket is not None and not TICKET_ID_RE.fullmatch(ticket):
            raise _NotFound(f"not a ticket id: {ticket!r}")
        stream = self.hub.stream(Listener(ticket), self.closing)
        headers = {"X-Accel-Buffering": "no"}
        return StreamingResponse(stream, media_type="text/event-stream", headers=headers)

    # -- the application --------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        self.hub = Hub(self.board, self.render_cards, self.read_log)
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

    def app(self) -> Starlette:
        routes = [
            Route("/", self.board_page),
            Route("/events", self.events),
            Route("/ticket/{ticket}", self.ticket),
            Route("/ticket/{ticket}/panel", self.ticket),
            Route("/ticket/{ticket}/diagram.svg", self.diagram),
            Route("/ticket/{ticket}/log", self.log),
            *self.work.routes(),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ]
        handlers = {_NotFound: _not_found, TfFsmError: _not_found}  # e.g. no such ticket
        return Starlette(routes=routes, lifespan=self.lifespan, exception_handlers=handlers)


class _NotFound(Exception):
    pass


async def _not_found(request: Request, exc: Exception) -> Response:
    """A ticket that does not exist is 404; any other refusal of tf_fsm's (a corrupt state
    file, a symlink out of the project) is 500 with its message, as the CLI would print it."""
    from tf_fsm.errors import TicketError

    status = 404 if isinstance(exc, _NotFound | TicketError) else 500
    return Response(f"tf-fsm ui: {exc}\n", status_code=status, media_type="text/plain")
