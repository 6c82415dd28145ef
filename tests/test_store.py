from __future__ import annotations

import json
import os
import select
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import pytest

from tf_fsm.core.journal import (
    AttemptFinished,
    AttemptStarted,
    JournalTailDropped,
    RetryStateReset,
    encode,
)
from tf_fsm.core.state import RetryState
from tf_fsm.errors import (
    CorruptStateError,
    InvalidArtifactNameError,
    InvalidTicketIdError,
    TicketLockedError,
    UnsafePathError,
)
from tf_fsm.storage.redact import Redactor
from tf_fsm.storage.store import (
    TicketStore,
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    validate_ticket_id,
)

REPO = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 2, 14, 2, 37, 5, tzinfo=UTC)
TS = "2026-02-14T02:37:05.000Z"
API_KEY = "sk-proj-" + "Zz9aB8cD7eF6gH5iJ4kL3mN2"

# A real retry-state.json written by pi-ticketflow, verbatim.
PI_TICKETFLOW_STATE = """{
  "version": 1,
  "ticketId": "pt-uu03",
  "attempts": [
    {
      "attemptNumber": 1,
      "startedAt": "2026-02-14T02:37:05Z",
      "status": "in_progress",
      "trigger": "implementation"
    }
  ],
  "lastAttemptAt": "2026-02-14T02:37:05Z",
  "status": "active",
  "retryCount": 0
}
"""


@pytest.fixture
def store(tmp_path: Path) -> TicketStore:
    return TicketStore(tmp_path / "knowledge", "pt-uu03", redactor=Redactor(["env-secret-value"]))


def _listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def _write_state(store: TicketStore, text: str) -> Path:
    store.dir.mkdir(parents=True, exist_ok=True)
    store.retry_state_path.write_text(text, encoding="utf-8")
    return store.retry_state_path


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


def test_store_refuses_a_bad_id_before_building_any_path(tmp_path: Path) -> None:
    with pytest.raises(InvalidTicketIdError):
        TicketStore(tmp_path / "knowledge", "../../etc")
    assert not (tmp_path / "knowledge").exists()


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


# --- retry state -------------------------------------------------------------------------


def test_pi_ticketflow_retry_state_loads_unchanged_and_untouched(store: TicketStore) -> None:
    path = _write_state(store, PI_TICKETFLOW_STATE)
    os.utime(path, ns=(1_000_000_000, 1_000_000_000))
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    state = store.load_retry_state()
    assert state is not None
    assert state.to_json_dict() == json.loads(PI_TICKETFLOW_STATE)
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before
    assert _listing(store.dir) == ["retry-state.json"]


def test_missing_retry_state_is_none_and_creates_nothing(store: TicketStore) -> None:
    assert store.load_retry_state() is None
    assert not store.dir.exists()


def test_save_then_load_round_trips(store: TicketStore) -> None:
    state = RetryState.model_validate(json.loads(PI_TICKETFLOW_STATE))
    store.save_retry_state(state)
    assert store.retry_state_path.read_text(encoding="utf-8") == PI_TICKETFLOW_STATE
    assert store.load_retry_state() == state
    assert _listing(store.dir) == ["retry-state.json"]


def test_saved_state_is_redacted(store: TicketStore) -> None:
    state = RetryState.model_validate(json.loads(PI_TICKETFLOW_STATE))
    attempt = state.attempts[0].model_copy(update={"reason": f"agent crashed: key={API_KEY}"})
    store.save_retry_state(state.model_copy(update={"attempts": [attempt]}))
    text = store.retry_state_path.read_text(encoding="utf-8")
    assert API_KEY not in text
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
    store: TicketStore, text: str, problem: str
) -> None:
    path = _write_state(store, text)
    before = path.read_bytes()
    with pytest.raises(CorruptStateError) as info:
        store.load_retry_state()
    assert info.value.path == path
    assert problem in info.value.problem
    message = str(info.value)
    assert str(path) in message
    assert "tf-fsm run pt-uu03 --retry-reset" in message
    assert "retry-state.json.bak.<UTC timestamp>" in message
    assert path.read_bytes() == before
    assert _listing(store.dir) == ["retry-state.json"]


def test_save_refuses_to_overwrite_a_corrupt_file(store: TicketStore) -> None:
    path = _write_state(store, "{ corrupt")
    with pytest.raises(CorruptStateError):
        store.save_retry_state(RetryState.model_validate(json.loads(PI_TICKETFLOW_STATE)))
    assert path.read_bytes() == b"{ corrupt"


def test_schema_error_names_the_value_it_got(store: TicketStore) -> None:
    _write_state(store, PI_TICKETFLOW_STATE.replace('"status": "active"', '"status": "paused"'))
    with pytest.raises(CorruptStateError, match=r"status: Input should be .*\(got 'paused'\)"):
        store.load_retry_state()


def test_reset_moves_the_file_aside_and_journals_it(store: TicketStore) -> None:
    _write_state(store, PI_TICKETFLOW_STATE.replace('"retryCount": 0', '"retryCount": 2'))
    original = store.retry_state_path.read_bytes()
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

    events = store.read_events().events
    assert events == [
        RetryStateReset(ts=TS, ticket="pt-uu03", backup=first.name, retryCountBefore=2),
        RetryStateReset(ts=TS, ticket="pt-uu03", backup=second.name, retryCountBefore=None),
    ]


# --- journal -----------------------------------------------------------------------------


def _started(attempt: int = 1) -> AttemptStarted:
    return AttemptStarted(
        ts=TS, ticket="pt-uu03", attempt=attempt, trigger="initial", escalation={"fixer": None}
    )


def test_append_and_read_events(store: TicketStore) -> None:
    events = [_started(1), _started(2)]
    for event in events:
        store.append_event(event)
    assert store.journal_path.read_bytes() == b"".join(encode(e) for e in events)
    read = store.read_events()
    assert read.events == events
    assert read.torn_tail is None


def test_events_of_another_ticket_are_refused(store: TicketStore) -> None:
    with pytest.raises(ValueError, match="pt-other"):
        store.append_event(_started().model_copy(update={"ticket": "pt-other"}))


def test_secrets_in_events_are_redacted_before_they_reach_the_file(store: TicketStore) -> None:
    store.append_event(
        AttemptFinished(
            ts=TS,
            ticket="pt-uu03",
            attempt=1,
            status="error",
            counts=None,
            reason=f"agent said: export OPENAI_API_KEY={API_KEY}; env-secret-value leaked",
        )
    )
    store.append_event(
        AttemptStarted(
            ts=TS,
            ticket="pt-uu03",
            trigger="initial",
            escalation={"apiKey": "hunter2hunter2", "worker": API_KEY},
        )
    )
    raw = store.journal_path.read_text(encoding="utf-8")
    for secret in (API_KEY, "env-secret-value", "hunter2hunter2"):
        assert secret not in raw
    finished, started = store.read_events().events
    assert isinstance(finished, AttemptFinished) and isinstance(started, AttemptStarted)
    assert finished.reason == "agent said: export OPENAI_API_KEY=[REDACTED]; [REDACTED] leaked"
    assert started.escalation == {"apiKey": "[REDACTED]", "worker": "[REDACTED]"}


def test_torn_tail_is_cut_and_recorded_before_the_next_append(store: TicketStore) -> None:
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


def test_last_event_missing_only_its_newline_is_kept(store: TicketStore) -> None:
    store.dir.mkdir(parents=True)
    store.journal_path.write_bytes(encode(_started(1))[:-1])
    store.append_event(_started(2))
    assert store.read_events().events == [_started(1), _started(2)]


def test_a_journal_that_is_only_a_torn_tail_is_repaired(store: TicketStore) -> None:
    store.dir.mkdir(parents=True)
    store.journal_path.write_bytes(b'{"event":"attem')
    store.append_event(_started(1))
    dropped, started = store.read_events().events
    assert isinstance(dropped, JournalTailDropped) and dropped.bytes == 15
    assert started == _started(1)


def test_corrupt_middle_line_is_a_corrupt_state_error_and_is_not_touched(
    store: TicketStore,
) -> None:
    store.dir.mkdir(parents=True)
    data = encode(_started(1)) + b"{broken\n" + encode(_started(2))
    store.journal_path.write_bytes(data)
    with pytest.raises(CorruptStateError) as info:
        store.read_events()
    assert info.value.path == store.journal_path
    assert info.value.problem.startswith("line 2: invalid JSON")
    assert store.journal_path.read_bytes() == data


def test_append_refuses_to_cut_a_complete_but_invalid_last_line(store: TicketStore) -> None:
    store.dir.mkdir(parents=True)
    data = encode(_started(1)) + b'{"event":"AttemptStarted","ts":"not a time","ticket":"x"}'
    store.journal_path.write_bytes(data)
    with pytest.raises(CorruptStateError, match="last line: AttemptStarted: "):
        store.append_event(_started(2))
    assert store.journal_path.read_bytes() == data


def test_reading_a_missing_journal_creates_nothing(store: TicketStore) -> None:
    assert store.read_events().events == []
    assert not store.dir.exists()


# --- artifacts ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["close-summary.md", "prompts/attempt-1/implement.md", "chain-context.json", "_x"]
)
def test_artifact_names_inside_the_ticket_directory(store: TicketStore, name: str) -> None:
    assert store.artifact_path(name) == store.dir / name
    path = store.write_artifact(name, "hello")
    assert store.read_artifact(name) == "hello"
    assert path.parent.is_relative_to(store.dir)


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
    store: TicketStore, name: str
) -> None:
    with pytest.raises(InvalidArtifactNameError):
        store.artifact_path(name)
    with pytest.raises(InvalidArtifactNameError):
        store.write_artifact(name, "x")
    assert not (store.knowledge_dir / "escape.md").exists()


def test_a_symlink_out_of_the_ticket_directory_is_refused(
    store: TicketStore, tmp_path: Path
) -> None:
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


def test_artifacts_are_redacted_and_read_leniently(store: TicketStore) -> None:
    store.write_artifact("notes.md", f"use {API_KEY} and env-secret-value\n")
    assert store.read_artifact("notes.md") == "use [REDACTED] and [REDACTED]\n"
    assert store.read_artifact("missing.md") is None
    store.artifact_path("bin.txt").write_bytes(b"ok \xff end")
    assert store.read_artifact("bin.txt") == "ok \ufffd end"


# --- lock --------------------------------------------------------------------------------

_HOLDER = """
import sys
from pathlib import Path
from tf_fsm.storage.store import TicketStore

store = TicketStore(Path(sys.argv[1]), sys.argv[2])
with store.lock("test holder"):
    print("READY", flush=True)
    sys.stdin.readline()
print("RELEASED", flush=True)
"""


def _read_line(proc: subprocess.Popen[str], timeout: float = 30) -> str:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "holder process did not answer"
    return proc.stdout.readline().strip()


@pytest.fixture
def holder(store: TicketStore) -> Iterator[Callable[[], subprocess.Popen[str]]]:
    procs: list[subprocess.Popen[str]] = []

    def start() -> subprocess.Popen[str]:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        proc = subprocess.Popen(
            [sys.executable, "-c", _HOLDER, str(store.knowledge_dir), store.ticket_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        procs.append(proc)
        assert _read_line(proc) == "READY"
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=30)
        for stream in (proc.stdin, proc.stdout):
            if stream is not None:
                stream.close()


def test_busy_lock_names_the_holder_pid(store: TicketStore, holder: Any) -> None:
    proc = holder()
    owner = json.loads(store.lock_owner_path.read_text())
    assert owner["pid"] == proc.pid
    assert owner["note"] == "test holder"
    assert owner["hostname"]
    with pytest.raises(TicketLockedError) as info, store.lock():
        pytest.fail("acquired a lock another process holds")
    assert info.value.holder_pid == proc.pid
    assert info.value.ticket_id == "pt-uu03"
    assert info.value.lock_path == store.dir / ".lock"
    assert f"pid {proc.pid}" in str(info.value)


def test_lock_is_released_when_the_holder_exits(store: TicketStore, holder: Any) -> None:
    proc = holder()
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert _read_line(proc) == "RELEASED"
    assert proc.wait(timeout=30) == 0
    assert not store.lock_owner_path.exists()
    assert store.lock_path.exists()  # the file stays; the kernel lock is what counts
    with store.lock():
        assert json.loads(store.lock_owner_path.read_text())["pid"] == os.getpid()


def test_sigkill_of_the_holder_frees_the_lock(store: TicketStore, holder: Any) -> None:
    proc = holder()
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=30) == -signal.SIGKILL
    # The dead holder's owner file is still there; acquiring replaces it.
    assert json.loads(store.lock_owner_path.read_text())["pid"] == proc.pid
    with store.lock("after kill"):
        owner = json.loads(store.lock_owner_path.read_text())
        assert owner["pid"] == os.getpid()
        assert owner["note"] == "after kill"
    assert not store.lock_owner_path.exists()


def test_lock_is_not_reentrant_within_a_process(store: TicketStore) -> None:
    other = TicketStore(store.knowledge_dir, store.ticket_id)
    with store.lock():
        with pytest.raises(TicketLockedError) as info, other.lock():
            pytest.fail("second lock acquired")
        assert info.value.holder_pid == os.getpid()
    with other.lock():
        pass


def test_busy_lock_without_owner_file_still_names_the_holder(
    store: TicketStore, holder: Any
) -> None:
    proc = holder()
    store.lock_owner_path.unlink()
    with pytest.raises(TicketLockedError) as info, store.lock():
        pass
    if sys.platform == "linux":  # found as the process that has the lock's socket open
        assert info.value.holder_pid == proc.pid
        assert f"pid {proc.pid}" in str(info.value)
    else:
        assert info.value.holder_pid is None
        assert "holder pid unknown" in str(info.value)


def test_lock_is_released_when_the_body_raises(store: TicketStore) -> None:
    with pytest.raises(RuntimeError), store.lock():
        raise RuntimeError("boom")
    with store.lock():
        pass


def test_an_artifact_that_is_itself_a_symlink_out_is_refused(
    store: TicketStore, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("theirs\n")
    store.dir.mkdir(parents=True)
    (store.dir / "notes.md").symlink_to(outside)
    with pytest.raises(UnsafePathError, match="outside"):
        store.write_artifact("notes.md", "x")
    assert outside.read_text() == "theirs\n"


def test_a_symlink_that_stays_inside_the_ticket_directory_is_allowed(store: TicketStore) -> None:
    (store.dir / "real").mkdir(parents=True)
    (store.dir / "alias").symlink_to(store.dir / "real")
    store.write_artifact("alias/x.md", "x\n")
    assert (store.dir / "real" / "x.md").read_text() == "x\n"
