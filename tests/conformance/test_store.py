"""The Store conformance suite (tf_fsm.storage.protocol): what every store must do, run against
each implementation in tests/conformance/stores.py STORES.

Only the protocol's members are used. The files it names (`dir`, `retry_state_path`,
`journal_path`) are damaged directly, as a crash, a person or an agent would. The lock is
contended by a real second process. TicketStore's own details (file layout, the lock's owner
note, fsync grouping) are tested in tests/test_store.py and tests/test_durability.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conformance.stores import (
    API_KEY,
    PI_TICKETFLOW_STATE,
    REPO,
    STORES,
    Holders,
    factory,
)
from tf_fsm.core.journal import (
    AttemptFinished,
    AttemptStarted,
    JournalTailDropped,
    RetryStateReset,
    encode,
)
from tf_fsm.core.resume import Seen
from tf_fsm.core.state import RetryState
from tf_fsm.errors import (
    CorruptStateError,
    InvalidArtifactNameError,
    InvalidTicketIdError,
    TicketLockedError,
    UnsafePathError,
)
from tf_fsm.storage.protocol import Store
from tf_fsm.storage.redact import Redactor

NOW = datetime(2026, 2, 14, 2, 37, 5, tzinfo=UTC)
TS = "2026-02-14T02:37:05.000Z"
SECRET = "env-secret-value"  # a value from the environment, which the redactor is given
TICKET = "pt-uu03"


@pytest.fixture(params=sorted(STORES))
def spec(request: pytest.FixtureRequest) -> str:
    """The store under test, as `module:function` (a second process builds its own from it)."""
    return STORES[request.param]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A directory of the stores' own (conftest puts a project root in tmp_path)."""
    directory = tmp_path / "stores"
    directory.mkdir()
    return directory


@pytest.fixture
def make(spec: str, root: Path) -> Callable[[str], Store]:
    build = factory(spec)
    return lambda ticket_id: build(root, ticket_id, Redactor([SECRET]))


@pytest.fixture
def store(make: Callable[[str], Store]) -> Store:
    return make(TICKET)


@pytest.fixture
def holders() -> Iterator[Holders]:
    held = Holders()
    yield held
    held.close()


def tree(root: Path, dir_times: bool = True) -> dict[str, tuple[Any, ...]]:
    """Everything under `root`: each file's bytes and mtime, each link's target, each
    directory (and its mtime, which a file created or removed in it changes)."""
    out: dict[str, tuple[Any, ...]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            key, mtime = str(path.relative_to(root)), path.lstat().st_mtime_ns
            if path.is_symlink():
                out[key] = ("link", os.readlink(path))
            elif path.is_dir():
                out[key] = ("dir", mtime) if dir_times else ("dir",)
            else:
                out[key] = ("file", path.read_bytes(), mtime)
    return out


def _state(text: str = PI_TICKETFLOW_STATE) -> RetryState:
    return RetryState.model_validate(json.loads(text))


def _write_state(store: Store, text: str) -> Path:
    store.dir.mkdir(parents=True, exist_ok=True)
    store.retry_state_path.write_text(text, encoding="utf-8")
    return store.retry_state_path


def _started(attempt: int = 1) -> AttemptStarted:
    return AttemptStarted(
        ts=TS, ticket=TICKET, attempt=attempt, trigger="initial", escalation={"fixer": None}
    )


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


# --- retry state -------------------------------------------------------------------------


def test_missing_retry_state_is_none_and_creates_nothing(store: Store, root: Path) -> None:
    assert store.load_retry_state() is None
    assert tree(root) == {}


def test_pi_ticketflow_retry_state_loads_unchanged_and_untouched(store: Store, root: Path) -> None:
    path = _write_state(store, PI_TICKETFLOW_STATE)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    before = tree(root)
    state = store.load_retry_state()
    assert state is not None
    assert state.to_json_dict() == json.loads(PI_TICKETFLOW_STATE)
    assert tree(root) == before


def test_save_then_load_round_trips_in_pi_ticketflows_format(
    store: Store, make: Callable[[str], Store]
) -> None:
    store.save_retry_state(_state())
    assert store.retry_state_path.read_text(encoding="utf-8") == PI_TICKETFLOW_STATE
    assert make(TICKET).load_retry_state() == _state()  # a new store reads it from disk
    store.save_retry_state(_state().model_copy(update={"retryCount": 1}))
    loaded = make(TICKET).load_retry_state()
    assert loaded is not None and loaded.retryCount == 1
    assert sorted(p.name for p in store.dir.iterdir()) == ["retry-state.json"]


def test_saved_state_is_redacted(store: Store) -> None:
    state = _state()
    attempt = state.attempts[0].model_copy(update={"reason": f"agent crashed: key={API_KEY}"})
    store.save_retry_state(state.model_copy(update={"attempts": [attempt]}))
    assert API_KEY not in store.retry_state_path.read_text(encoding="utf-8")
    loaded = store.load_retry_state()
    assert loaded is not None
    assert loaded.attempts[0].reason == "agent crashed: key=[REDACTED]"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (PI_TICKETFLOW_STATE[:120], "invalid JSON at line 7 column"),
        (PI_TICKETFLOW_STATE.replace('"retryCount": 0', '"retryCount": "two"'), "retryCount: "),
        (PI_TICKETFLOW_STATE.replace('"status": "active"', '"status": "paused"'), "status: "),
        (
            PI_TICKETFLOW_STATE.replace('"status": "in_progress"', '"status": "running"'),
            "attempts.0.status: Input should be",
        ),
        (PI_TICKETFLOW_STATE.replace('"pt-uu03"', '"pt-other"'), "ticketId is 'pt-other'"),
        ("", "empty"),
        ("[]", "expected a JSON object"),
    ],
)
def test_corrupt_retry_state_raises_and_is_left_as_it_is(
    store: Store, root: Path, text: str, problem: str
) -> None:
    path = _write_state(store, text)
    before = tree(root)
    with pytest.raises(CorruptStateError) as info:
        store.load_retry_state()
    assert info.value.path == path
    assert problem in info.value.problem
    message = str(info.value)
    assert str(path) in message
    assert f"tf-fsm run {TICKET} --retry-reset" in message
    assert "retry-state.json.bak.<UTC timestamp>" in message
    assert tree(root) == before


def test_schema_error_names_the_value_it_got(store: Store) -> None:
    _write_state(store, PI_TICKETFLOW_STATE.replace('"status": "active"', '"status": "paused"'))
    with pytest.raises(CorruptStateError, match=r"status: Input should be .*\(got 'paused'\)"):
        store.load_retry_state()


def test_save_refuses_to_overwrite_a_corrupt_file(store: Store, root: Path) -> None:
    _write_state(store, "{ corrupt")
    before = tree(root)
    with pytest.raises(CorruptStateError):
        store.save_retry_state(_state())
    assert tree(root) == before


def test_reset_moves_the_file_aside_and_journals_it(store: Store) -> None:
    _write_state(store, PI_TICKETFLOW_STATE.replace('"retryCount": 0', '"retryCount": 2'))
    original = store.retry_state_path.read_bytes()
    assert store.retry_backup_path(NOW) == store.dir / "retry-state.json.bak.20260214T023705Z"
    first = store.reset_retry_state(NOW)
    assert first == store.dir / "retry-state.json.bak.20260214T023705Z"
    assert first.read_bytes() == original
    assert not store.retry_state_path.exists()
    assert store.load_retry_state() is None

    _write_state(store, "{ corrupt")
    second = store.reset_retry_state(NOW)
    assert second == store.dir / "retry-state.json.bak.20260214T023705Z.1"
    assert second.read_bytes() == b"{ corrupt"
    assert store.reset_retry_state(NOW) is None  # nothing left to move

    assert store.read_events().events == [
        RetryStateReset(ts=TS, ticket=TICKET, backup=first.name, retryCountBefore=2),
        RetryStateReset(ts=TS, ticket=TICKET, backup=second.name, retryCountBefore=None),
    ]


def test_another_tickets_state_or_event_is_refused(store: Store, root: Path) -> None:
    with pytest.raises(ValueError, match="pt-other"):
        store.save_retry_state(_state(PI_TICKETFLOW_STATE.replace(TICKET, "pt-other")))
    with pytest.raises(ValueError, match="pt-other"):
        store.append_event(_started().model_copy(update={"ticket": "pt-other"}))
    assert tree(root) == {}


# --- journal -----------------------------------------------------------------------------


def test_events_are_read_in_the_order_appended_one_line_each(
    store: Store, make: Callable[[str], Store]
) -> None:
    store.append_event(_started(1))
    store.append_events([_started(2), _started(3)])
    events = [_started(1), _started(2), _started(3)]
    assert store.journal_path.read_bytes() == b"".join(encode(e) for e in events)
    read = make(TICKET).read_events()
    assert read.events == events
    assert read.torn_tail is None


def test_secrets_in_events_are_redacted_before_they_reach_the_file(store: Store) -> None:
    store.append_event(
        AttemptFinished(
            ts=TS,
            ticket=TICKET,
            attempt=1,
            status="error",
            counts=None,
            reason=f"agent said: export OPENAI_API_KEY={API_KEY}; {SECRET} leaked",
        )
    )
    store.append_event(
        AttemptStarted(
            ts=TS,
            ticket=TICKET,
            trigger="initial",
            escalation={"apiKey": "hunter2hunter2", "worker": API_KEY},
        )
    )
    raw = store.journal_path.read_text(encoding="utf-8")
    for secret in (API_KEY, SECRET, "hunter2hunter2"):
        assert secret not in raw
    finished, started = store.read_events().events
    assert isinstance(finished, AttemptFinished) and isinstance(started, AttemptStarted)
    assert finished.reason == "agent said: export OPENAI_API_KEY=[REDACTED]; [REDACTED] leaked"
    assert started.escalation == {"apiKey": "[REDACTED]", "worker": "[REDACTED]"}


def test_torn_tail_is_cut_and_recorded_before_the_next_append(store: Store) -> None:
    store.append_event(_started(1))
    torn = encode(_started(2))[:40] + f"token={API_KEY}".encode()
    with store.journal_path.open("ab") as f:
        f.write(torn)

    read = store.read_events()  # reading reports the torn tail and writes nothing
    assert read.events == [_started(1)]
    assert read.torn_tail == torn
    assert store.journal_path.read_bytes().endswith(torn)

    store.append_event(_started(3))
    first, dropped, third = store.read_events().events
    assert first == _started(1)
    assert third == _started(3)
    assert isinstance(dropped, JournalTailDropped)
    assert dropped.bytes == len(torn)
    assert len(dropped.preview) <= 80
    assert dropped.preview.startswith('{"event":"AttemptStarted"')
    assert API_KEY not in store.journal_path.read_text(encoding="utf-8")
    assert store.read_events().torn_tail is None


def test_last_event_missing_only_its_newline_is_kept(store: Store) -> None:
    store.dir.mkdir(parents=True)
    store.journal_path.write_bytes(encode(_started(1))[:-1])
    store.append_event(_started(2))
    assert store.read_events().events == [_started(1), _started(2)]


def test_a_journal_that_is_only_a_torn_tail_is_repaired(store: Store) -> None:
    store.dir.mkdir(parents=True)
    store.journal_path.write_bytes(b'{"event":"attem')
    store.append_event(_started(1))
    dropped, started = store.read_events().events
    assert isinstance(dropped, JournalTailDropped) and dropped.bytes == 15
    assert started == _started(1)


def test_corrupt_middle_line_is_a_corrupt_state_error_and_is_not_touched(store: Store) -> None:
    store.dir.mkdir(parents=True)
    data = encode(_started(1)) + b"{broken\n" + encode(_started(2))
    store.journal_path.write_bytes(data)
    with pytest.raises(CorruptStateError) as info:
        store.read_events()
    assert info.value.path == store.journal_path
    assert info.value.problem.startswith("line 2: invalid JSON")
    assert store.journal_path.read_bytes() == data


def test_append_refuses_to_cut_a_complete_but_invalid_last_line(store: Store) -> None:
    store.dir.mkdir(parents=True)
    data = encode(_started(1)) + b'{"event":"AttemptStarted","ts":"not a time","ticket":"x"}'
    store.journal_path.write_bytes(data)
    with pytest.raises(CorruptStateError, match="last line: AttemptStarted: "):
        store.append_event(_started(2))
    assert store.journal_path.read_bytes() == data


def test_reading_a_missing_journal_creates_nothing(store: Store, root: Path) -> None:
    assert store.read_events().events == []
    assert tree(root) == {}


def test_writes_in_a_batch_are_readable_at_once_and_kept(
    store: Store, make: Callable[[str], Store]
) -> None:
    with store.lock(), store.batch():
        store.append_event(_started(1), durable=False)
        assert make(TICKET).read_events().events == [_started(1)]
        store.write_artifact("notes.md", "x\n")
        assert make(TICKET).read_artifact("notes.md") == "x\n"
        store.append_event(_started(2))
    assert make(TICKET).read_events().events == [_started(1), _started(2)]


# --- reads never write -------------------------------------------------------------------


def _healthy(store: Store) -> None:
    store.write_artifact("notes.md", "notes\n")
    store.save_retry_state(_state())
    store.append_event(_started(1))


def _torn_tail(store: Store) -> None:
    _healthy(store)
    with store.journal_path.open("ab") as f:
        f.write(b'{"event":"Attem')


def _corrupt(store: Store) -> None:
    _healthy(store)
    store.retry_state_path.write_text("{ corrupt")
    store.journal_path.write_bytes(encode(_started(1)) + b"{broken\n" + encode(_started(2)))


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


# --- lock --------------------------------------------------------------------------------


def _refused(store: Store, holder_pid: int) -> None:
    with pytest.raises(TicketLockedError) as info, store.lock():
        pytest.fail("acquired a lock another process holds")
    assert info.value.holder_pid == holder_pid
    assert info.value.ticket_id == store.ticket_id
    assert f"pid {holder_pid}" in str(info.value)


def test_the_lock_is_exclusive_across_processes(
    spec: str, root: Path, store: Store, holders: Holders
) -> None:
    proc = holders.start(spec, root, store.ticket_id)
    _refused(store, proc.pid)
    _refused(store, proc.pid)  # a refusal takes nothing: the holder still holds it


def test_the_lock_is_released_when_the_holder_exits(
    spec: str, root: Path, store: Store, holders: Holders
) -> None:
    proc = holders.start(spec, root, store.ticket_id)
    _refused(store, proc.pid)
    holders.release(proc)
    with store.lock():
        pass


def test_sigkill_of_the_holder_frees_the_lock(
    spec: str, root: Path, store: Store, holders: Holders
) -> None:
    proc = holders.start(spec, root, store.ticket_id)
    _refused(store, proc.pid)
    holders.kill(proc)
    with store.lock("after kill"):
        pass


@pytest.mark.skipif(
    sys.platform != "linux", reason="survives deletion through an abstract socket, Linux only"
)
@pytest.mark.parametrize("deleted", ["the ticket's files", "the ticket directory"])
def test_the_lock_survives_deletion_of_the_tickets_files(
    spec: str, root: Path, store: Store, holders: Holders, deleted: str
) -> None:
    proc = holders.start(spec, root, store.ticket_id)
    if deleted == "the ticket directory":
        shutil.rmtree(store.dir)
    else:
        for entry in store.dir.iterdir():  # the lock file among them
            entry.unlink()
    _refused(store, proc.pid)  # named even with the owner's note gone
    holders.release(proc)
    with store.lock():
        pass


def test_the_lock_is_not_reentrant_within_a_process(
    store: Store, make: Callable[[str], Store]
) -> None:
    other = make(store.ticket_id)
    with store.lock():
        _refused(other, os.getpid())
    with other.lock():
        pass


def test_the_lock_is_released_when_the_body_raises(store: Store) -> None:
    with pytest.raises(RuntimeError), store.lock():
        raise RuntimeError("boom")
    with store.lock():
        pass
