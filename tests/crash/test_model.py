"""The recorder and the power-loss model themselves, on tiny recorded sequences of real calls."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.crash.model import CrashState, Machine, snapshot
from tests.crash.recorder import Op, Recorder
from tf_fsm.fs import atomic

DRAWS = 200


def recorded(
    root: Path, monkeypatch: pytest.MonkeyPatch, steps: Callable[[], object]
) -> tuple[Machine, list[Op]]:
    """Run `steps` with the recorder on; the machine after replaying its ops."""
    files, dirs = snapshot(root)
    recorder = Recorder(root)
    with monkeypatch.context() as patch:
        recorder.install(patch)
        steps()
    return Machine(files, dirs).replay(recorder.ops), recorder.ops


def draws(machine: Machine) -> list[CrashState]:
    return [machine.crash(random.Random(seed)) for seed in range(DRAWS)]  # noqa: S311


def test_the_recorder_sees_creates_writes_fsyncs_and_renames(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "f.txt"
    _, ops = recorded(
        tmp_path, monkeypatch, lambda: atomic.atomic_write_bytes(target, b"new", within=tmp_path)
    )
    kinds = [op.kind for op in ops]
    assert kinds == ["create", "write", "fsync", "rename", "fsync"], [str(op) for op in ops]
    assert ops[1].data == b"new" and ops[3].dst == "f.txt" and ops[4].is_dir
    outside = tmp_path.parent / f"{tmp_path.name}-outside.txt"

    def elsewhere() -> None:
        outside.write_bytes(b"x")
        os.unlink(outside)

    _, ops = recorded(tmp_path, monkeypatch, elsewhere)
    assert ops == []  # files outside the project are not recorded


def test_an_unsynced_replace_comes_back_old_new_or_empty(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "view.json"
    atomic.atomic_write_bytes(target, b"old", within=tmp_path)

    def replace() -> None:
        atomic.atomic_write_bytes(target, b"new content", within=tmp_path, durable=False)

    machine, ops = recorded(tmp_path, monkeypatch, replace)
    # a view is swapped in (renameat2 RENAME_EXCHANGE) where the system can, else renamed
    assert {op.kind for op in ops} & {"exchange", "rename"}
    seen = {state.files["view.json"] for state in draws(machine)}
    assert {b"old", b"new content", b""} <= seen  # the rename, with or without its data
    assert machine.durable_state().files["view.json"] == b"old"
    assert machine.volatile_state().files["view.json"] == b"new content"
    temps = [p for state in draws(machine) for p in state.files if p.endswith(".tmp")]
    assert temps  # the temp file is left behind when its create lands and its rename does not


def test_a_fsynced_append_survives_and_an_unsynced_one_may_tear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = tmp_path / "events.jsonl"
    atomic.append_durably(journal, b"one\n", within=tmp_path)
    atomic.fsync_dir(tmp_path)

    def appends() -> None:
        atomic.append_durably(journal, b"two\n", within=tmp_path)
        fd = os.open(journal, os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"three\n")  # not fsynced
        os.close(fd)

    machine, _ = recorded(tmp_path, monkeypatch, appends)
    seen = {state.files["events.jsonl"] for state in draws(machine)}
    assert all(data.startswith(b"one\ntwo\n") for data in seen), seen
    assert b"one\ntwo\nthree\n" in seen and b"one\ntwo\n" in seen
    assert any(b"one\ntwo\n" < data < b"one\ntwo\nthree\n" for data in seen)  # torn mid-line


def test_a_rename_is_all_or_nothing_and_durable_once_its_directory_is_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a").write_bytes(b"A")
    atomic.fsync_dir(tmp_path)

    def rename(sync_dir: bool) -> None:
        os.replace(tmp_path / "a", tmp_path / "b")
        if sync_dir:
            atomic.fsync_dir(tmp_path)

    machine, _ = recorded(tmp_path, monkeypatch, lambda: rename(False))
    names = {tuple(sorted(state.files)) for state in draws(machine)}
    assert names == {("a",), ("b",)}  # never both, never neither
    os.replace(tmp_path / "b", tmp_path / "a")
    machine, _ = recorded(tmp_path, monkeypatch, lambda: rename(True))
    assert {tuple(sorted(state.files)) for state in draws(machine)} == {("b",)}


def test_sync_filesystem_makes_everything_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def views() -> None:
        (tmp_path / "d").mkdir()
        atomic.atomic_write_bytes(tmp_path / "d" / "v", b"view", within=tmp_path, durable=False)
        atomic.sync_filesystem(tmp_path)

    machine, ops = recorded(tmp_path, monkeypatch, views)
    assert ops[-1].kind == "sync"
    states = draws(machine)
    assert all(s.files == {"d/v": b"view"} and "d" in s.dirs for s in states)
    assert machine.pending == []


def test_a_crash_state_is_reproducible_from_its_seed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def writes() -> None:
        for n in range(5):
            atomic.atomic_write_bytes(tmp_path / f"f{n}", b"x" * n, within=tmp_path, durable=False)

    machine, _ = recorded(tmp_path, monkeypatch, writes)
    one, two = machine.crash(random.Random(7)), machine.crash(random.Random(7))  # noqa: S311
    assert (one.files, one.dirs, one.choices) == (two.files, two.dirs, two.choices)
    assert len({tuple(sorted(s.files.items())) for s in draws(machine)}) > 10


def test_a_lost_file_alone_is_gone_or_old_and_everything_else_as_the_process_saw_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kept, new, grown = tmp_path / "kept.md", tmp_path / "new.md", tmp_path / "grown.log"
    atomic.atomic_write_bytes(grown, b"first\n", within=tmp_path)

    def steps() -> None:
        atomic.atomic_write_bytes(kept, b"synced", within=tmp_path)  # fsynced, dir fsynced
        for path, flags, data in (
            (new, os.O_CREAT, b"never synced"),
            (grown, os.O_APPEND, b"second line\n"),
        ):
            fd = os.open(path, os.O_WRONLY | flags, 0o644)
            os.write(fd, data)
            os.close(fd)

    machine, _ = recorded(tmp_path, monkeypatch, steps)
    assert machine.lost_alone("") == ["grown.log", "new.md"]
    volatile = machine.volatile_state()
    gone = machine.lose("new.md", random.Random(1))  # noqa: S311
    assert "new.md" not in gone.files and gone.choices == ["-new.md"]
    assert gone.files == {k: v for k, v in volatile.files.items() if k != "new.md"}
    seen = set()
    for seed in range(DRAWS):
        state = machine.lose("grown.log", random.Random(seed))  # noqa: S311
        data = state.files["grown.log"]
        assert data != b"first\nsecond line\n", data  # never what the process saw
        assert data.startswith(b"first\n")  # an append never loses what was synced
        assert {k: v for k, v in state.files.items() if k != "grown.log"} == {
            k: v for k, v in volatile.files.items() if k != "grown.log"
        }
        seen.add(data)
    assert b"first\n" in seen and len(seen) > 2  # the synced bytes, and torn appends
