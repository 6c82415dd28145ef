"""Conformance: the journal is the commit point and the other files are views of it.

Every Store must journal a view's after-image before writing the view, hand back the files
written since the last `take_written` with their sha256, rebuild the views after a journal
that a crash cut short (no ViewsSynced at its end), and leave them alone after a clean end.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from datetime import UTC, datetime

import pytest

from tests.conformance.stores import API_KEY, TICKET, attempt_started, state_of
from tf_fsm.core.journal import ViewSaved, ViewsChecked, ViewsSynced
from tf_fsm.fs.atomic import json_text
from tf_fsm.storage.protocol import Store

RETRY = "retry-state.json"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_a_view_is_journaled_before_it_is_written_and_redacted_in_both(store: Store) -> None:
    content = {"ticketId": TICKET, "attempt": 1, "note": f"key={API_KEY}"}
    store.save_view("chain-context.json", content)
    image = store.read_events().events[-1]
    assert isinstance(image, ViewSaved) and image.file == "chain-context.json"
    on_disk = store.chain_context_path.read_text(encoding="utf-8")
    assert API_KEY not in on_disk and API_KEY not in json.dumps(image.content)
    assert on_disk == json_text(image.content)  # the file is exactly its image


def test_only_the_kept_views_have_images(store: Store) -> None:
    with pytest.raises(ValueError, match="not a view"):
        store.save_view("review.md", {"x": 1})
    assert not store.artifact_path("review.md").exists()
    assert store.read_events().events == []


def test_take_written_names_each_file_once_with_its_last_sha256(store: Store) -> None:
    store.write_artifact("review.md", "one\n")
    store.write_artifact("logs/attempt-1/review.log", "log\n")
    store.write_artifact("review.md", "two\n")
    store.write_artifact("logs/attempt-1/review.log", "log\n", only_if_changed=True)
    agent_file = store.dir / "review-general.md"  # an agent's: its caller journals it
    agent_file.write_bytes(f"key={API_KEY}\n".encode())
    assert store.redact_agent_file(agent_file) is not None
    assert store.take_written() == {
        "review.md": sha(b"two\n"),
        "logs/attempt-1/review.log": sha(b"log\n"),
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
        pytest.param(lambda p: p.write_bytes(b""), id="empty"),
        pytest.param(lambda p: p.write_bytes(p.read_bytes()[:40]), id="torn"),
        pytest.param(lambda p: p.unlink(), id="missing"),
        pytest.param(lambda p: p.write_text(json_text({"version": 1})), id="stale"),
    ],
)
def test_a_damaged_view_is_rebuilt_from_its_image_after_a_crash(
    store: Store, make: Callable[[str], Store], damage: Callable[..., None]
) -> None:
    after = crash_after_saving(store, make)
    expected = after.retry_state_path.read_bytes()
    damage(after.retry_state_path)
    assert after.repair_views(after.read_events().events) == [RETRY]
    assert after.retry_state_path.read_bytes() == expected
    assert after.load_retry_state() == state_of()
    checked = after.read_events().events[-1]
    assert isinstance(checked, ViewsChecked) and checked.repaired == [RETRY]


def test_whole_views_are_left_alone_and_the_check_is_journaled(
    store: Store, make: Callable[[str], Store]
) -> None:
    after = crash_after_saving(store, make)
    mtime = after.retry_state_path.stat().st_mtime_ns
    assert after.repair_views(after.read_events().events) == []
    assert after.retry_state_path.stat().st_mtime_ns == mtime
    checked = after.read_events().events[-1]
    assert isinstance(checked, ViewsChecked) and checked.repaired == []


def test_after_a_clean_end_a_view_edited_since_is_trusted(
    store: Store, make: Callable[[str], Store]
) -> None:
    """pi-ticketflow (or a person) may rewrite retry-state.json between runs: only a crash
    makes the journal's image win."""
    with store.lock(), store.batch():
        store.save_retry_state(state_of())
    assert isinstance(store.read_events().events[-1], ViewsSynced)
    edited = state_of().model_copy(update={"retryCount": 1})
    store.retry_state_path.write_text(json_text(edited.to_json_dict()))
    again = make(TICKET)
    assert again.repair_views(again.read_events().events) == []
    loaded = again.load_retry_state()
    assert loaded is not None and loaded.retryCount == 1


def test_a_reset_retry_state_is_not_brought_back(
    store: Store, make: Callable[[str], Store]
) -> None:
    after = crash_after_saving(store, make)
    with after.lock():
        backup = after.reset_retry_state(datetime(2026, 2, 14, tzinfo=UTC))
    assert backup is not None and not after.retry_state_path.exists()
    assert after.repair_views(after.read_events().events) == []
    assert not after.retry_state_path.exists()


def test_reads_see_appends_by_another_store_of_the_same_ticket(
    store: Store, make: Callable[[str], Store]
) -> None:
    with store.lock(), store.batch():
        store.append_event(attempt_started(1), durable=False)
        assert len(store.read_events().events) == 1
        make(TICKET).append_event(attempt_started(2))  # another writer, same file
        assert store.read_events().events == [attempt_started(1), attempt_started(2)]
        store.append_event(attempt_started(3), durable=False)
        assert make(TICKET).read_events().events == [attempt_started(n) for n in (1, 2, 3)]


def test_a_journal_deleted_during_a_run_is_created_again(store: Store) -> None:
    with store.lock(), store.batch():
        store.append_event(attempt_started(1), durable=False)
        store.journal_path.unlink()
        store.append_event(attempt_started(2), durable=False)
        assert store.read_events().events == [attempt_started(2)]
