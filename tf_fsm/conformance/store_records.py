"""The Store suite, the records: the retry state and the journal, kept, read back and damaged
as a crash, a person or an agent would (the suite's rules: tf_fsm.conformance.store)."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from tf_fsm.conformance.stores import (
    API_KEY,
    PI_TICKETFLOW_STATE,
    SECRET,
    TICKET,
    TS,
    Raw,
    attempt_started,
    state_of,
)
from tf_fsm.core.journal import (
    AttemptFinished,
    AttemptStarted,
    JournalTailDropped,
    RetryStateReset,
    ViewSaved,
)
from tf_fsm.core.journal_codec import encode
from tf_fsm.errors import CorruptStateError
from tf_fsm.storage.layout import JOURNAL, RETRY_STATE
from tf_fsm.storage.protocol import Store

NOW = datetime(2026, 2, 14, 2, 37, 5, tzinfo=UTC)
BACKUP = "retry-state.json.bak.20260214T023705Z"


# --- retry state -------------------------------------------------------------------------


def test_missing_retry_state_is_none_and_creates_nothing(
    store: Store, snapshot: Callable[[], object]
) -> None:
    before = snapshot()
    assert store.load_retry_state() is None
    assert store.peek_retry_state() is None
    assert snapshot() == before


def test_pi_ticketflow_retry_state_loads_unchanged_and_untouched(
    store: Store, raw: Raw, snapshot: Callable[[], object]
) -> None:
    raw.put(RETRY_STATE, PI_TICKETFLOW_STATE.encode())
    before = snapshot()
    state = store.load_retry_state()
    assert state is not None
    assert state.to_json_dict() == json.loads(PI_TICKETFLOW_STATE)
    assert store.peek_retry_state() == json.loads(PI_TICKETFLOW_STATE)
    assert snapshot() == before


def test_save_then_load_round_trips_in_pi_ticketflows_format(
    store: Store, raw: Raw, make: Callable[[str], Store]
) -> None:
    store.save_retry_state(state_of())
    assert raw.get(RETRY_STATE) == PI_TICKETFLOW_STATE.encode()
    assert make(TICKET).load_retry_state() == state_of()  # a new store reads it back
    store.save_retry_state(state_of().model_copy(update={"retryCount": 1}))
    loaded = make(TICKET).load_retry_state()
    assert loaded is not None and loaded.retryCount == 1
    # the journal holds the record's after-image (the retry state is a view of it)
    image = store.read_events().events[-1]
    assert isinstance(image, ViewSaved) and image.file == RETRY_STATE
    assert image.content == json.loads(raw.get(RETRY_STATE) or b"")


def test_saved_state_is_redacted(store: Store, raw: Raw) -> None:
    state = state_of()
    attempt = state.attempts[0].model_copy(update={"reason": f"agent crashed: key={API_KEY}"})
    store.save_retry_state(state.model_copy(update={"attempts": [attempt]}))
    assert API_KEY.encode() not in (raw.get(RETRY_STATE) or b"")
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
    store: Store, raw: Raw, snapshot: Callable[[], object], text: str, problem: str
) -> None:
    raw.put(RETRY_STATE, text.encode())
    before = snapshot()
    with pytest.raises(CorruptStateError) as info:
        store.load_retry_state()
    assert info.value.path == raw.where(RETRY_STATE)
    assert problem in info.value.problem
    message = str(info.value)
    assert str(raw.where(RETRY_STATE)) in message
    assert f"tf-fsm run {TICKET} --retry-reset" in message
    assert "retry-state.json.bak.<UTC timestamp>" in message
    assert snapshot() == before


def test_schema_error_names_the_value_it_got(store: Store, raw: Raw) -> None:
    raw.put(RETRY_STATE, PI_TICKETFLOW_STATE.replace('"active"', '"paused"').encode())
    with pytest.raises(CorruptStateError, match=r"status: Input should be .*\(got 'paused'\)"):
        store.load_retry_state()


def test_save_refuses_to_overwrite_a_corrupt_record(
    store: Store, raw: Raw, snapshot: Callable[[], object]
) -> None:
    raw.put(RETRY_STATE, b"{ corrupt")
    before = snapshot()
    with pytest.raises(CorruptStateError):
        store.save_retry_state(state_of())
    assert snapshot() == before


def test_reset_moves_the_record_aside_and_journals_it(store: Store, raw: Raw) -> None:
    raw.put(RETRY_STATE, PI_TICKETFLOW_STATE.replace('"retryCount": 0', '"retryCount": 2').encode())
    original = raw.get(RETRY_STATE)
    assert store.retry_backup_name(NOW) == BACKUP
    first = store.reset_retry_state(NOW)
    assert first == BACKUP
    assert raw.get(first) == original
    assert raw.get(RETRY_STATE) is None
    assert store.load_retry_state() is None

    raw.put(RETRY_STATE, b"{ corrupt")
    second = store.reset_retry_state(NOW)
    assert second == BACKUP + ".1"
    assert raw.get(second) == b"{ corrupt"
    assert store.reset_retry_state(NOW) is None  # nothing left to move

    assert store.read_events().events == [
        RetryStateReset(ts=TS, ticket=TICKET, backup=first, retryCountBefore=2),
        RetryStateReset(ts=TS, ticket=TICKET, backup=second, retryCountBefore=None),
    ]


def test_another_tickets_state_or_event_is_refused(
    store: Store, snapshot: Callable[[], object]
) -> None:
    before = snapshot()
    with pytest.raises(ValueError, match="pt-other"):
        store.save_retry_state(state_of(PI_TICKETFLOW_STATE.replace(TICKET, "pt-other")))
    with pytest.raises(ValueError, match="pt-other"):
        store.append_event(attempt_started().model_copy(update={"ticket": "pt-other"}))
    assert snapshot() == before


# --- journal -----------------------------------------------------------------------------


def test_events_are_read_in_the_order_appended_one_line_each(
    store: Store, raw: Raw, make: Callable[[str], Store]
) -> None:
    assert store.journal_size() is None  # never ran
    store.append_event(attempt_started(1))
    store.append_events([attempt_started(2), attempt_started(3)])
    events = [attempt_started(1), attempt_started(2), attempt_started(3)]
    lines = b"".join(encode(e) for e in events)
    assert raw.get(JOURNAL) == lines
    assert store.journal_size() == len(lines)
    read = make(TICKET).read_events()
    assert read.events == events
    assert read.torn_tail is None


def test_the_running_phase_is_the_last_started_of_that_attempt(store: Store) -> None:
    from tf_fsm.core.journal import PhaseStarted

    def started(attempt: int, phase: str) -> PhaseStarted:
        return PhaseStarted(ts=TS, ticket=TICKET, attempt=attempt, phase=phase, roles=[])

    assert store.running_phase(1) is None
    store.append_events([started(1, "implement"), started(1, "review"), started(2, "research")])
    assert store.running_phase(1) == "review"
    assert store.running_phase(2) == "research"
    assert store.running_phase(3) is None


def test_secrets_in_events_are_redacted_before_they_are_kept(store: Store, raw: Raw) -> None:
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
    kept = raw.get(JOURNAL) or b""
    for secret in (API_KEY, SECRET, "hunter2hunter2"):
        assert secret.encode() not in kept
    finished, started = store.read_events().events
    assert isinstance(finished, AttemptFinished) and isinstance(started, AttemptStarted)
    assert finished.reason == "agent said: export OPENAI_API_KEY=[REDACTED]; [REDACTED] leaked"
    assert started.escalation == {"apiKey": "[REDACTED]", "worker": "[REDACTED]"}


def test_torn_tail_is_cut_and_recorded_before_the_next_append(store: Store, raw: Raw) -> None:
    store.append_event(attempt_started(1))
    torn = encode(attempt_started(2))[:40] + f"token={API_KEY}".encode()
    raw.put(JOURNAL, (raw.get(JOURNAL) or b"") + torn)

    read = store.read_events()  # reading reports the torn tail and writes nothing
    assert read.events == [attempt_started(1)]
    assert read.torn_tail == torn
    assert (raw.get(JOURNAL) or b"").endswith(torn)

    store.append_event(attempt_started(3))
    first, dropped, third = store.read_events().events
    assert first == attempt_started(1)
    assert third == attempt_started(3)
    assert isinstance(dropped, JournalTailDropped)
    assert dropped.bytes == len(torn)
    assert len(dropped.preview) <= 80
    assert dropped.preview.startswith('{"event":"AttemptStarted"')
    assert API_KEY.encode() not in (raw.get(JOURNAL) or b"")
    assert store.read_events().torn_tail is None


def test_last_event_missing_only_its_newline_is_kept(store: Store, raw: Raw) -> None:
    raw.put(JOURNAL, encode(attempt_started(1))[:-1])
    store.append_event(attempt_started(2))
    assert store.read_events().events == [attempt_started(1), attempt_started(2)]


def test_a_journal_that_is_only_a_torn_tail_is_repaired(store: Store, raw: Raw) -> None:
    raw.put(JOURNAL, b'{"event":"attem')
    store.append_event(attempt_started(1))
    dropped, started = store.read_events().events
    assert isinstance(dropped, JournalTailDropped) and dropped.bytes == 15
    assert started == attempt_started(1)


def test_corrupt_middle_line_is_a_corrupt_state_error_and_is_not_touched(
    store: Store, raw: Raw
) -> None:
    data = encode(attempt_started(1)) + b"{broken\n" + encode(attempt_started(2))
    raw.put(JOURNAL, data)
    with pytest.raises(CorruptStateError) as info:
        store.read_events()
    assert info.value.path == raw.where(JOURNAL)
    assert info.value.problem.startswith("line 2: invalid JSON")
    assert raw.get(JOURNAL) == data


def test_append_refuses_to_cut_a_complete_but_invalid_last_line(store: Store, raw: Raw) -> None:
    data = encode(attempt_started(1)) + b'{"event":"AttemptStarted","ts":"not a time","ticket":"x"}'
    raw.put(JOURNAL, data)
    with pytest.raises(CorruptStateError, match="last line: AttemptStarted: "):
        store.append_event(attempt_started(2))
    assert raw.get(JOURNAL) == data


def test_reading_a_missing_journal_creates_nothing(
    store: Store, snapshot: Callable[[], object]
) -> None:
    before = snapshot()
    assert store.read_events().events == []
    assert store.journal_size() is None
    assert snapshot() == before


def test_writes_in_a_batch_are_readable_at_once_and_kept(
    store: Store, make: Callable[[str], Store]
) -> None:
    durable_points: list[str] = []
    with store.lock(), store.batch(lambda: durable_points.append("tk")):
        store.append_event(attempt_started(1), durable=False)
        assert make(TICKET).read_events().events == [attempt_started(1)]
        store.write_artifact("notes.md", "x\n")
        assert make(TICKET).read_artifact("notes.md") == "x\n"
        store.append_event(attempt_started(2))
        assert durable_points == []
    events = make(TICKET).read_events().events
    assert events[:2] == [attempt_started(1), attempt_started(2)]
    assert [e.event for e in events[2:]] == ["ViewsSynced"]  # the batch's durable point
    assert durable_points == ["tk"]  # the caller's own files made durable with it
