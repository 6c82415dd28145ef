"""The Store conformance suite, the records: the retry state and the journal, kept, read back
and damaged as a crash, a person or an agent would (the suite's rules are in test_store.py's
docstring; fixtures in conftest.py)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conformance.stores import (
    API_KEY,
    PI_TICKETFLOW_STATE,
    SECRET,
    TICKET,
    TS,
    attempt_started,
    state_of,
    tree,
    write_state,
)
from tf_fsm.core.journal import (
    AttemptFinished,
    AttemptStarted,
    JournalTailDropped,
    RetryStateReset,
    ViewSaved,
)
from tf_fsm.core.journal_codec import encode
from tf_fsm.errors import (
    CorruptStateError,
)
from tf_fsm.storage.protocol import Store

NOW = datetime(2026, 2, 14, 2, 37, 5, tzinfo=UTC)


# --- retry state -------------------------------------------------------------------------


def test_missing_retry_state_is_none_and_creates_nothing(store: Store, root: Path) -> None:
    assert store.load_retry_state() is None
    assert tree(root) == {}


def test_pi_ticketflow_retry_state_loads_unchanged_and_untouched(store: Store, root: Path) -> None:
    path = write_state(store, PI_TICKETFLOW_STATE)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    before = tree(root)
    state = store.load_retry_state()
    assert state is not None
    assert state.to_json_dict() == json.loads(PI_TICKETFLOW_STATE)
    assert tree(root) == before


def test_save_then_load_round_trips_in_pi_ticketflows_format(
    store: Store, make: Callable[[str], Store]
) -> None:
    store.save_retry_state(state_of())
    assert store.retry_state_path.read_text(encoding="utf-8") == PI_TICKETFLOW_STATE
    assert make(TICKET).load_retry_state() == state_of()  # a new store reads it from disk
    store.save_retry_state(state_of().model_copy(update={"retryCount": 1}))
    loaded = make(TICKET).load_retry_state()
    assert loaded is not None and loaded.retryCount == 1
    # the journal holds the file's after-image (the file is a view of it)
    assert sorted(p.name for p in store.dir.iterdir()) == ["events.jsonl", "retry-state.json"]
    image = store.read_events().events[-1]
    assert isinstance(image, ViewSaved) and image.file == "retry-state.json"
    assert image.content == json.loads(store.retry_state_path.read_text(encoding="utf-8"))


def test_saved_state_is_redacted(store: Store) -> None:
    state = state_of()
    attempt = state.attempts[0].model_copy(update={"reason": f"agent crashed: key={API_KEY}"})
    store.save_retry_state(state.model_copy(update={"attempts": [attempt]}))
    assert API_KEY not in store.retry_state_path.read_text(encoding="utf-8")
    loaded = store.load_retry_state()
    assert loaded is not None
    assert loaded.attempts[0].reason == "agent crashed: key=[REDACTED]"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (PI_TICKETFLOW_STATE[:120], "invalid JSON at line 7 column"),
        (PI_TICKETFLOW_STATE.replace('"retryCount": 0', '"retryCount": "two"'), "retryCount: "),
        (PI_TICKETFLOW_STATE.replace('"status": "active"', '"status": "paused"'), "status: "),
        (
            PI_TICKETFLOW_STATE.replace('"status": "in_progress"', '"status": "running"'),
            "attempts.0.status: Input should be",
        ),
        (PI_TICKETFLOW_STATE.replace('"pt-uu03"', '"pt-other"'), "ticketId is 'pt-other'"),
        ("", "empty"),
        ("[]", "expected a JSON object"),
    ],
)
def test_corrupt_retry_state_raises_and_is_left_as_it_is(
    store: Store, root: Path, text: str, problem: str
) -> None:
    path = write_state(store, text)
    before = tree(root)
    with pytest.raises(CorruptStateError) as info:
        store.load_retry_state()
    assert info.value.path == path
    assert problem in info.value.problem
    message = str(info.value)
    assert str(path) in message
    assert f"tf-fsm run {TICKET} --retry-reset" in message
    assert "retry-state.json.bak.<UTC timestamp>" in message
    assert tree(root) == before


def test_schema_error_names_the_value_it_got(store: Store) -> None:
    write_state(store, PI_TICKETFLOW_STATE.replace('"status": "active"', '"status": "paused"'))
    with pytest.raises(CorruptStateError, match=r"status: Input should be .*\(got 'paused'\)"):
        store.load_retry_state()


def test_save_refuses_to_overwrite_a_corrupt_file(store: Store, root: Path) -> None:
    write_state(store, "{ corrupt")
    before = tree(root)
    with pytest.raises(CorruptStateError):
        store.save_retry_state(state_of())
    assert tree(root) == before


def test_reset_moves_the_file_aside_and_journals_it(store: Store) -> None:
    write_state(store, PI_TICKETFLOW_STATE.replace('"retryCount": 0', '"retryCount": 2'))
    original = store.retry_state_path.read_bytes()
    assert store.retry_backup_path(NOW) == store.dir / "retry-state.json.bak.20260214T023705Z"
    first = store.reset_retry_state(NOW)
    assert first == store.dir / "retry-state.json.bak.20260214T023705Z"
    assert first.read_bytes() == original
    assert not store.retry_state_path.exists()
    assert store.load_retry_state() is None

    write_state(store, "{ corrupt")
    second = store.reset_retry_state(NOW)
    assert second == store.dir / "retry-state.json.bak.20260214T023705Z.1"
    assert second.read_bytes() == b"{ corrupt"
    assert store.reset_retry_state(NOW) is None  # nothing left to move

    assert store.read_events().events == [
        RetryStateReset(ts=TS, ticket=TICKET, backup=first.name, retryCountBefore=2),
        RetryStateReset(ts=TS, ticket=TICKET, backup=second.name, retryCountBefore=None),
    ]


def test_another_tickets_state_or_event_is_refused(store: Store, root: Path) -> None:
    with pytest.raises(ValueError, match="pt-other"):
        store.save_retry_state(state_of(PI_TICKETFLOW_STATE.replace(TICKET, "pt-other")))
    with pytest.raises(ValueError, match="pt-other"):
        store.append_event(attempt_started().model_copy(update={"ticket": "pt-other"}))
    assert tree(root) == {}


# --- journal -----------------------------------------------------------------------------


def test_events_are_read_in_the_order_appended_one_line_each(
    store: Store, make: Callable[[str], Store]
) -> None:
    store.append_event(attempt_started(1))
    store.append_events([attempt_started(2), attempt_started(3)])
    events = [attempt_started(1), attempt_started(2), attempt_started(3)]
    assert store.journal_path.read_bytes() == b"".join(encode(e) for e in events)
    read = make(TICKET).read_events()
    assert read.events == events
    assert read.torn_tail is None


def test_secrets_in_events_are_redacted_before_they_reach_the_file(store: Store) -> None:
    store.append_event(
        AttemptFinished(
            ts=TS,
            ticket=TICKET,
            attempt=1,
            status="error",
            counts=None,
            reason=f"agent said: export OPENAI_API_KEY={API_KEY}; {SECRET} leaked",
        )
    )
    store.append_event(
        AttemptStarted(
            ts=TS,
            ticket=TICKET,
            trigger="initial",
            escalation={"apiKey": "hunter2hunter2", "worker": API_KEY},
        )
    )
    raw = store.journal_path.read_text(encoding="utf-8")
    for secret in (API_KEY, SECRET, "hunter2hunter2"):
        assert secret not in raw
    finished, started = store.read_events().events
    assert isinstance(finished, AttemptFinished) and isinstance(started, AttemptStarted)
    assert finished.reason == "agent said: export OPENAI_API_KEY=[REDACTED]; [REDACTED] leaked"
    assert started.escalation == {"apiKey": "[REDACTED]", "worker": "[REDACTED]"}


def test_torn_tail_is_cut_and_recorded_before_the_next_append(store: Store) -> None:
    store.append_event(attempt_started(1))
    torn = encode(attempt_started(2))[:40] + f"token={API_KEY}".encode()
    with store.journal_path.open("ab") as f:
        f.write(torn)

    read = store.read_events()  # reading reports the torn tail and writes nothing
    assert read.events == [attempt_started(1)]
    assert read.torn_tail == torn
    assert store.journal_path.read_bytes().endswith(torn)

    store.append_event(attempt_started(3))
    first, dropped, third = store.read_events().events
    assert first == attempt_started(1)
    assert third == attempt_started(3)
    assert isinstance(dropped, JournalTailDropped)
    assert dropped.bytes == len(torn)
    assert len(dropped.preview) <= 80
    assert dropped.preview.startswith('{"event":"AttemptStarted"')
    assert API_KEY not in store.journal_path.read_text(encoding="utf-8")
    assert store.read_events().torn_tail is None


def test_last_event_missing_only_its_newline_is_kept(store: Store) -> None:
    store.dir.mkdir(parents=True)
    store.journal_path.write_bytes(encode(attempt_started(1))[:-1])
    store.append_event(attempt_started(2))
    assert store.read_events().events == [attempt_started(1), attempt_started(2)]


def test_a_journal_that_is_only_a_torn_tail_is_repaired(store: Store) -> None:
    store.dir.mkdir(parents=True)
    store.journal_path.write_bytes(b'{"event":"attem')
    store.append_event(attempt_started(1))
    dropped, started = store.read_events().events
    assert isinstance(dropped, JournalTailDropped) and dropped.bytes == 15
    assert started == attempt_started(1)


def test_corrupt_middle_line_is_a_corrupt_state_error_and_is_not_touched(store: Store) -> None:
    store.dir.mkdir(parents=True)
    data = encode(attempt_started(1)) + b"{broken\n" + encode(attempt_started(2))
    store.journal_path.write_bytes(data)
    with pytest.raises(CorruptStateError) as info:
        store.read_events()
    assert info.value.path == store.journal_path
    assert info.value.problem.startswith("line 2: invalid JSON")
    assert store.journal_path.read_bytes() == data


def test_append_refuses_to_cut_a_complete_but_invalid_last_line(store: Store) -> None:
    store.dir.mkdir(parents=True)
    data = encode(attempt_started(1)) + b'{"event":"AttemptStarted","ts":"not a time","ticket":"x"}'
    store.journal_path.write_bytes(data)
    with pytest.raises(CorruptStateError, match="last line: AttemptStarted: "):
        store.append_event(attempt_started(2))
    assert store.journal_path.read_bytes() == data


def test_reading_a_missing_journal_creates_nothing(store: Store, root: Path) -> None:
    assert store.read_events().events == []
    assert tree(root) == {}


def test_writes_in_a_batch_are_readable_at_once_and_kept(
    store: Store, make: Callable[[str], Store]
) -> None:
    with store.lock(), store.batch():
        store.append_event(attempt_started(1), durable=False)
        assert make(TICKET).read_events().events == [attempt_started(1)]
        store.write_artifact("notes.md", "x\n")
        assert make(TICKET).read_artifact("notes.md") == "x\n"
        store.append_event(attempt_started(2))
    events = make(TICKET).read_events().events
    assert events[:2] == [attempt_started(1), attempt_started(2)]
    assert [e.event for e in events[2:]] == ["ViewsSynced"]  # the batch's durable point
