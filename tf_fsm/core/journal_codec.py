"""The journal's line codec: events to lines of compact JSON and back.

Appends can be torn by a crash, so a final line without its newline that does not parse is
reported as a torn tail instead of an error; any other bad line is corruption. Importing this
module registers every event type (the lifecycle's in tf_fsm.core.journal, the workspace's in
tf_fsm.core.workspace_events), so whatever reads a journal knows them all.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tf_fsm._json_input import JsonLimitError, load_json
from tf_fsm.core import workspace_events as _workspace_events  # noqa: F401 (registers them)
from tf_fsm.core.journal import Event, event_class, validation_problem


def encode(event: Event) -> bytes:
    """One line: compact JSON, UTF-8, `\\n`-terminated (`encode_text` and the newline)."""
    return encode_text(event).encode("utf-8") + b"\n"


def encode_text(event: Event) -> str:
    """The event as one line of compact JSON, without its newline: pydantic's own serializer,
    about five times faster than `json.dumps` of `model_dump` and the same text (fields in
    order, no spaces, non-ASCII kept, control characters escaped, so no raw newline in it),
    but for a float under 1e-4, spelled `0.00001` instead of `1e-05`: the same number."""
    return event.model_dump_json()


class JournalLineError(ValueError):
    """A journal line that is not a valid event (not a torn tail). The store turns it into a
    CorruptStateError naming the file."""

    def __init__(self, line_number: int, problem: str) -> None:
        self.line_number = line_number
        self.problem = problem
        super().__init__(f"line {line_number}: {problem}")


@dataclass(frozen=True)
class JournalRead:
    events: list[Event]
    #: The bytes after the last newline when they do not parse: an append cut short by a crash.
    torn_tail: bytes | None = None


class _BeyondLimits(JournalLineError):
    """A line that is JSON but nested too deeply or holding too long an integer. tf_fsm never
    writes one, so it is never the torn tail of a crashed append."""


def _parse_json(line: bytes, line_number: int) -> Any:
    try:
        return load_json(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise JournalLineError(line_number, f"not UTF-8 (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        raise JournalLineError(
            line_number, f"invalid JSON at column {exc.colno}: {exc.msg}"
        ) from exc
    except JsonLimitError as exc:
        raise _BeyondLimits(line_number, exc.problem) from None


def _to_event(data: Any, line_number: int) -> Event:
    if not isinstance(data, dict):
        raise JournalLineError(line_number, f"expected a JSON object, got {type(data).__name__}")
    name = data.get("event")
    if not isinstance(name, str):
        raise JournalLineError(line_number, "no `event` type name")
    cls = event_class(name)
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        raise JournalLineError(line_number, f"{name}: {validation_problem(exc)}") from exc


def decode_line(line: bytes, line_number: int = 1) -> Event:
    """One line (with or without its newline) to an event, or JournalLineError."""
    return _to_event(_parse_json(line, line_number), line_number)


def decode(data: bytes) -> JournalRead:
    """All events of a journal. Blank lines are skipped. An unterminated last line is an event
    if it parses, the torn tail of a crashed append if it is not even JSON; a complete JSON
    value that is not a valid event is corruption wherever it is (a crash cannot make one)."""
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the data ends with a newline
    events = [decode_line(line, n) for n, line in enumerate(lines, 1) if line.strip()]
    if not tail.strip():
        return JournalRead(events, tail or None)
    try:
        parsed = _parse_json(tail, len(lines) + 1)
    except _BeyondLimits:
        raise
    except JournalLineError:
        return JournalRead(events, tail)
    events.append(_to_event(parsed, len(lines) + 1))
    return JournalRead(events, None)
