"""`retry-state.json` read back: parsed strictly, and any file that cannot be trusted is a
CorruptStateError naming the file and the way out (`--retry-reset`), never a guess."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tf_fsm._json_input import JsonLimitError, load_json
from tf_fsm.core.journal import validation_problem
from tf_fsm.core.state import RetryState
from tf_fsm.errors import CorruptStateError
from tf_fsm.storage.layout import RETRY_STATE


def backup_name(now: datetime, taken: Callable[[str], bool]) -> str:
    """The name a retry state moved aside at `now` gets in every store:
    `retry-state.json.bak.<UTC stamp>`, with `.1`, `.2`, ... while `taken` says a name is."""
    stem = f"{RETRY_STATE}.bak.{now.astimezone(UTC):%Y%m%dT%H%M%SZ}"
    backup, suffix = stem, 0
    while taken(backup):
        suffix += 1
        backup = f"{stem}.{suffix}"
    return backup


def corrupt_state(path: Path, ticket_id: str, problem: str) -> CorruptStateError:
    remedy = (
        f"run `tf-fsm run {ticket_id} --retry-reset` to move it aside as "
        "retry-state.json.bak.<UTC timestamp> and start again at attempt 1"
    )
    return CorruptStateError(path, problem, remedy=remedy)


def parse_retry_state(raw: bytes, path: Path, ticket_id: str) -> RetryState:
    """The retry state in `raw` (the bytes of `path`, ticket `ticket_id`'s file)."""
    if not raw.strip():
        raise corrupt_state(path, ticket_id, "the file is empty")
    try:
        data = load_json(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise corrupt_state(path, ticket_id, f"not UTF-8 (byte {exc.start})") from exc
    except json.JSONDecodeError as exc:
        problem = f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        raise corrupt_state(path, ticket_id, problem) from exc
    except JsonLimitError as exc:
        raise corrupt_state(path, ticket_id, exc.problem) from exc
    if not isinstance(data, dict):
        problem = f"expected a JSON object, got {type(data).__name__}"
        raise corrupt_state(path, ticket_id, problem)
    try:
        state = RetryState.model_validate(data)
    except ValidationError as exc:
        raise corrupt_state(path, ticket_id, validation_problem(exc)) from exc
    if state.ticketId != ticket_id:
        problem = (
            f"ticketId is {state.ticketId!r} but the file is in the directory of {ticket_id!r}"
        )
        raise corrupt_state(path, ticket_id, problem)
    return state


def peek_state(raw: bytes) -> dict[str, Any] | None:
    """A retry state's bytes as plain JSON, not validated: None if unreadable."""
    try:
        data = load_json(raw.decode("utf-8"))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def retry_count_before(raw: bytes, path: Path, ticket_id: str) -> int | None:
    """The retry count a reset journals of the state it moves aside (None for a corrupt one)."""
    try:
        return parse_retry_state(raw, path, ticket_id).retryCount
    except CorruptStateError:
        return None
