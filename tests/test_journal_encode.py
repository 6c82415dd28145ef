"""The journal's line encoder (pydantic's serializer) writes the text `json.dumps` of the
event's `model_dump` wrote, so lines read back as the events written."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from tf_fsm.core import journal as ev
from tf_fsm.core.journal_codec import decode, encode, encode_text
from tf_fsm.storage.redact import Redactor
from tf_fsm.storage.redacted_json import redacted_line, redacted_lines

TS = "2026-01-01T00:00:00.000Z"
# any text but lone surrogates, which are not UTF-8 (neither encoder writes them)
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


def compact(event: ev.Event) -> str:
    """The encoder tf_fsm used before: json.dumps of the JSON-mode dump."""
    return json.dumps(event.model_dump(mode="json"), ensure_ascii=False, separators=(",", ":"))


@given(failure=TEXT, tail=TEXT, code=st.integers(-(2**40), 2**40), extra=TEXT)
def test_a_line_is_the_text_json_dumps_wrote(
    failure: str, tail: str, code: int, extra: str
) -> None:
    event = ev.PhaseFailed(
        ts=TS,
        ticket="t-1",
        attempt=1,
        phase="review",
        role="reviewer-general",
        failure=failure,
        exitCode=code,
        stderrTail=tail,
        log="l",
        failureClass="crash",
        addedLater=[extra, {"k": extra}],
    )
    assert encode_text(event) == compact(event)
    line = encode(event)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert decode(line).events == [event]


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=0), st.integers(0, 10**9))
def test_usage_numbers_read_back_equal(cost: float, tokens: int) -> None:
    event = ev.InvocationFinished(
        ts=TS,
        ticket="t-1",
        attempt=1,
        phase="review",
        role="r",
        model="m",
        artifact="a",
        sha256=None,
        ok=True,
        durationMs=3,
        usage={"costUsd": cost, "input": tokens},
        failureClass=None,
    )
    assert json.loads(encode_text(event)) == json.loads(compact(event))
    assert decode(encode(event)).events == [event]


def test_redacted_lines_say_whether_redaction_changed_them() -> None:
    plain = ev.PhaseFailed(
        ts=TS,
        ticket="t-1",
        attempt=1,
        phase="fix",
        role="fixer",
        failure="exit 1",
        exitCode=1,
        stderrTail="",
        log="l",
        failureClass="crash",
    )
    secret = plain.model_copy(update={"stderrTail": "token=s3cr3t-value-123"})
    data, changed = redacted_lines([plain, plain], Redactor())
    assert not changed and decode(data).events == [plain, plain]
    data, changed = redacted_lines([plain, secret], Redactor())
    assert changed and b"s3cr3t" not in data
    assert data == redacted_line(plain, Redactor()) + redacted_line(secret, Redactor())
