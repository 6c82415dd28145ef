"""Working from the board: the routes of the actions (run now, stop, resume, reset retries,
merge; `--allow-actions` only, each the CLI itself through tf_fsm.ui.actions) and of a ticket's
diff (read-only).

The server, not the page, decides what may start: while a run holds the ticket only a stop
may (anything else would be refused the lock, or would run beside it), and a stop only while
one does: 409 with the reason otherwise. The page's buttons say the same, disabled in the HTML
as rendered (`view`) and again whenever the ticket changes (`GET /ticket/ID/actions`)."""

from __future__ import annotations

import contextlib
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from tf_fsm.ui.actions import ACTIONS, STOP, Actions
from tf_fsm.ui.board import Board
from tf_fsm.ui.live import Hub

if TYPE_CHECKING:
    from jinja2 import Environment

    from tf_fsm.core.ticket import TicketView
    from tf_fsm.settings.load import LoadedSettings

#: the header an action must carry, with the value the server put in the page
ACTION_HEADER = "x-tf-fsm-action"
#: states whose merge `tf-fsm merge` runs: waiting for it, or refused and fixed since
MERGE_FAILURES = ("merge_conflict", "merge_refused")


def refusal(request: Request, allowed: bool, csrf: str) -> Response | None:
    """Why the board refuses a write (403 read-only, 400 without the action header), or None:
    every action and form asks this first."""
    if not allowed:
        return JSONResponse({"error": "read-only: start tf-fsm ui --allow-actions"}, 403)
    if not secrets.compare_digest(request.headers.get(ACTION_HEADER, ""), csrf):
        return JSONResponse({"error": "unknown action or missing action header"}, 400)
    return None


class _Options(Protocol):
    @property
    def root(self) -> Path: ...
    @property
    def settings(self) -> LoadedSettings: ...
    @property
    def allow_actions(self) -> bool: ...


class BoardApp(Protocol):
    """What the actions use of the board's application (tf_fsm.ui.app.BoardApp)."""

    @property
    def options(self) -> _Options: ...

    board: Board
    actions: Actions
    env: Environment
    csrf: str
    hub: Hub | None

    def _ticket(self, request: Request) -> str: ...


class Work:
    def __init__(self, board: BoardApp) -> None:
        self.board = board

    def routes(self) -> list[Route]:
        return [
            Route("/ticket/{ticket}/action/{action}", self.action, methods=["POST"]),
            Route("/ticket/{ticket}/actions", self.actions),
            Route("/ticket/{ticket}/diff", self.diff),
        ]

    # -- what the buttons say ------------------------------------------------------------------

    def view(self, tid: str, view: TicketView | None = None) -> dict[str, Any] | None:
        """The action buttons' state for `tid` (`view`: its read model, when the page read it
        already); None on a read-only board (no buttons)."""
        if not self.board.options.allow_actions:
            return None
        held = self.board.board.held(tid)
        return {
            "held": held,
            "busy": self.board.actions.busy(tid),
            "merge": self._merge_label(tid, view),
        }

    def _merge_label(self, tid: str, view: TicketView | None) -> str | None:
        """The merge button's words when `tf-fsm merge` applies to the ticket, else None."""
        from tf_fsm.core.machine import AWAITING_MERGE, ERROR
        from tf_fsm.errors import TfFsmError
        from tf_fsm.views.status import ticket_view

        options = self.board.options
        try:
            view = view or ticket_view(options.root, options.settings, tid)
        except TfFsmError:  # unreadable state: the page says why elsewhere
            return None
        if view.state == AWAITING_MERGE:
            return "merge"
        if view.state == ERROR and view.failure_class in MERGE_FAILURES:
            return "retry merge"
        return None

    async def actions(self, request: Request) -> Response:
        """The buttons alone, as the ticket is now (what the page fetches when it changes)."""
        tid = self.board._ticket(request)
        work = await run_in_threadpool(self.view, tid)
        if work is None:
            return Response(status_code=204)
        html = self.board.env.get_template("actions.html").render(work=work)
        return HTMLResponse(html)

    # -- starting one ---------------------------------------------------------------------------

    async def action(self, request: Request) -> Response:
        tid, name = self.board._ticket(request), str(request.path_params["action"])
        no = refusal(request, self.board.options.allow_actions, self.board.csrf)
        if no is not None:
            return no
        if name not in ACTIONS:
            return JSONResponse({"error": "unknown action or missing action header"}, 400)
        held = await run_in_threadpool(self.board.board.held, tid)
        if name == STOP and not held:
            return JSONResponse({"error": f"{tid}: no run holds it: nothing to stop"}, 409)
        if name != STOP and held:
            why = f"{tid}: a run holds it now: stop it first, or wait for it to end"
            return JSONResponse({"error": why}, 409)
        if not self.board.actions.start(tid, name, self.done):
            return JSONResponse({"error": f"{tid}: an action is already running"}, 409)
        self._send({"type": "action", "ticket": tid, "action": name, "state": "running"})
        return JSONResponse({"started": name, "ticket": tid}, 202)

    def done(self, tid: str, result: dict[str, Any]) -> None:
        """An action's end, called on its thread: handed to the event loop for the pages."""
        hub = self.board.hub
        if hub is not None:
            with contextlib.suppress(RuntimeError):  # the server stopped meanwhile
                hub.loop.call_soon_threadsafe(self._send, {"type": "action", **result})

    def _send(self, message: dict[str, Any]) -> None:
        if self.board.hub is not None:
            self.board.hub.send(None, message)

    # -- the diff ---------------------------------------------------------------------------------

    async def diff(self, request: Request) -> Response:
        from tf_fsm.ui.diff import NotADiff, ticket_diff

        tid = self.board._ticket(request)
        checkpoint = request.query_params.get("checkpoint")
        options = self.board.options
        try:
            diff = await run_in_threadpool(
                ticket_diff, options.root, options.settings, tid, checkpoint
            )
        except NotADiff as exc:
            return Response(f"tf-fsm ui: {exc}\n", status_code=404, media_type="text/plain")
        html = self.board.env.get_template("diff.html").render(diff=diff)
        return HTMLResponse(html)
