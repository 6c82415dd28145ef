"""The Store conformance suite (tf_fsm.storage.protocol): what every store must do, run against
each implementation in tests/conformance/stores.py STORES.

Only the protocol's members are used. The files it names (`dir`, `retry_state_path`,
`journal_path`) are damaged directly, as a crash, a person or an agent would. The lock's part
is in test_store_lock.py. TicketStore's own details (file layout, the lock's owner
note, fsync grouping) are tested in tests/test_store.py and tests/test_durability.py.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conformance.stores import (
    API_KEY,
    REPO,
    SECRET,
    attempt_started,
    state_of,
    tree,
)
from tf_fsm.core.journal_codec import encode
from tf_fsm.core.resume import Seen
from tf_fsm.errors import (
    CorruptStateError,
    InvalidArtifactNameError,
    InvalidTicketIdError,
    UnsafePathError,
)
from tf_fsm.storage.protocol import Store

NOW = datetime(2026, 2, 14, 2, 37, 5, tzinfo=UTC)


# --- ticket ids --------------------------------------------------------------------------


@pytest.mark.parametrize("ticket_id", ["../../etc", "a/b", ".hidden", "", "a" * 129, "a\x00b"])
def test_a_bad_ticket_id_is_refused_before_any_path_exists(
    make: Callable[[str], Store], root: Path, ticket_id: str
) -> None:
    with pytest.raises(InvalidTicketIdError) as info:
        make(ticket_id)
    assert info.value.ticket_id == ticket_id
    assert tree(root) == {}


# --- artifacts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["close-summary.md", "prompts/attempt-1/implement.md", "chain-context.json", "_x"]
)
def test_artifacts_round_trip_inside_the_ticket_directory(store: Store, name: str) -> None:
    assert store.artifact_path(name) == store.dir / name
    path = store.write_artifact(name, "hello ✓\n")
    assert path == store.dir / name
    assert store.read_artifact(name) == "hello ✓\n"
    digest = hashlib.sha256("hello ✓\n".encode()).hexdigest()
    assert store.seen(name) == Seen(digest, path.stat().st_mtime_ns)


def test_the_chain_context_is_the_artifact_of_that_name(store: Store) -> None:
    assert store.chain_context_path == store.artifact_path("chain-context.json")


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
        "retry-state.json",
        "retry-state.json.bak.20260101T000000Z",
        "events.jsonl",
        "a\x00b",
    ],
)
def test_artifact_names_that_could_escape_or_clobber_are_refused(
    store: Store, root: Path, name: str
) -> None:
    before = tree(root)
    with pytest.raises(InvalidArtifactNameError):
        store.artifact_path(name)
    with pytest.raises(InvalidArtifactNameError):
        store.write_artifact(name, "x")
    assert tree(root) == before


def test_artifacts_are_redacted_and_read_leniently(store: Store) -> None:
    store.write_artifact("notes.md", f"use {API_KEY} and {SECRET}\n")
    assert store.read_artifact("notes.md") == "use [REDACTED] and [REDACTED]\n"
    assert API_KEY not in store.artifact_path("notes.md").read_text(encoding="utf-8")
    assert store.read_artifact("missing.md") is None
    store.artifact_path("bin.txt").write_bytes(b"ok \xff end")
    assert store.read_artifact("bin.txt") == "ok \ufffd end"


def test_an_artifact_is_replaced_atomically_and_only_when_changed(store: Store) -> None:
    path = store.write_artifact("notes.md", "first\n")
    with path.open(encoding="utf-8") as reader:  # a reader of the old file keeps the old file
        store.write_artifact("notes.md", "second\n")
        assert reader.read() == "first\n"
    assert store.read_artifact("notes.md") == "second\n"
    assert sorted(p.name for p in store.dir.iterdir()) == ["notes.md"]  # no temp file left
    mark = (path.stat().st_ino, path.stat().st_mtime_ns)
    store.write_artifact("notes.md", "second\n", only_if_changed=True)
    assert (path.stat().st_ino, path.stat().st_mtime_ns) == mark


# The disk refuses the write after its first 4 KiB (a file size limit: EFBIG, as a full disk
# would refuse it mid-write).
_REFUSED_WRITE = """
import resource, signal, sys
from pathlib import Path
from tests.conformance.stores import factory
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
    store.write_artifact("notes.md", "old\n")
    before = tree(root, dir_times=False)
    done = subprocess.run(
        [sys.executable, "-c", _REFUSED_WRITE, spec, str(root), store.ticket_id],
        capture_output=True, text=True, timeout=60,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("refused: "), done.stdout
    assert "notes.md" in done.stdout
    assert tree(root, dir_times=False) == before
    assert store.read_artifact("notes.md") == "old\n"


def test_a_symlink_out_of_the_ticket_directory_is_refused(store: Store, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    store.dir.mkdir(parents=True)
    (store.dir / "link").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="outside") as refused:  # the write rule's error
        store.write_artifact("link/x.md", "x")
    assert refused.value.link == store.dir / "link"
    with pytest.raises(InvalidArtifactNameError, match="outside"):  # and a read is refused too
        store.read_artifact("link/x.md")
    assert list(outside.iterdir()) == []


def test_an_artifact_that_is_itself_a_symlink_out_is_refused(store: Store, tmp_path: Path) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("theirs\n")
    store.dir.mkdir(parents=True)
    (store.dir / "notes.md").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="outside"):
        store.write_artifact("notes.md", "x")
    assert outside.read_text() == "theirs\n"


def test_a_symlink_that_stays_inside_the_ticket_directory_is_allowed(store: Store) -> None:
    (store.dir / "real").mkdir(parents=True)
    (store.dir / "alias").symlink_to(store.dir / "real")
    store.write_artifact("alias/x.md", "x\n")
    assert (store.dir / "real" / "x.md").read_text() == "x\n"


def test_an_agents_file_is_redacted_in_place_only_when_it_holds_a_secret(store: Store) -> None:
    store.dir.mkdir(parents=True)
    missing, leaky, clean = (store.dir / n for n in ("none.md", "leaky.md", "clean.md"))
    assert store.redact_agent_file(missing) is None
    assert not missing.exists()

    leaky.write_bytes(f"key {API_KEY} and {SECRET}, then ".encode() + b"\xff bytes\n")
    redacted = store.redact_agent_file(leaky)
    assert redacted is not None
    digest, text = redacted
    assert leaky.read_bytes() == b"key [REDACTED] and [REDACTED], then \xff bytes\n"
    assert digest == hashlib.sha256(leaky.read_bytes()).hexdigest()
    assert text.startswith("key [REDACTED] and [REDACTED], then ")

    clean.write_text("nothing to hide\n")
    mark = (clean.stat().st_ino, clean.stat().st_mtime_ns)
    digest = hashlib.sha256(b"nothing to hide\n").hexdigest()
    assert store.redact_agent_file(clean) == (digest, "nothing to hide\n")
    assert (clean.stat().st_ino, clean.stat().st_mtime_ns) == mark


# --- reads never write -------------------------------------------------------------------


def _healthy(store: Store) -> None:
    store.write_artifact("notes.md", "notes\n")
    store.save_retry_state(state_of())
    store.append_event(attempt_started(1))


def _torn_tail(store: Store) -> None:
    _healthy(store)
    with store.journal_path.open("ab") as f:
        f.write(b'{"event":"Attem')


def _corrupt(store: Store) -> None:
    _healthy(store)
    store.retry_state_path.write_text("{ corrupt")
    broken = encode(attempt_started(1)) + b"{broken\n" + encode(attempt_started(2))
    store.journal_path.write_bytes(broken)


@pytest.mark.parametrize("files", [None, _healthy, _torn_tail, _corrupt],
                         ids=["never run", "healthy", "torn tail", "corrupt"])  # fmt: skip
def test_reads_never_write(store: Store, root: Path, files: Callable[[Store], None] | None) -> None:
    if files is not None:
        files(store)
    before = tree(root)
    reads: list[Callable[[], object]] = [
        lambda: store.read_artifact("notes.md"),
        lambda: store.read_artifact("prompts/missing.md"),
        lambda: store.seen("notes.md"),
        lambda: store.seen("missing.md"),
        lambda: store.artifact_path("new/dir/x.md"),
        store.load_retry_state,
        store.read_events,
        lambda: store.retry_backup_path(NOW),
        store.check_paths,
    ]
    for read in reads:
        with suppress(CorruptStateError):
            read()
    assert tree(root) == before


def test_check_paths_refuses_links_out_and_a_linked_journal(store: Store, tmp_path: Path) -> None:
    store.check_paths()  # nothing there yet: nothing to refuse
    (store.dir / "real").mkdir(parents=True)
    (store.dir / "alias").symlink_to(store.dir / "real")
    store.check_paths()  # a link that stays inside is fine
    store.journal_path.symlink_to(store.dir / "real" / "events.jsonl")
    with pytest.raises(UnsafePathError) as linked:  # the journal is appended to: never a link
        store.check_paths()
    assert linked.value.link == store.journal_path
    store.journal_path.unlink()
    outside = tmp_path / "outside"
    outside.mkdir()
    (store.dir / "out").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="outside") as out:
        store.check_paths()
    assert out.value.link == store.dir / "out"
