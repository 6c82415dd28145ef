"""Redacted JSON for the store's files: journal lines, retry-state.json, the lock's owner file.

The redactor runs over the JSON text, so `"apiKey": "..."` inside a nested object is caught
too. Should a replacement ever break the JSON, each string value is redacted on its own
instead, which cannot.
"""

from __future__ import annotations

import json
from typing import Any

from tf_fsm.core.journal import Event
from tf_fsm.core.journal_codec import encode_text
from tf_fsm.fs.atomic import json_text
from tf_fsm.storage.redact import Redactor


def redacted_line(event: Event, redactor: Redactor) -> bytes:
    """One journal line (newline included) for `event`, redacted."""
    return redacted_lines([event], redactor)[0]


def redacted_lines(events: list[Event], redactor: Redactor) -> tuple[bytes, bool]:
    """The journal lines of `events`, redacted, and whether redaction changed any of them
    (when not, each line reads back as its event: a reader's cache may keep the events)."""
    lines, changed = [], False
    for event in events:
        raw = encode_text(event)
        text = redacted_json_text(raw, redactor, line=True)
        if text is None:
            data = redact_strings(event.model_dump(mode="json"), redactor)
            text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
        changed = changed or text != raw
        lines.append(text.encode("utf-8") + b"\n")
    return b"".join(lines), changed


def redacted_json(obj: Any, redactor: Redactor, raw: str | None = None) -> str:
    """`obj` as the JSON text of a whole file (`json_text`, or `raw` when the caller has
    it already), redacted."""
    text = redacted_json_text(json_text(obj) if raw is None else raw, redactor)
    return text if text is not None else json_text(redact_strings(obj, redactor))


def redacted_json_text(raw: str, redactor: Redactor, line: bool = False) -> str | None:
    """`raw` JSON text redacted, or None if redaction broke it (the caller then redacts each
    string value, which cannot). It never breaks JSON in practice. `line`: `raw` is one line
    of compact JSON (`Redactor.json_line`)."""
    text = redactor.json_line(raw) if line else redactor(raw)
    if text == raw:  # nothing redacted (the usual case): still the JSON it was given
        return text
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return None
    return text


def redact_strings(value: Any, redactor: Redactor) -> Any:
    """`value` with every string in it (dict keys too) redacted; the fallback that keeps JSON
    valid whatever the redactor replaces."""
    if isinstance(value, str):
        return redactor(value)
    if isinstance(value, dict):
        return {redactor(str(k)): redact_strings(v, redactor) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_strings(v, redactor) for v in value]
    return value
