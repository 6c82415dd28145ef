"""TicketStore's own details: its file layout, the ticket id rule, the atomic writes of
tf_fsm.fs.atomic it is built on, and the lock's owner note. What every store must do is the
conformance suite's (tests/conformance/test_store.py), which runs against TicketStore too."""

from __future__ import annotations

import json
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import cast

import pytest

from tf_fsm.conformance.stores import BACKENDS, Holders
from tf_fsm.errors import InvalidTicketIdError, TicketLockedError
from tf_fsm.storage.store import (
    TicketStore,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    validate_ticket_id,
)


@pytest.fixture
def store(tmp_path: Path) -> TicketStore:
    # where tests.conformance.stores.ticket_store(tmp_path, ...) puts it, so a holder process
    # started with that factory locks this ticket
    return TicketStore(tmp_path / "knowledge", "pt-uu03")


def _listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --- ticket ids --------------------------------------------------------------------------


@pytest.mark.parametrize("ticket_id", ["pt-te9b", "abc-123", "T_1.2", "_x", "9", "a" * 128])
def test_valid_ticket_ids(ticket_id: str) -> None:
    assert validate_ticket_id(ticket_id) == ticket_id


@pytest.mark.parametrize(
    ("ticket_id", "reason"),
    [
        ("../x", "path separator"),
        ("a/b", "path separator"),
        ("a\\b", "path separator"),
        (".hidden", "must start with"),
        ("a..b", "'..'"),
        ("..", "'..'"),
        ("", "empty"),
        ("a" * 129, "129 characters"),
        ("a b", "whitespace"),
        ("a\tb", "whitespace"),
        ("\x00", "NUL"),
        ("-rf", "must start with"),
        ("tické", "'é'"),
        ("a:b", "':'"),
    ],
)
def test_invalid_ticket_ids_name_the_reason(ticket_id: str, reason: str) -> None:
    with pytest.raises(InvalidTicketIdError) as info:
        validate_ticket_id(ticket_id)
    assert reason in info.value.reason
    assert info.value.ticket_id == ticket_id


def test_store_paths(tmp_path: Path) -> None:
    s = TicketStore(tmp_path / "k", "pt-1")
    assert s.dir == tmp_path / "k" / "tickets" / "pt-1"
    assert s.retry_state_path == s.dir / "retry-state.json"
    assert s.journal_path == s.dir / "events.jsonl"
    assert s.chain_context_path == s.dir / "chain-context.json"


# --- atomic writes -----------------------------------------------------------------------


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """A directory of its own (conftest puts a project root in tmp_path)."""
    directory = tmp_path / "files"
    directory.mkdir()
    return directory


def test_atomic_write_replaces_content_and_leaves_no_temp_file(files: Path) -> None:
    path = files / "sub" / "dir" / "f.json"
    atomic_write_json(path, {"a": "é", "b": [1]}, within=None)
    assert path.read_text(encoding="utf-8") == '{\n  "a": "é",\n  "b": [\n    1\n  ]\n}\n'
    atomic_write_text(path, "second", within=None)
    assert path.read_text(encoding="utf-8") == "second"
    atomic_write_bytes(path, b"third", within=None)
    assert path.read_bytes() == b"third"
    assert _listing(path.parent) == ["f.json"]


def test_atomic_write_keeps_the_mode_of_the_file_it_replaces(files: Path) -> None:
    path = files / "f.txt"
    path.write_text("old")
    path.chmod(0o640)
    atomic_write_text(path, "new", within=None)
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    fresh = files / "fresh.txt"
    atomic_write_text(fresh, "x", within=None)
    assert stat.S_IMODE(fresh.stat().st_mode) != 0o600  # not mkstemp's private mode


def test_unserializable_object_leaves_old_content_and_no_temp_file(files: Path) -> None:
    path = files / "state.json"
    atomic_write_json(path, {"ok": True}, within=None)
    before = path.read_bytes()
    with pytest.raises(TypeError):
        atomic_write_json(path, {"bad": object()}, within=None)
    assert path.read_bytes() == before
    assert _listing(files) == ["state.json"]


def test_failure_while_writing_removes_the_temp_file(files: Path) -> None:
    path = files / "state.json"
    atomic_write_text(path, "old", within=None)
    with pytest.raises(TypeError):
        # fails inside the temp file write
        atomic_write_bytes(path, cast(bytes, "not bytes"), within=None)
    assert path.read_text() == "old"
    assert _listing(files) == ["state.json"]


def test_failure_at_the_rename_removes_the_temp_file(files: Path) -> None:
    target = files / "occupied"
    (target / "child").mkdir(parents=True)  # a non-empty directory cannot be replaced by a file
    with pytest.raises(OSError):
        atomic_write_text(target, "x", within=None)
    assert _listing(files) == ["occupied"]


# --- the lock's owner note -----------------------------------------------------------------


@pytest.fixture
def holder(store: TicketStore, tmp_path: Path) -> Iterator[Holders]:
    held = Holders()
    try:
        held.start(BACKENDS["TicketStore"].spec, tmp_path, store.ticket_id)
        yield held
    finally:
        held.close()


def test_the_owner_note_names_the_holder(store: TicketStore, holder: Holders) -> None:
    (proc,) = holder.procs
    owner = json.loads(store.lock_owner_path.read_text())
    assert owner["pid"] == proc.pid
    assert owner["note"] == "test holder"
    assert owner["hostname"]
    with pytest.raises(TicketLockedError) as info, store.lock():
        pytest.fail("acquired a lock another process holds")
    assert info.value.lock_path == store.dir / ".lock"


def test_the_owner_note_goes_with_the_lock_and_the_lock_file_stays(
    store: TicketStore, holder: Holders
) -> None:
    holder.release(holder.procs[0])
    assert not store.lock_owner_path.exists()
    assert store.lock_path.exists()  # the file stays; the kernel lock is what counts
    with store.lock():
        assert json.loads(store.lock_owner_path.read_text())["pid"] == os.getpid()


def test_a_killed_holders_owner_note_is_replaced(store: TicketStore, holder: Holders) -> None:
    (proc,) = holder.procs
    holder.kill(proc)
    # The dead holder's owner file is still there; acquiring replaces it.
    assert json.loads(store.lock_owner_path.read_text())["pid"] == proc.pid
    with store.lock("after kill"):
        owner = json.loads(store.lock_owner_path.read_text())
        assert owner["pid"] == os.getpid()
        assert owner["note"] == "after kill"
    assert not store.lock_owner_path.exists()


def test_busy_lock_without_owner_file_still_names_the_holder(
    store: TicketStore, holder: Holders
) -> None:
    (proc,) = holder.procs
    store.lock_owner_path.unlink()
    with pytest.raises(TicketLockedError) as info, store.lock():
        pass
    if sys.platform == "linux":  # found as the process that has the lock's socket open
        assert info.value.holder_pid == proc.pid
        assert f"pid {proc.pid}" in str(info.value)
    else:
        assert info.value.holder_pid is None
        assert "holder pid unknown" in str(info.value)
