"""The Store suite: "the ticket's journal is these lines". A host that runs a phase of a
ticket another host ran before rewrites the ticket's journal from the history's copy of it
(`replace_journal`) and rebuilds every view from that journal, as the crash recovery does;
what a run added is read back as the journal's raw lines (`journal_lines`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from tf_fsm.conformance.stores import API_KEY, TICKET, Raw, attempt_started, state_of
from tf_fsm.core.journal import AttemptStarted
from tf_fsm.core.journal_codec import encode_text
from tf_fsm.errors import CorruptStateError
from tf_fsm.fs.atomic import json_text
from tf_fsm.storage.layout import CHAIN_CONTEXT, JOURNAL, RETRY_STATE
from tf_fsm.storage.protocol import Store

OTHER = "pt-other"


def history_of(make: Callable[[str], Store], build: Callable[[Store], None]) -> list[str]:
    """Journal lines another host's run made: `build` runs on the store of ticket OTHER (a
    journal of its own beside this ticket's), and its lines are renamed to this ticket."""
    other = make(OTHER)
    build(other)
    return [line.replace(OTHER, TICKET) for line in other.journal_lines()]


def test_the_journal_becomes_the_lines_given_and_a_longer_one_is_cut(store: Store) -> None:
    store.append_events([attempt_started(n) for n in (1, 2, 3)])
    lines = store.journal_lines()
    assert len(lines) == 3
    with store.lock():
        store.replace_journal(lines[:1])
    assert store.journal_lines() == lines[:1]
    assert store.read_events().events == [attempt_started(1)]
    store.append_event(attempt_started(2))  # appends go on after the lines given
    assert store.read_events().events == [attempt_started(1), attempt_started(2)]


def test_the_views_are_rebuilt_from_the_lines_images(
    store: Store, raw: Raw, make: Callable[[str], Store]
) -> None:
    def run(other: Store) -> None:
        with other.lock(), other.batch():
            other.save_retry_state(state_of().model_copy(update={"ticketId": OTHER}))
            other.save_view(CHAIN_CONTEXT, {"ticketId": OTHER, "attempt": 1})

    lines = history_of(make, run)
    raw.put(RETRY_STATE, b"{ torn")  # whatever this host had: the lines win
    with store.lock():
        assert sorted(store.replace_journal(lines)) == sorted([RETRY_STATE, CHAIN_CONTEXT])
    assert store.load_retry_state() == state_of()
    kept = raw.get(CHAIN_CONTEXT)
    assert kept is not None and kept.decode() == json_text({"ticketId": TICKET, "attempt": 1})
    assert store.journal_lines() == lines


def test_a_view_the_lines_have_no_image_of_is_removed(store: Store, raw: Raw) -> None:
    with store.lock(), store.batch():
        store.save_retry_state(state_of())
    assert raw.get(RETRY_STATE) is not None
    with store.lock():
        store.replace_journal([encode_text(attempt_started(1))])
    assert raw.get(RETRY_STATE) is None and store.load_retry_state() is None
    assert store.read_events().events == [attempt_started(1)]


def test_a_reset_in_the_lines_leaves_no_retry_state(
    store: Store, raw: Raw, make: Callable[[str], Store]
) -> None:
    def run(other: Store) -> None:
        with other.lock(), other.batch():
            other.save_retry_state(state_of().model_copy(update={"ticketId": OTHER}))
        with other.lock():
            other.reset_retry_state(datetime(2026, 2, 14, tzinfo=UTC))

    lines = history_of(make, run)
    with store.lock(), store.batch():
        store.save_retry_state(state_of())
    with store.lock():
        store.replace_journal(lines)
    assert raw.get(RETRY_STATE) is None


def test_no_lines_leave_no_journal(store: Store, raw: Raw) -> None:
    with store.lock(), store.batch():
        store.save_retry_state(state_of())
    with store.lock():
        store.replace_journal([])
    assert store.journal_size() is None and store.journal_lines() == []
    assert raw.get(JOURNAL) is None and raw.get(RETRY_STATE) is None


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param("{ not json", id="not-json"),
        pytest.param('{"type": "NoSuchEvent"}', id="not-an-event"),
        pytest.param(encode_text(attempt_started(1)) + "\n" + "{}", id="line-break"),
    ],
)
def test_lines_that_are_not_a_journal_change_nothing(store: Store, raw: Raw, bad: str) -> None:
    with store.lock(), store.batch():
        store.save_retry_state(state_of())
    journal, view = raw.get(JOURNAL), raw.get(RETRY_STATE)
    with store.lock(), pytest.raises(CorruptStateError, match="line 2"):
        store.replace_journal([encode_text(attempt_started(1)), bad])
    assert (raw.get(JOURNAL), raw.get(RETRY_STATE)) == (journal, view)


def test_another_tickets_lines_are_refused(store: Store, raw: Raw) -> None:
    foreign = AttemptStarted(**{**attempt_started(1).model_dump(), "ticket": OTHER})
    with store.lock(), pytest.raises(ValueError, match=OTHER):
        store.replace_journal([encode_text(foreign)])
    assert raw.get(JOURNAL) is None


def test_secrets_in_the_lines_are_redacted_and_clean_lines_kept_as_given(store: Store) -> None:
    clean = encode_text(attempt_started(1))
    secret = clean.replace('"initial"', f'"initial key={API_KEY}"')
    with store.lock():
        store.replace_journal([clean, secret])
    kept = store.journal_lines()
    assert kept[0] == clean and len(kept) == 2
    assert API_KEY not in kept[1] and "initial" in kept[1]


def test_the_raw_lines_leave_out_a_torn_tail(store: Store, raw: Raw) -> None:
    store.append_event(attempt_started(1))
    raw.put(JOURNAL, (raw.get(JOURNAL) or b"") + b'{"type": "Attempt')
    assert store.journal_lines() == [encode_text(attempt_started(1))]
