"""Choosing a store backend (tf_fsm.storage.backends) and what MemoryStore's exchange area
does beyond the protocol: made on first use with the artifacts in it, removed with its
namespace. The protocol itself is the conformance suite's (tests/conformance/test_store.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tf_fsm.conformance.stores import TICKET, state_of
from tf_fsm.errors import UsageError
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import memory_refused, open_store, ticket_stores, with_backend
from tf_fsm.storage.memory import MemoryStore, close_namespace
from tf_fsm.storage.store import TicketStore


def _settings(project: Path, backend: str | None = None) -> Path:
    data = {"storage": {"backend": backend}} if backend else {}
    path = project / ".tf" / "config" / "settings.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_the_setting_chooses_and_the_flag_wins(project: Path) -> None:
    _settings(project)
    files = load_settings(project)
    assert isinstance(open_store(project, files, "pt-1"), TicketStore)
    assert isinstance(open_store(project, files, "pt-1", "memory"), MemoryStore)
    _settings(project, "memory")
    memory = load_settings(project)
    assert isinstance(open_store(project, memory, "pt-1"), MemoryStore)
    assert isinstance(open_store(project, with_backend(memory, "files"), "pt-1"), TicketStore)
    assert with_backend(memory, None) is memory


def test_memory_is_refused_where_other_processes_look_naming_the_source(project: Path) -> None:
    _settings(project, "memory")
    settings = load_settings(project)
    with pytest.raises(UsageError, match=r'storage.backend is "memory": watch'):
        memory_refused(settings, None, "watch")
    with pytest.raises(UsageError, match="--store memory: ui"):
        memory_refused(with_backend(settings, "files"), "memory", "ui")
    memory_refused(settings, "files", "ralph")  # the flag wins: nothing refused


def test_memory_stores_of_a_project_share_records_and_leave_no_file(project: Path) -> None:
    _settings(project, "memory")
    stores = ticket_stores(project, load_settings(project))
    stores("pt-1").write_artifact("notes.md", "kept\n")
    assert stores("pt-1").read_artifact("notes.md") == "kept\n"
    assert stores("pt-2").read_artifact("notes.md") is None
    assert stores.ticket_ids() == ["pt-1", "pt-2"]
    assert not (project / ".tf" / "knowledge").exists()
    close_namespace(str(stores.knowledge))
    assert stores("pt-1").read_artifact("notes.md") is None  # closed: forgotten


def test_the_exchange_area_is_made_on_first_use_and_removed_with_its_namespace(
    tmp_path: Path,
) -> None:
    store = MemoryStore(str(tmp_path), TICKET)
    store.write_artifact("prompts/attempt-1/implement.md", "do it\n")
    store.save_retry_state(state_of())
    area = store.files.dir  # made now, with what the store kept so far
    assert (area / "prompts/attempt-1/implement.md").read_text() == "do it\n"
    assert not (area / "retry-state.json").exists()  # agents are not handed the retry state
    assert store.load_retry_state() == state_of()
    store.write_artifact("review.md", "later\n")  # copied as it is written
    assert (area / "review.md").read_text() == "later\n"
    (area / "implementation.md").write_text("an agent's\n")
    assert store.read_artifact("implementation.md") is None  # not the store's until taken
    assert store.files.take("implementation.md") is not None
    assert store.read_artifact("implementation.md") == "an agent's\n"
    close_namespace(str(tmp_path))
    assert not area.exists()
