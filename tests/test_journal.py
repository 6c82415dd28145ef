from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Literal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tf_fsm.core import journal
from tf_fsm.core.journal import (
    AttemptFinished,
    AttemptStarted,
    Event,
    JournalTailDropped,
    RetryStateReset,
    timestamp,
)
from tf_fsm.core.journal_codec import JournalLineError, JournalRead, decode, encode

TS = "2026-02-14T02:37:05.123Z"

EXAMPLES: list[Event] = [
    AttemptStarted(
        ts=TS,
        ticket="pt-uu03",
        attempt=1,
        trigger="initial",
        escalation={"fixer": None, "reviewerSecondOpinion": None, "worker": "big-model"},
    ),
    AttemptFinished(
        ts=TS,
        ticket="pt-uu03",
        attempt=1,
        status="blocked",
        counts={"Critical": 1, "Major": 0},
        reason="quality gate: 1 Critical",
    ),
    AttemptFinished(ts=TS, ticket="pt-uu03", attempt=2, status="error", counts=None, reason=None),
    RetryStateReset(
        ts=TS, ticket="pt-uu03", backup="retry-state.json.bak.20260214T023705Z", retryCountBefore=2
    ),
    RetryStateReset(ts=TS, ticket="pt-uu03", backup=None, retryCountBefore=None),
    JournalTailDropped(ts=TS, ticket="pt-uu03", bytes=17, preview='{"event":"attem\nö'),
]


def test_timestamp_is_utc_with_milliseconds_and_z() -> None:
    moment = datetime(2026, 2, 14, 3, 37, 5, 123999, tzinfo=timezone(timedelta(hours=1)))
    assert timestamp(moment) == TS


@pytest.mark.parametrize("event", EXAMPLES, ids=lambda e: type(e).__name__)
def test_every_event_type_round_trips(event: Event) -> None:
    line = encode(event)
    assert line.endswith(b"\n")
    assert line.count(b"\n") == 1
    compact = json.dumps(json.loads(line), ensure_ascii=False, separators=(",", ":"))
    assert line == compact.encode() + b"\n"
    assert json.loads(line)["event"] == event.event
    (back,) = decode(line).events
    assert type(back) is type(event)
    assert back == event


def test_the_event_type_name_comes_first_in_the_line() -> None:
    assert encode(EXAMPLES[0]).startswith(b'{"event":"AttemptStarted","ts":')


def test_a_journal_of_all_types_decodes_in_order() -> None:
    data = b"".join(encode(e) for e in EXAMPLES)
    assert decode(data) == JournalRead(EXAMPLES, None)


def test_empty_input_has_no_events() -> None:
    assert decode(b"") == JournalRead([], None)


def test_unknown_event_type_is_kept_as_a_plain_event_with_its_fields() -> None:
    line = (
        b'{"event":"from_the_future","ts":"2030-01-01T00:00:00.000Z","ticket":"t1","x":{"y":[1]}}\n'
    )
    (event,) = decode(line).events
    assert type(event) is Event
    assert event.event == "from_the_future"
    assert event.model_dump()["x"] == {"y": [1]}
    # Re-encoded, it keeps every field; only the base fields' defaults are spelled out.
    assert json.loads(encode(event)) == {**json.loads(line), "attempt": None}


def test_unknown_fields_of_a_known_event_survive() -> None:
    data = json.loads(encode(EXAMPLES[0]))
    data["addedLater"] = "v2"
    (event,) = decode(json.dumps(data).encode() + b"\n").events
    assert isinstance(event, AttemptStarted)
    assert json.loads(encode(event))["addedLater"] == "v2"


def test_defining_an_event_registers_it() -> None:
    class PhaseSkippedForTest(Event):
        event: Literal["phase_skipped_for_test"] = "phase_skipped_for_test"
        phase: str

    line = (
        b'{"event":"phase_skipped_for_test","ts":"' + TS.encode() + b'","ticket":"t","phase":"x"}'
    )
    (event,) = decode(line).events
    assert isinstance(event, PhaseSkippedForTest)
    assert event.phase == "x"
    assert journal.event_types()["phase_skipped_for_test"] is PhaseSkippedForTest

    with pytest.raises(TypeError, match="already defined"):

        class Duplicate(Event):
            event: Literal["AttemptStarted"] = "AttemptStarted"


def test_a_complete_last_line_without_newline_is_an_event() -> None:
    data = b"".join(encode(e) for e in EXAMPLES)[:-1]
    assert decode(data) == JournalRead(EXAMPLES, None)


@pytest.mark.parametrize(
    "tail",
    [b"{", b'{"event":"attempt_sta', b'{"event":"x","ts":"2026', b"\xc3", b"garbage", b"  "],
)
def test_an_unparsable_last_line_without_newline_is_a_torn_tail(tail: bytes) -> None:
    head = b"".join(encode(e) for e in EXAMPLES[:2])
    assert decode(head + tail) == JournalRead(EXAMPLES[:2], tail)


def test_a_cut_multibyte_character_is_a_torn_tail() -> None:
    line = encode(EXAMPLES[-1])
    cut = line[: line.index("ö".encode()) + 1]
    assert decode(cut) == JournalRead([], cut)


@given(st.data())
def test_any_prefix_of_a_valid_journal_decodes_to_a_prefix_of_its_events(
    data: st.DataObject,
) -> None:
    events = data.draw(st.lists(st.sampled_from(EXAMPLES), max_size=6))
    blob = b"".join(encode(e) for e in events)
    cut = data.draw(st.integers(min_value=0, max_value=len(blob)))
    read = decode(blob[:cut])
    assert read.events == events[: len(read.events)]
    complete_lines = blob[:cut].count(b"\n")
    assert len(read.events) in (complete_lines, complete_lines + 1)
    if read.torn_tail is not None:
        assert blob[:cut].endswith(read.torn_tail)


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        (b"not json", "invalid JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"ts":"2026-01-01T00:00:00Z","ticket":"t"}', "no `event`"),
        (b'{"event":"AttemptStarted","ts":"2026-01-01T00:00:00Z","ticket":"t"}', "trigger"),
        (b'{"event":"x","ts":"yesterday","ticket":"t"}', "ts: Value error"),
        (
            b'{"event":"AttemptFinished","ts":"'
            + TS.encode()
            + b'","ticket":"t","status":"closed",'
            b'"counts":{"Critical":"many"}}',
            "counts.Critical",
        ),
        (b"\xff\xfe", "not UTF-8"),
    ],
)
def test_a_bad_middle_line_raises_with_its_line_number(bad: bytes, problem: str) -> None:
    data = encode(EXAMPLES[0]) + encode(EXAMPLES[1]) + bad + b"\n" + encode(EXAMPLES[2])
    with pytest.raises(JournalLineError) as info:
        decode(data)
    assert info.value.line_number == 3
    assert problem in info.value.problem
    assert str(info.value).startswith("line 3: ")
    assert isinstance(info.value, ValueError)


def test_a_complete_but_invalid_last_line_is_corruption_not_a_torn_tail() -> None:
    data = encode(EXAMPLES[0]) + b'{"event":"AttemptStarted","ts":"' + TS.encode() + b'"}'
    with pytest.raises(JournalLineError) as info:
        decode(data)
    assert info.value.line_number == 2


def test_blank_lines_are_skipped_and_do_not_shift_line_numbers() -> None:
    data = encode(EXAMPLES[0]) + b"\n" + b"oops\n"
    with pytest.raises(JournalLineError) as info:
        decode(data)
    assert info.value.line_number == 3
    assert decode(encode(EXAMPLES[0]) + b"\n\n").events == EXAMPLES[:1]


def test_timestamps_from_now_validate() -> None:
    event = AttemptFinished(
        ts=timestamp(datetime.now(UTC)), ticket="t", status="closed", counts=None, reason=None
    )
    assert decode(encode(event)).events == [event]


def test_usage_token_counts_stay_integers_and_cost_a_float() -> None:
    from tf_fsm.core.journal import InvocationFinished
    from tf_fsm.core.journal_codec import decode, encode

    event = InvocationFinished(
        ts="2026-01-01T00:00:00.000Z",
        ticket="a",
        attempt=1,
        phase="review",
        role="r",
        model="m",
        artifact="review.md",
        sha256=None,
        ok=True,
        durationMs=1,
        usage={"inputTokens": 2000, "outputTokens": 200, "costUsd": 0.5},
    )
    line = encode(event)
    assert b'"inputTokens":2000,' in line
    usage = decode(line).events[0].usage  # type: ignore[attr-defined]
    assert usage == {"inputTokens": 2000, "outputTokens": 200, "costUsd": 0.5}
    assert isinstance(usage["inputTokens"], int)
