"""The board's forms, with `--allow-actions`: create a ticket, edit a ticket's title,
description, tags, priority and dependencies (tf_fsm.engine.ticket_edit, the code path of
`tf-fsm tickets create|edit`, run in-process), and answer a hand-off: the prompt a phase waits
on, and its artifact written through the ticket's store.

Every post is JSON with the `X-TF-FSM-Action` header (the actions' CSRF token). Refusals: 403
read-only, 400 a field tk would not take (named), 404 no such ticket, 409 a run holds the
ticket, the file changed on disk since the form was filled, or the hand-off is no longer the
one the form answered. After a hand-off artifact is written the board runs `tf-fsm resume ID`
(as the resume action does) once the artifact has been quiet for `executor.stableSeconds`;
a process that holds the ticket by then (`tf-fsm watch`, a run) takes it instead."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from tf_fsm.errors import (
    TfFsmError,
    TicketChangedError,
    TicketError,
    TicketFieldError,
    TicketLockedError,
)
from tf_fsm.storage.backends import open_store
from tf_fsm.tk.authoring import content_hash, description_of
from tf_fsm.ui.markdown import to_html
from tf_fsm.ui.work import Work, refusal

if TYPE_CHECKING:
    from tf_fsm.core.ticket import TicketView
    from tf_fsm.storage.protocol import Store

#: how long after the artifact's quiet time the board resumes (the file's mtime is coarse)
RESUME_MARGIN = 0.3
#: the largest artifact or description a form may post
MAX_BODY = 1024 * 1024


def refused(exc: TfFsmError) -> Response:
    """A refusal of tf_fsm's as the forms' answer: the field named, 400; a conflict, 409."""
    if isinstance(exc, TicketFieldError):
        return JSONResponse({"error": exc.message, "field": exc.field}, 400)
    if isinstance(exc, TicketChangedError):
        return JSONResponse({"error": "changed on disk since you opened it: reload"}, 409)
    if isinstance(exc, TicketLockedError):
        return JSONResponse({"error": f"a run holds this ticket: {exc.message}"}, 409)
    missing = isinstance(exc, TicketError) and not exc.path.exists()
    return JSONResponse({"error": exc.message}, 404 if missing else 400)


class BoardParts(Protocol):
    """What the forms use of the board application (tf_fsm.ui.app.BoardApp)."""

    options: Any  # its Options: root, settings, allow_actions
    csrf: str
    env: Any  # its templates
    actions: Any  # its Actions: the resume a hand-off's answer starts
    work: Work  # whose `done` tells the pages how that resume ended

    def _ticket(self, request: Request) -> str: ...


class Editing:
    """The forms' routes, over the board application (its options, token and actions)."""

    def __init__(self, board: BoardParts) -> None:
        self.board = board
        self._assignee: str | None = None

    @property
    def root(self) -> Path:
        return Path(self.board.options.root)

    def routes(self) -> list[Route]:
        return [
            Route("/tickets", self.create, methods=["POST"]),
            Route("/ticket/{ticket}/fields", self.fields),
            Route("/ticket/{ticket}/edit", self.edit, methods=["POST"]),
            Route("/ticket/{ticket}/handoff", self.handoff_fragment),
            Route("/ticket/{ticket}/handoff", self.submit, methods=["POST"]),
        ]

    # -- what the pages show -----------------------------------------------------------------

    def board_context(self) -> dict[str, Any] | None:
        """The create form's context; None when the board is read-only."""
        if not self.board.options.allow_actions:
            return None
        if self._assignee is None:  # git is asked once, not on every render of the board
            from tf_fsm.engine.ticket_edit import default_assignee

            self._assignee = default_assignee(self.root)
        return {"csrf": self.board.csrf, "assignee": self._assignee}

    def ticket_context(self, tid: str, view: TicketView | None = None) -> dict[str, Any]:
        """The ticket page's part: the hand-off it waits for, and whether the forms show
        (`view`: the ticket's read model, when the page read it already)."""
        allowed = self.board.options.allow_actions
        store = open_store(self.root, self.board.options.settings, tid)
        return {
            "allowed": allowed,
            "csrf": self.board.csrf,
            "held": store.lock_holder(),
            "handoff": self.waiting(tid, store, view),
        }

    def waiting(
        self, tid: str, store: Store | None = None, view: TicketView | None = None
    ) -> dict[str, Any] | None:
        """The hand-off the ticket waits for: the artifact's name, its prompt (sanitized as
        every artifact is), whether the artifact is there already. None: it waits for none."""
        from tf_fsm.views.status import ticket_view

        settings = self.board.options.settings
        store = store or open_store(self.root, settings, tid)
        view = view or ticket_view(self.root, settings, tid, store)
        if view.handoff is None:
            return None
        area = store.files.dir
        try:
            output = Path(view.handoff.output).relative_to(area).as_posix()
            prompt = Path(view.handoff.prompt).relative_to(area).as_posix()
            text = store.read_artifact(prompt)
            exists = store.seen(output) is not None
        except (ValueError, TfFsmError) as exc:  # outside the ticket's directory: not served
            return {"error": store.redactor(str(exc)), "phase": view.handoff.phase}
        return {
            "phase": view.handoff.phase,
            "attempt": view.attempt,
            "output": output,
            "prompt": prompt,
            "prompt_html": to_html(text or "*the prompt file is missing*", store.redactor),
            "exists": exists,
            "stable": settings.settings.executor.stableSeconds,
            "key": f"{view.attempt}/{view.handoff.phase}/{output}",
        }

    async def handoff_fragment(self, request: Request) -> Response:
        tid = self.board._ticket(request)
        editing = await run_in_threadpool(self.ticket_context, tid)
        html = self.board.env.get_template("handoff.html").render(editing=editing, page={"id": tid})
        return HTMLResponse(html)

    async def fields(self, request: Request) -> Response:
        """The edit form's values, and the file's content hash to send back with the edit."""
        tid = self.board._ticket(request)
        return JSONResponse(await run_in_threadpool(self._fields, tid))

    def _fields(self, tid: str) -> dict[str, Any]:
        from tf_fsm.tk.tickets import parse, ticket_path

        path = ticket_path(self.root, tid)
        if not path.is_file():
            raise TicketError(path, f"ticket {tid} not found")
        data = path.read_bytes()
        ticket = parse(data.decode("utf-8", "replace"), path)
        store = open_store(self.root, self.board.options.settings, tid)
        return {
            "id": tid,
            "title": ticket.title,
            "description": description_of(ticket.body),
            "priority": ticket.fields.get("priority", "2"),
            "tags": ", ".join(ticket.list_field("tags")),
            "deps": ", ".join(ticket.list_field("deps")),
            "hash": content_hash(data),
            "held": store.lock_holder(),
        }

    # -- writes ------------------------------------------------------------------------------

    async def _body(self, request: Request) -> dict[str, Any] | Response:
        no = refusal(request, self.board.options.allow_actions, self.board.csrf)
        if no is not None:
            return no
        raw = await request.body()
        if len(raw) > MAX_BODY:
            return JSONResponse({"error": f"more than {MAX_BODY} bytes"}, 413)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if not isinstance(body, dict) or not all(isinstance(v, str) for v in body.values()):
            return JSONResponse({"error": "the body must be a JSON object of strings"}, 400)
        return body

    async def create(self, request: Request) -> Response:
        from tf_fsm.engine.ticket_edit import Draft, create_ticket

        body = await self._body(request)
        if isinstance(body, Response):
            return body
        draft = Draft(
            title=body.get("title", ""),
            description=body.get("description", ""),
            type_=body.get("type", "task") or "task",
            priority=body.get("priority", "2") or "2",
            assignee=body.get("assignee", ""),
            tags=body.get("tags", ""),
            deps=body.get("deps", ""),
        )
        try:
            done = await run_in_threadpool(create_ticket, self.root, draft)
        except TfFsmError as exc:
            return refused(exc)
        return JSONResponse({"ticket": done.ticket_id, "hash": done.hash}, 201)

    async def edit(self, request: Request) -> Response:
        from tf_fsm.engine.ticket_edit import Changes, edit_ticket

        tid = self.board._ticket(request)
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        if not body.get("hash"):
            return JSONResponse({"error": "hash: the file's hash from the form is missing"}, 400)
        names = ("title", "description", "priority", "tags", "deps")
        changes = Changes(**{name: body.get(name) for name in names})
        try:
            done = await run_in_threadpool(edit_ticket, self.root, tid, changes, body["hash"])
        except TfFsmError as exc:
            return refused(exc)
        return JSONResponse({"ticket": tid, "hash": done.hash, "changed": done.changed})

    async def submit(self, request: Request) -> Response:
        """The hand-off's artifact, written through the ticket's store (redacted, atomic);
        then the resume, once the artifact counts."""
        tid = self.board._ticket(request)
        body = await self._body(request)
        if isinstance(body, Response):
            return body
        try:
            answer = await run_in_threadpool(self._write_artifact, tid, body)
        except TfFsmError as exc:
            return refused(exc)
        if isinstance(answer, Response):
            return answer
        delay = float(answer["stable"]) + RESUME_MARGIN
        asyncio.get_running_loop().call_later(delay, self._resume, tid)
        return JSONResponse({"written": answer["output"], "resumeIn": delay}, 202)

    def _write_artifact(self, tid: str, body: dict[str, str]) -> dict[str, Any] | Response:
        wait = self.waiting(tid)
        key = f"{body.get('attempt', '')}/{body.get('phase', '')}/{body.get('output', '')}"
        if wait is None or "error" in wait or wait["key"] != key:
            return JSONResponse({"error": "the ticket no longer waits for this artifact"}, 409)
        store = open_store(self.root, self.board.options.settings, tid)
        holder = store.lock_holder()
        if holder is not None:
            return JSONResponse({"error": f"a run holds this ticket (pid {holder})"}, 409)
        if wait["exists"] and body.get("overwrite") != "yes":
            error = f"{wait['output']} exists already: confirm to overwrite it"
            return JSONResponse({"error": error, "confirm": True}, 409)
        # not logged, not echoed: write_artifact takes any secret out before it is on disk
        store.write_artifact(wait["output"], body.get("text", ""))
        return wait

    def _resume(self, tid: str) -> None:
        """`tf-fsm resume ID` as the resume action runs it, unless a process holds the ticket
        by now (`tf-fsm watch` or a run, which takes the artifact itself)."""
        store = open_store(self.root, self.board.options.settings, tid)
        holder = store.lock_holder()
        done = self.board.work.done
        if holder is not None:
            note = f"not resumed by the board: pid {holder} holds the ticket and takes it on"
            done(tid, {"ticket": tid, "action": "resume", "exitCode": None, "output": note})
        elif not self.board.actions.start(tid, "resume", done):
            note = "not resumed by the board: an action is running on this ticket"
            done(tid, {"ticket": tid, "action": "resume", "exitCode": None, "output": note})
