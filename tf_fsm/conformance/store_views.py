"""The Store suite: the journal is the commit point and the views are rebuilt from it.

Every Store must journal a view's after-image before writing the view, hand back the
artifacts written since the last `take_written` with their sha256, rebuild the views after a
journal that a crash cut short (no ViewsSynced at its end), and leave them alone after a clean
end."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from tf_fsm.conformance.stores import API_KEY, TICKET, Raw, StoreBackend, attempt_started, state_of
from tf_fsm.core.journal import ViewSaved, ViewsChecked, ViewsSynced
from tf_fsm.fs.atomic import json_text
from tf_fsm.storage.layout import CHAIN_CONTEXT, JOURNAL, RETRY_STATE
from tf_fsm.storage.protocol import Store


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_view_is_journaled_before_it_is_written_and_redacted_in_both(
    store: Store, raw: Raw
) -> None:
    content = {"ticketId": TICKET, "attempt": 1, "note": f"key={API_KEY}"}
    store.save_view(CHAIN_CONTEXT, content)
    image = store.read_events().events[-1]
    assert isinstance(image, ViewSaved) and image.file == CHAIN_CONTEXT
    kept = (raw.get(CHAIN_CONTEXT) or b"").decode()
    assert API_KEY not in kept and API_KEY not in json.dumps(image.content)
    assert kept == json_text(image.content)  # the view is exactly its image


def test_deferred_views_are_journaled_at_once_and_written_at_the_end(
    store: Store, raw: Raw
) -> None:
    content = {"ticketId": TICKET, "attempt": 1}
    with store.deferred_views():
        store.save_view(CHAIN_CONTEXT, content)
        store.save_view(CHAIN_CONTEXT, {**content, "attempt": 2})
        images = [e for e in store.read_events().events if isinstance(e, ViewSaved)]
        assert [e.content["attempt"] for e in images] == [1, 2]
    assert raw.get(CHAIN_CONTEXT) == json_text({**content, "attempt": 2}).encode()
    with pytest.raises(KeyError), store.deferred_views():  # however the block ends
        store.save_view(RETRY_STATE, state_of().to_json_dict())
        raise KeyError("the attempt's start failed")
    assert raw.get(RETRY_STATE) == json_text(state_of().to_json_dict()).encode()


def test_only_the_kept_views_have_images(store: Store) -> None:
    with pytest.raises(ValueError, match="not a view"):
        store.save_view("review.md", {"x": 1})
    assert store.read_artifact("review.md") is None
    assert store.read_events().events == []


def test_take_written_names_each_artifact_once_with_its_last_sha256(store: Store) -> None:
    store.write_artifact("review.md", "one\n")
    store.write_artifact("logs/attempt-1/review.log", "log\n")
    store.write_artifact("review.md", "two\n")
    store.write_artifact("logs/attempt-1/review.log", "log\n", only_if_changed=True)
    agent_file = store.files.path("review-general.md")  # an agent's: its caller journals it
    agent_file.parent.mkdir(parents=True, exist_ok=True)
    agent_file.write_bytes(f"key={API_KEY}\n".encode())
    assert store.files.take("review-general.md") is not None
    assert store.take_written() == {
        "review.md": _sha(b"two\n"),
        "logs/attempt-1/review.log": _sha(b"log\n"),
    }
    assert store.take_written() == {}  # forgotten once handed over


def crash_after_saving(store: Store, make: Callable[[str], Store]) -> Store:
    """A run that saved attempt 1's state and died before its durable point: the journal
    does not end with ViewsSynced. Returns a new store, as the next run would build."""
    with store.lock(), store.batch():
        store.save_retry_state(state_of())
    store.append_event(attempt_started(1))  # the next run's work, cut short
    return make(TICKET)


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda raw: raw.put(RETRY_STATE, b""), id="empty"),
        pytest.param(lambda raw: raw.put(RETRY_STATE, raw.get(RETRY_STATE)[:40]), id="torn"),
        pytest.param(lambda raw: raw.delete(RETRY_STATE), id="missing"),
        pytest.param(
            lambda raw: raw.put(RETRY_STATE, json_text({"version": 1}).encode()), id="stale"
        ),
    ],
)
def test_a_damaged_view_is_rebuilt_from_its_image_after_a_crash(
    store: Store,
    backend: StoreBackend,
    make: Callable[[str], Store],
    damage: Callable[[Raw], None],
) -> None:
    after = crash_after_saving(store, make)
    raw = backend.raw(after)
    expected = raw.get(RETRY_STATE)
    damage(raw)
    assert after.repair_views(after.read_events().events) == [RETRY_STATE]
    assert raw.get(RETRY_STATE) == expected
    assert after.load_retry_state() == state_of()
    checked = after.read_events().events[-1]
    assert isinstance(checked, ViewsChecked) and checked.repaired == [RETRY_STATE]


def test_whole_views_are_left_alone_and_the_check_is_journaled(
    store: Store, raw: Raw, make: Callable[[str], Store]
) -> None:
    after = crash_after_saving(store, make)
    stamp = raw.stamp(RETRY_STATE)
    assert after.repair_views(after.read_events().events) == []
    assert raw.stamp(RETRY_STATE) == stamp
    checked = after.read_events().events[-1]
    assert isinstance(checked, ViewsChecked) and checked.repaired == []


def test_after_a_clean_end_a_view_edited_since_is_trusted(
    store: Store, raw: Raw, make: Callable[[str], Store]
) -> None:
    """pi-ticketflow (or a person) may rewrite retry-state.json between runs: only a crash
    makes the journal's image win."""
    with store.lock(), store.batch():
        store.save_retry_state(state_of())
    assert isinstance(store.read_events().events[-1], ViewsSynced)
    edited = state_of().model_copy(update={"retryCount": 1})
    raw.put(RETRY_STATE, json_text(edited.to_json_dict()).encode())
    again = make(TICKET)
    assert again.repair_views(again.read_events().events) == []
    loaded = again.load_retry_state()
    assert loaded is not None and loaded.retryCount == 1


def test_a_reset_retry_state_is_not_brought_back(
    store: Store, raw: Raw, make: Callable[[str], Store]
) -> None:
    after = crash_after_saving(store, make)
    with after.lock():
        backup = after.reset_retry_state(datetime(2026, 2, 14, tzinfo=UTC))
    assert backup is not None and raw.get(RETRY_STATE) is None
    assert after.repair_views(after.read_events().events) == []
    assert raw.get(RETRY_STATE) is None


def test_reads_see_appends_by_another_store_of_the_same_ticket(
    store: Store, make: Callable[[str], Store]
) -> None:
    with store.lock(), store.batch():
        store.append_event(attempt_started(1), durable=False)
        assert len(store.read_events().events) == 1
        make(TICKET).append_event(attempt_started(2))  # another writer, same journal
        assert store.read_events().events == [attempt_started(1), attempt_started(2)]
        store.append_event(attempt_started(3), durable=False)
        assert make(TICKET).read_events().events == [attempt_started(n) for n in (1, 2, 3)]


def test_a_journal_deleted_during_a_run_is_created_again(store: Store, raw: Raw) -> None:
    with store.lock(), store.batch():
        store.append_event(attempt_started(1), durable=False)
        raw.delete(JOURNAL)
        store.append_event(attempt_started(2), durable=False)
        assert store.read_events().events == [attempt_started(2)]
