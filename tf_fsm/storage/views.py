"""The views the journal can rebuild: `retry-state.json` and `chain-context.json`, whose
after-image each ViewSaved event holds. Pure reading of the journal's events, plus the one
comparison of a file on disk with its image."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tf_fsm._json_input import JsonLimitError, load_json
from tf_fsm.core.journal import Event, RetryStateReset, ViewSaved, ViewsSynced
from tf_fsm.fs.atomic import json_text
from tf_fsm.storage.layout import CHAIN_CONTEXT, RETRY_STATE
from tf_fsm.storage.redact import Redactor
from tf_fsm.storage.redacted_json import redacted_json

#: the files whose after-image the journal keeps (pi-ticketflow's names, formats unchanged)
VIEWS = (RETRY_STATE, CHAIN_CONTEXT)


def view_image(
    name: str, content: dict[str, Any], redactor: Redactor, ticket_id: str, ts: str
) -> tuple[ViewSaved, str]:
    """What every store journals and keeps for view `name`: its after-image (ViewSaved, the
    content redacted) and the text of the view itself (pretty JSON, redacted). ValueError for
    a name that is not a view."""
    if name not in VIEWS:
        raise ValueError(f"{name!r} is not a view the journal keeps ({', '.join(VIEWS)})")
    raw = json_text(content)
    text = redacted_json(content, redactor, raw)
    image = content if text == raw else load_json(text)
    return ViewSaved(ts=ts, ticket=ticket_id, file=name, content=image), text


def crashed(events: Sequence[Event]) -> bool:
    """Did the run that wrote these events end without its durable point (ViewsSynced last)?"""
    return bool(events) and not isinstance(events[-1], ViewsSynced)


def last_images(events: Sequence[Event]) -> dict[str, dict[str, Any] | None]:
    """Each view's last journaled image; None for a retry state moved aside since (a reset:
    the next run starts at attempt 1, so there is nothing to rebuild)."""
    images: dict[str, dict[str, Any] | None] = {}
    for event in events:
        if isinstance(event, ViewSaved):
            images[event.file] = event.content
        elif isinstance(event, RetryStateReset):
            images[RETRY_STATE] = None
    return images


def differs(path: Path, content: dict[str, Any]) -> bool:
    """Is the file at `path` anything but `content` (missing, empty, torn, not JSON, stale)?"""
    try:
        return bool(load_json(path.read_bytes().decode("utf-8")) != content)
    except (FileNotFoundError, UnicodeDecodeError, json.JSONDecodeError, JsonLimitError):
        return True
