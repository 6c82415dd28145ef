"""The Store suite: artifacts, the agents' exchange area, and reads that never write (the
suite's rules are in tf_fsm.conformance.store's docstring)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tf_fsm.conformance.fixtures import needs
from tf_fsm.conformance.stores import (
    API_KEY,
    SECRET,
    Raw,
    attempt_started,
    child_env,
    state_of,
    tree,
)
from tf_fsm.core.journal_codec import encode
from tf_fsm.errors import (
    CorruptStateError,
    InvalidArtifactNameError,
    InvalidTicketIdError,
    UnsafePathError,
)
from tf_fsm.fs.atomic import json_text
from tf_fsm.storage.layout import CHAIN_CONTEXT, JOURNAL, RETRY_STATE
from tf_fsm.storage.protocol import Store

NOW = datetime(2026, 2, 14, 2, 37, 5, tzinfo=UTC)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# --- ticket ids --------------------------------------------------------------------------


@pytest.mark.parametrize("ticket_id", ["../../etc", "a/b", ".hidden", "", "a" * 129, "a\x00b"])
def test_a_bad_ticket_id_is_refused_before_anything_is_kept(
    make: Callable[[str], Store], snapshot: Callable[[], object], ticket_id: str
) -> None:
    before = snapshot()
    with pytest.raises(InvalidTicketIdError) as info:
        make(ticket_id)
    assert info.value.ticket_id == ticket_id
    assert snapshot() == before


# --- artifacts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["close-summary.md", "prompts/attempt-1/implement.md", CHAIN_CONTEXT, "_x"]
)
def test_artifacts_round_trip(store: Store, make: Callable[[str], Store], name: str) -> None:
    assert store.files.path(name) == store.files.dir / name  # where an agent finds it
    assert store.files.unchecked(name) == store.files.dir / name
    store.write_artifact(name, "hello ✓\n")
    assert store.read_artifact(name) == "hello ✓\n"
    assert make(store.ticket_id).read_artifact(name) == "hello ✓\n"  # kept, not cached
    seen = store.seen(name)
    assert seen is not None and seen.sha256 == _sha("hello ✓\n".encode())
    assert store.files.path(name).read_text(encoding="utf-8") == "hello ✓\n"  # agents see it


def test_the_chain_context_is_the_artifact_of_that_name(store: Store) -> None:
    store.save_view(CHAIN_CONTEXT, {"attempt": 1})
    assert store.read_artifact(CHAIN_CONTEXT) == json_text({"attempt": 1})


@pytest.mark.parametrize(
    "name",
    [
        "../escape.md",
        "prompts/../../escape.md",
        "/etc/passwd",
        "a//b",
        "./x",
        "a/./b",
        "a\\b",
        "..\\x",
        "C:x",
        "",
        ".lock",
        ".lock.owner",
        "x/.hidden",
        "-rf",
        RETRY_STATE,
        "retry-state.json.bak.20260101T000000Z",
        JOURNAL,
        "a\x00b",
    ],
)
def test_artifact_names_that_could_escape_or_clobber_are_refused(
    store: Store, snapshot: Callable[[], object], name: str
) -> None:
    before = snapshot()
    with pytest.raises(InvalidArtifactNameError):
        store.files.path(name)
    with pytest.raises(InvalidArtifactNameError):
        store.files.unchecked(name)
    with pytest.raises(InvalidArtifactNameError):
        store.write_artifact(name, "x")
    with pytest.raises(InvalidArtifactNameError):
        store.read_artifact(name)
    assert snapshot() == before


def test_artifacts_are_redacted_and_read_leniently(store: Store, raw: Raw) -> None:
    store.write_artifact("notes.md", f"use {API_KEY} and {SECRET}\n")
    assert store.read_artifact("notes.md") == "use [REDACTED] and [REDACTED]\n"
    assert API_KEY.encode() not in (raw.get("notes.md") or b"")
    assert store.read_artifact("missing.md") is None
    raw.put("bin.txt", b"ok \xff end")
    assert store.read_artifact("bin.txt") == "ok \ufffd end"


def test_an_artifact_is_replaced_and_left_alone_when_unchanged(store: Store) -> None:
    store.write_artifact("notes.md", "first\n")
    store.write_artifact("notes.md", "second\n")
    assert store.read_artifact("notes.md") == "second\n"
    mark = store.seen("notes.md")
    store.write_artifact("notes.md", "second\n", only_if_changed=True)
    assert store.seen("notes.md") == mark  # same bytes, same mtime
    store.write_artifact("notes.md", "third\n", only_if_changed=True)
    after = store.seen("notes.md")
    assert store.read_artifact("notes.md") == "third\n"
    # replaced: new bytes; its mtime never older (the same when both writes fall in one tick
    # of the file system's clock, so an mtime alone cannot tell a rewrite)
    assert after is not None and mark is not None and after.sha256 != mark.sha256
    assert after.mtime_ns >= mark.mtime_ns


def test_an_artifact_file_is_replaced_atomically(store: Store) -> None:
    needs(store, "pi_ticketflow_files")
    store.write_artifact("notes.md", "first\n")
    path = store.files.path("notes.md")
    with path.open(encoding="utf-8") as reader:  # a reader of the old file keeps the old file
        store.write_artifact("notes.md", "second\n")
        assert reader.read() == "first\n"
    assert sorted(p.name for p in store.files.dir.iterdir()) == ["notes.md"]  # no temp file


# The disk refuses the write after its first 4 KiB (a file size limit: EFBIG, as a full disk
# would refuse it mid-write).
_REFUSED_WRITE = """
import resource, signal, sys
from pathlib import Path
from tf_fsm.conformance.stores import factory
from tf_fsm.errors import StorageError

store = factory(sys.argv[1])(Path(sys.argv[2]), sys.argv[3], None)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG, not a signal
resource.setrlimit(resource.RLIMIT_FSIZE, (4096, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
try:
    store.write_artifact("notes.md", "new content " * 10_000)
except StorageError as exc:
    print(f"refused: {exc}")
"""


def test_a_write_that_fails_midway_leaves_the_old_content_and_no_temp_file(
    spec: str, root: Path, store: Store
) -> None:
    needs(store, "pi_ticketflow_files")
    needs(store, "shared_across_processes")
    store.write_artifact("notes.md", "old\n")
    before = tree(root, dir_times=False)  # a temp file made and removed touches the directory
    done = subprocess.run(
        [sys.executable, "-c", _REFUSED_WRITE, spec, str(root), store.ticket_id],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(),
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused: "), done.stdout
    assert "notes.md" in done.stdout
    assert tree(root, dir_times=False) == before
    assert store.read_artifact("notes.md") == "old\n"


def test_a_symlink_out_of_the_ticket_directory_is_refused(store: Store, tmp_path: Path) -> None:
    needs(store, "pi_ticketflow_files")
    outside = tmp_path / "outside"
    outside.mkdir()
    store.files.dir.mkdir(parents=True)
    (store.files.dir / "link").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="outside") as refused:  # the write rule's error
        store.write_artifact("link/x.md", "x")
    assert refused.value.link == store.files.dir / "link"
    with pytest.raises(InvalidArtifactNameError, match="outside"):  # and a read is refused too
        store.read_artifact("link/x.md")
    assert list(outside.iterdir()) == []


def test_an_artifact_that_is_itself_a_symlink_out_is_refused(store: Store, tmp_path: Path) -> None:
    needs(store, "pi_ticketflow_files")
    outside = tmp_path / "outside.md"
    outside.write_text("theirs\n")
    store.files.dir.mkdir(parents=True)
    (store.files.dir / "notes.md").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="outside"):
        store.write_artifact("notes.md", "x")
    assert outside.read_text() == "theirs\n"


def test_a_symlink_that_stays_inside_the_ticket_directory_is_allowed(store: Store) -> None:
    needs(store, "pi_ticketflow_files")
    (store.files.dir / "real").mkdir(parents=True)
    (store.files.dir / "alias").symlink_to(store.files.dir / "real")
    store.write_artifact("alias/x.md", "x\n")
    assert (store.files.dir / "real" / "x.md").read_text() == "x\n"


def test_an_agents_file_is_redacted_in_place_and_taken(store: Store) -> None:
    area = store.files.dir
    area.mkdir(parents=True, exist_ok=True)
    leaky, clean = area / "leaky.md", area / "clean.md"
    assert store.files.take("none.md") is None
    assert not (area / "none.md").exists()

    leaky.write_bytes(f"key {API_KEY} and {SECRET}, then ".encode() + b"\xff bytes\n")
    taken = store.files.take("leaky.md")
    assert taken is not None
    digest, text = taken
    assert leaky.read_bytes() == b"key [REDACTED] and [REDACTED], then \xff bytes\n"
    assert digest == _sha(leaky.read_bytes())
    assert text.startswith("key [REDACTED] and [REDACTED], then ")
    assert store.read_artifact("leaky.md") == "key [REDACTED] and [REDACTED], then \ufffd bytes\n"
    seen = store.seen("leaky.md")
    assert seen is not None and seen.sha256 == digest

    clean.write_text("nothing to hide\n")
    mark = (clean.stat().st_ino, clean.stat().st_mtime_ns)
    assert store.files.take("clean.md") == (_sha(b"nothing to hide\n"), "nothing to hide\n")
    assert (clean.stat().st_ino, clean.stat().st_mtime_ns) == mark
    assert store.read_artifact("clean.md") == "nothing to hide\n"


# --- reads never write -------------------------------------------------------------------


def _healthy(store: Store, raw: Raw) -> None:
    store.write_artifact("notes.md", "notes\n")
    store.save_retry_state(state_of())
    store.append_event(attempt_started(1))


def _torn_tail(store: Store, raw: Raw) -> None:
    _healthy(store, raw)
    raw.put(JOURNAL, (raw.get(JOURNAL) or b"") + b'{"event":"Attem')


def _corrupt(store: Store, raw: Raw) -> None:
    _healthy(store, raw)
    raw.put(RETRY_STATE, b"{ corrupt")
    raw.put(JOURNAL, encode(attempt_started(1)) + b"{broken\n" + encode(attempt_started(2)))


@pytest.mark.parametrize(
    "records",
    [None, _healthy, _torn_tail, _corrupt],
    ids=["never run", "healthy", "torn tail", "corrupt"],
)
def test_reads_never_write(
    store: Store,
    raw: Raw,
    snapshot: Callable[[], object],
    records: Callable[[Store, Raw], None] | None,
) -> None:
    if records is not None:
        records(store, raw)
    before = snapshot()
    reads: list[Callable[[], object]] = [
        lambda: store.read_artifact("notes.md"),
        lambda: store.read_artifact("prompts/missing.md"),
        lambda: store.seen("notes.md"),
        lambda: store.seen("missing.md"),
        store.load_retry_state,
        store.peek_retry_state,
        store.read_events,
        store.journal_size,
        store.journal_lines,
        lambda: store.running_phase(1),
        lambda: store.retry_backup_name(NOW),
        store.lock_holder,
        store.lock_loop,
        store.files.check_paths,
        lambda: store.files.path("new/dir/x.md"),
        lambda: store.files.unchecked("new/dir/x.md"),
    ]
    for read in reads:
        with suppress(CorruptStateError):
            read()
    assert snapshot() == before


def test_check_paths_refuses_links_out_and_a_linked_journal(store: Store, tmp_path: Path) -> None:
    needs(store, "pi_ticketflow_files")
    area = store.files.dir
    store.files.check_paths()  # nothing there yet: nothing to refuse
    (area / "real").mkdir(parents=True)
    (area / "alias").symlink_to(area / "real")
    store.files.check_paths()  # a link that stays inside is fine
    (area / JOURNAL).symlink_to(area / "real" / JOURNAL)
    with pytest.raises(UnsafePathError) as linked:  # the journal is appended to: never a link
        store.files.check_paths()
    assert linked.value.link == area / JOURNAL
    (area / JOURNAL).unlink()
    outside = tmp_path / "outside"
    outside.mkdir()
    (area / "out").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="outside") as out:
        store.files.check_paths()
    assert out.value.link == area / "out"
