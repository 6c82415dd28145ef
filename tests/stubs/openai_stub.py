"""A stub OpenAI-compatible model server on loopback, for end-to-end runs of real agent CLIs.

Stdlib only: `http.server` in a daemon thread, bound to 127.0.0.1 on a free port. It speaks
`POST /v1/chat/completions` with `stream: true` (server-sent events) and streams either text or
tool calls, with a `usage` chunk, as OpenAI's API does; the same for Anthropic's
`POST /v1/messages` (Claude Code) and OpenAI's `POST /v1/responses` (Codex; see
responses_api.py). What it answers is up to a `script`:
a function of the request (the parsed JSON body and how many requests came before) returning
one reply:

* `ToolCall(name, arguments)`: the model calls a tool (pi's `write {path, content}`).
* `Text(content)`: the model answers and stops.
* `Status(code, message)`: an HTTP error (429, 500) with OpenAI's JSON error body.
* `Hang(seconds, on_start)`: the request hangs (bounded; `stop()` ends it at once); `on_start`
  runs first, in the server thread, e.g. to kill the agent that sent the request.

`lifecycle_script` plays a whole tf_fsm lifecycle: each phase prompt names the file to write
("- Write: `<path>`") and the phase and role; the model writes that file with the tool, then
says it is done. Every request is recorded (`requests`), so tests see what the agent sent.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.stubs import responses_api

#: tokens the stub reports for every reply, so tests can predict usage and cost exactly
PROMPT_TOKENS = 1000
COMPLETION_TOKENS = 100
MAX_HANG_SECONDS = 60.0
RESPONSES_USAGE = {"input_tokens": PROMPT_TOKENS, "input_tokens_details": {"cached_tokens": 0},
                   "output_tokens": COMPLETION_TOKENS,
                   "output_tokens_details": {"reasoning_tokens": 0},
                   "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS}  # fmt: skip


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class Text:
    content: str


@dataclass(frozen=True)
class Status:
    code: int
    message: str = "stub error"


@dataclass(frozen=True)
class Hang:
    seconds: float
    on_start: Callable[[], None] | None = None


Reply = ToolCall | Text | Status | Hang


@dataclass
class Request:
    body: dict[str, Any]
    index: int  # 0-based, over all requests this server received
    headers: dict[str, str] = field(default_factory=dict)  # names in lower case
    anthropic: bool = False  # POST /v1/messages (Anthropic's API) rather than OpenAI's
    responses: bool = False  # POST /v1/responses (OpenAI's Responses API: Codex)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def last_role(self) -> str:
        return str(self.messages[-1].get("role", "")) if self.messages else ""

    @property
    def after_tool(self) -> bool:
        """Does the request carry a tool's result (OpenAI: a `tool` message; Anthropic: a
        `tool_result` part in the last user message; Responses: a `function_call_output`)?"""
        if self.responses:
            return responses_api.after_tool(self.body)
        if self.last_role == "tool":
            return True
        content = self.messages[-1].get("content") if self.messages else None
        return isinstance(content, list) and any(
            isinstance(p, dict) and p.get("type") == "tool_result" for p in content
        )

    def user_text(self) -> str:
        """The first user message as plain text (content may be a list of parts); for the
        Responses API every user message's, since Codex sends its own first."""
        if self.responses:
            return responses_api.user_text(self.body)
        for message in self.messages:
            if message.get("role") == "user":
                return _text(message.get("content"))
        return ""


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


WRITE_RE = re.compile(r"^- Write: `([^`]+)`", re.MULTILINE)
PHASE_RE = re.compile(r"^- Phase: (\w+) \(role ([\w-]+), model ([^,)]+)", re.MULTILINE)
ATTEMPT_RE = re.compile(r"^- Attempt: (\d+)", re.MULTILINE)


@dataclass(frozen=True)
class PhasePrompt:
    phase: str
    role: str
    model: str
    attempt: int
    output: str


def phase_prompt(request: Request) -> PhasePrompt | None:
    """What tf_fsm asked for, read from its prompt's context block."""
    text = request.user_text()
    write, phase, attempt = WRITE_RE.search(text), PHASE_RE.search(text), ATTEMPT_RE.search(text)
    if not (write and phase and attempt):
        return None
    return PhasePrompt(
        phase.group(1), phase.group(2), phase.group(3), int(attempt.group(1)), write.group(1)
    )


def review_text(ticket: str, majors: list[str]) -> str:
    items = [f"- {m}" for m in majors] or ["No issues found."]
    return "\n".join(
        [
            f"# Review: {ticket}",
            "",
            "## Critical (must fix)",
            "No issues found.",
            "",
            "## Major (should fix)",
            *items,
            "",
            "## Minor (nice to fix)",
            "No issues found.",
            "",
            "## Warnings (follow-up ticket)",
            "No issues found.",
            "",
            "## Suggestions (follow-up ticket)",
            "No issues found.",
            "",
            "## Summary Statistics",
            "- Critical: 0",
            f"- Major: {len(majors)}",
            "- Minor: 0",
            "- Warnings: 0",
            "- Suggestions: 0",
            "",
        ]
    )


def artifact_text(
    prompt: PhasePrompt, ticket: str, majors: list[str], verify_majors: list[str]
) -> str:
    """The artifact a competent model would write for this phase."""
    if prompt.phase in ("review", "verify"):
        found = majors if prompt.phase == "review" else verify_majors
        return review_text(ticket, found if prompt.role == "reviewer-general" else [])
    if prompt.phase == "fix":
        fixed = [f"- [Major] {m}" for m in majors] or ["No fixes applied."]
        stats = ["- Critical: 0", f"- Major: {len(majors)}", "- Minor: 0", "- Warnings: 0"]
        return "\n".join(
            [
                f"# Fixes: {ticket}",
                "",
                "## Fixes Applied",
                *fixed,
                "",
                "## Summary Statistics",
                *stats,
                "- Suggestions: 0",
                "",
            ]
        )
    if prompt.phase == "implement":
        return (
            f"# Implementation: {ticket}\n\n## Summary\nAdded the depth limit.\n\n"
            "## Files Changed\n- `src/parser.py`\n\n## Tests\n- `tests/test_parser.py`\n"
        )
    if prompt.phase == "research":
        return f"# Research: {ticket}\n\n## Findings\n- The parser lives in `src/parser.py`.\n"
    return f"# Close notes: {ticket}\n\nDone; see close-summary.md.\n"


def lifecycle_script(
    ticket: str,
    majors: list[str] | None = None,
    faults: Callable[[Request, PhasePrompt], Reply | None] | None = None,
    verify_majors: list[str] | None = None,
    cleared_from_attempt: int | None = None,
) -> Callable[[Request], Reply]:
    """Writes each phase's artifact with the agent's own tool (pi's `write`, Claude Code's
    `Write`, a shell command for Codex), then says it is done. `majors`: the general reviewer's
    Major findings on review; `verify_majors`: those it still finds after the fix (none: the
    fixer cleared them all), on every attempt, or only before `cleared_from_attempt` (the
    escalated fixer clears them). `faults` may answer a phase request instead (an error, a
    hang) before the normal reply."""
    found, left = list(majors or []), list(verify_majors or [])

    def script(request: Request) -> Reply:
        if request.after_tool:
            return Text("Done: the artifact is written.")
        prompt = phase_prompt(request)
        if prompt is None:
            return Text("I was not asked to write anything.")
        if faults is not None:
            fault = faults(request, prompt)
            if fault is not None:
                return fault
        cleared = cleared_from_attempt is not None and prompt.attempt >= cleared_from_attempt
        content = artifact_text(prompt, ticket, found, [] if cleared else left)
        if request.anthropic:  # Claude Code's tool is `Write {file_path, content}`
            return ToolCall("Write", {"file_path": prompt.output, "content": content})
        if request.responses:  # Codex has no write tool: a shell command writes the file
            return ToolCall(
                *responses_api.write_call_arguments(request.body, prompt.output, content)
            )
        return ToolCall("write", {"path": prompt.output, "content": content})

    return script


@dataclass
class StubModelServer:
    script: Callable[[Request], Reply]
    requests: list[Request] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> StubModelServer:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass  # quiet: tests read `requests` instead

            def do_GET(self) -> None:
                self._json(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"{}")
                except ValueError:
                    self._json(400, {"error": {"message": "bad JSON"}})
                    return
                with stub._lock:
                    headers = {k.lower(): v for k, v in self.headers.items()}
                    path = self.path.split("?")[0]
                    anthropic, responses = path.endswith("/messages"), path.endswith("/responses")
                    request = Request(body, len(stub.requests), headers, anthropic, responses)
                    stub.requests.append(request)
                reply = stub.script(request)
                stub._answer(self, reply, str(body.get("model", "stub")), request)

            def do_HEAD(self) -> None:  # Claude Code checks that the endpoint answers
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def _json(self, code: int, data: dict[str, Any]) -> None:
                raw = json.dumps(data).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> StubModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- replies ----------------------------------------------------------------------------

    def _answer(
        self, handler: BaseHTTPRequestHandler, reply: Reply, model: str, request: Request
    ) -> None:
        anthropic = request.anthropic
        if isinstance(reply, Hang):
            if reply.on_start is not None:
                reply.on_start()
            self._stopping.wait(min(reply.seconds, MAX_HANG_SECONDS))
            handler.close_connection = True
            return
        if isinstance(reply, Status):
            kind = "rate_limit_exceeded" if reply.code == 429 else "server_error"
            error = {"message": reply.message, "type": kind}
            raw = json.dumps({"type": "error", "error": error} if anthropic else {"error": error})
            raw = raw.encode()
            handler.send_response(reply.code)
            handler.send_header("Content-Type", "application/json")
            handler.send_header("Content-Length", str(len(raw)))
            if reply.code == 429:
                handler.send_header("Retry-After", "0")
            handler.end_headers()
            handler.wfile.write(raw)
            return
        handler.send_response(200)
        handler.send_header("Content-Type", "text/event-stream")
        handler.send_header("Cache-Control", "no-cache")
        handler.send_header("Connection", "close")
        handler.end_headers()
        handler.close_connection = True
        if anthropic or request.responses:
            if request.responses:
                payload = (
                    reply.content if isinstance(reply, Text) else (reply.name, reply.arguments)
                )
                records = responses_api.events(payload, model, RESPONSES_USAGE)
            else:
                records = _anthropic_events(reply, model)
            for name, data in records:
                handler.wfile.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())
            handler.wfile.flush()
            return
        for chunk in _chunks(reply, model):
            handler.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
            handler.wfile.flush()
        handler.wfile.write(b"data: [DONE]\n\n")
        handler.wfile.flush()


def _chunks(reply: ToolCall | Text, model: str) -> list[dict[str, Any]]:
    base = {
        "id": f"chatcmpl-stub-{time.monotonic_ns()}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    if isinstance(reply, Text):
        delta: dict[str, Any] = {"role": "assistant", "content": reply.content}
        finish = "stop"
    else:
        function = {"name": reply.name, "arguments": json.dumps(reply.arguments)}
        call = {
            "index": 0,
            "id": f"call_{time.monotonic_ns()}",
            "type": "function",
            "function": function,
        }
        delta = {"role": "assistant", "content": None, "tool_calls": [call]}
        finish = "tool_calls"
    usage = {
        "prompt_tokens": PROMPT_TOKENS,
        "completion_tokens": COMPLETION_TOKENS,
        "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
    }
    return [
        {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
        {**base, "choices": [], "usage": usage},
    ]


def _anthropic_events(reply: ToolCall | Text, model: str) -> list[tuple[str, dict[str, Any]]]:
    """Anthropic's Messages streaming: message_start, one content block, message_delta."""
    message = {
        "id": f"msg_stub_{time.monotonic_ns()}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": PROMPT_TOKENS, "output_tokens": 1},
    }
    if isinstance(reply, Text):
        block: dict[str, Any] = {"type": "text", "text": ""}
        delta: dict[str, Any] = {"type": "text_delta", "text": reply.content}
        stop = "end_turn"
    else:
        block = {
            "type": "tool_use",
            "id": f"toolu_{time.monotonic_ns()}",
            "name": reply.name,
            "input": {},
        }
        delta = {"type": "input_json_delta", "partial_json": json.dumps(reply.arguments)}
        stop = "tool_use"
    return [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        ),
        ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": COMPLETION_TOKENS},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
