"""OpenAI's Responses API (`POST /v1/responses`, streamed), as the stub model server speaks it.

Codex 0.169 speaks nothing else, so this is what lets the real Codex run a whole tf_fsm
lifecycle against the stub (tests/stubs/openai_stub.py routes `/responses` here). What it
sends was read off real Codex requests, what it answers off Codex's SSE parser
(`codex-rs/codex-api/src/sse/responses.rs`):

* request: `input` is a list of items: `message`s (role `developer` or `user`, content parts
  `input_text`), and after a tool ran, the model's `function_call` and Codex's
  `function_call_output`. The tf_fsm prompt is the last `user` message (the first is Codex's
  `<environment_context>`). `tools` holds `exec_command {cmd, ...}` (a shell command, run in
  Codex's sandbox), not pi's `write`; there is no `apply_patch` for a model Codex has no
  metadata for.
* reply: `event: <type>` + `data: <json>` records. Codex acts on `response.created`,
  `response.output_item.added`/`.done` (a `message` or a `function_call` item with `call_id`,
  `name`, `arguments` as a JSON string), `response.output_text.delta`, and
  `response.completed`, whose `response.usage` needs `input_tokens`, `output_tokens` and
  `total_tokens`. It reports the turn as done only when the stream ends after
  `response.completed`, so the server closes the connection.
"""

from __future__ import annotations

import json
import shlex
import time
from typing import Any

#: the marker ending the heredoc that writes an artifact (no artifact line equals it)
EOF_MARK = "TF_FSM_ARTIFACT_EOF"


def input_items(body: dict[str, Any]) -> list[dict[str, Any]]:
    items = body.get("input", [])
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def after_tool(body: dict[str, Any]) -> bool:
    """Is the last input item a tool's output (Codex ran the command the model asked for)?"""
    items = input_items(body)
    return bool(items) and items[-1].get("type") in (
        "function_call_output",
        "custom_tool_call_output",
    )


def user_text(body: dict[str, Any]) -> str:
    """Every user message's text, one after another (the tf_fsm prompt is the last one)."""
    texts = []
    for item in input_items(body):
        if item.get("type", "message") == "message" and item.get("role") == "user":
            content = item.get("content")
            if isinstance(content, str):
                texts.append(content)
            elif isinstance(content, list):
                texts += [str(p.get("text", "")) for p in content if isinstance(p, dict)]
    return "\n".join(texts)


def tool_names(body: dict[str, Any]) -> list[str]:
    return [str(t.get("name")) for t in body.get("tools", []) if isinstance(t, dict)]


def write_command(path: str, content: str) -> str:
    """A shell command that writes `content` to `path` (a quoted heredoc: no expansion)."""
    if EOF_MARK in content.splitlines():
        raise ValueError(f"content holds the heredoc marker {EOF_MARK}")
    quoted = shlex.quote(path)
    body = content if content.endswith("\n") else content + "\n"
    return f"mkdir -p \"$(dirname {quoted})\" && cat > {quoted} <<'{EOF_MARK}'\n{body}{EOF_MARK}"


def write_call_arguments(
    body: dict[str, Any], path: str, content: str
) -> tuple[str, dict[str, Any]]:
    """The tool call that makes Codex write the file, with the shell tool it offered."""
    command = write_command(path, content)
    names = tool_names(body)
    if "exec_command" in names or not names:
        return "exec_command", {"cmd": command}
    if "shell" in names:  # Codex's older tool: argv, not a command line
        return "shell", {"command": ["bash", "-c", command]}
    raise ValueError(f"Codex offered no shell tool: {names}")


def events(
    payload: str | tuple[str, dict[str, Any]], model: str, usage: dict[str, int]
) -> list[tuple[str, dict[str, Any]]]:
    """The SSE records of one response: a text message (a str), or a function call (its
    name and arguments)."""
    stamp = time.monotonic_ns()
    response = {
        "id": f"resp_stub_{stamp}",
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "model": model,
        "output": [],
    }
    out: list[tuple[str, dict[str, Any]]] = [
        ("response.created", {"response": response}),
        ("response.in_progress", {"response": response}),
    ]
    item_id = f"item_stub_{stamp}"
    if isinstance(payload, str):
        part = {"type": "output_text", "text": payload, "annotations": []}
        item: dict[str, Any] = {
            "id": item_id,
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [part],
        }
        where = {"item_id": item_id, "output_index": 0, "content_index": 0}
        out += [
            (
                "response.output_item.added",
                {"output_index": 0, "item": {**item, "status": "in_progress", "content": []}},
            ),
            ("response.content_part.added", {**where, "part": {**part, "text": ""}}),
            ("response.output_text.delta", {**where, "delta": payload}),
            ("response.output_text.done", {**where, "text": payload}),
            ("response.content_part.done", {**where, "part": part}),
        ]
    else:
        name, arguments = payload
        raw = json.dumps(arguments)
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "completed",
            "call_id": f"call_stub_{stamp}",
            "name": name,
            "arguments": raw,
        }
        where = {"item_id": item_id, "output_index": 0}
        out += [
            (
                "response.output_item.added",
                {"output_index": 0, "item": {**item, "status": "in_progress", "arguments": ""}},
            ),
            ("response.function_call_arguments.delta", {**where, "delta": raw}),
            ("response.function_call_arguments.done", {**where, "arguments": raw}),
        ]
    done = {**response, "status": "completed", "output": [item], "usage": usage}
    out += [
        ("response.output_item.done", {"output_index": 0, "item": item}),
        ("response.completed", {"response": done}),
    ]
    return [
        (name, {"type": name, "sequence_number": n, **data}) for n, (name, data) in enumerate(out)
    ]
