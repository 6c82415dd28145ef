"""`tf-fsm reset TICKET`: a ticket's retries reset without running it, under its lock, through
the code path of `run --retry-reset` (tf_fsm.engine.reset). Real processes (`python -m
tf_fsm`), the scripted agent, real files; the lock is held by another real process."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.conftest import lock_held_elsewhere, run_cli
from tests.gitrepo import isolate
from tests.test_orchestrator import MAJOR_NEVER, setup
from tests.test_views_rebuild import cut_before_durable_point
from tf_fsm.core.journal import Event, RetryStateReset, ViewsChecked
from tf_fsm.engine.reset import reset_retries
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.storage.store import TicketStore

BACKUP_NAME = r"retry-state\.json\.bak\.\d{8}T\d{6}Z(\.\d+)?"


@pytest.fixture(autouse=True)
def _git_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch)  # whatever git a run asks, it asks with a fixed identity


def store(project: Path) -> TicketStore:
    return open_store(project, load_settings(project), "pt-1")


def journal(project: Path) -> list[Event]:
    return store(project).read_events().events


def exhausted(project: Path) -> bytes:
    """pt-1 run until its retries are spent (3 blocked attempts); its retry-state.json."""
    setup(project, {"findings": [MAJOR_NEVER]})
    ran = run_cli("run", "pt-1")
    assert ran.returncode == 4, ran.stderr
    return store(project).retry_state_path.read_bytes()


def status(project: Path) -> dict[str, object]:
    shown = run_cli("status", "pt-1", "--json")
    assert shown.returncode == 0, shown.stderr
    row: dict[str, object] = json.loads(shown.stdout)
    return row


def test_reset_after_exhaustion_moves_the_state_aside_and_the_ticket_runs_again(
    project: Path,
) -> None:
    before = exhausted(project)
    assert str(status(project)["next"]).startswith("nothing: max retries (3) exceeded")
    done = run_cli("reset", "pt-1")
    assert done.returncode == 0, done.stderr
    s = store(project)
    [backup] = s.dir.glob("retry-state.json.bak.*")
    assert re.fullmatch(BACKUP_NAME, backup.name)
    assert done.stdout == (
        f"pt-1: retries reset: retry-state.json moved aside to {backup.name} "
        "(blocked attempts were 3); the next run starts at attempt 1\n"
    )
    assert backup.read_bytes() == before and not s.retry_state_path.exists()
    resets = [e for e in journal(project) if isinstance(e, RetryStateReset)]
    assert [(r.backup, r.retryCountBefore) for r in resets] == [(backup.name, 3)]
    assert not (s.dir / ".lock.owner").exists()  # the lock was released
    row = status(project)
    assert (row["next"], row["skip"], row["retryCount"]) == ("attempt 1 (initial)", False, 0)
    again = run_cli("run", "pt-1", "--once")  # runnable: attempt 1 runs (and blocks again)
    assert again.returncode == 3, again.stderr
    assert "BLOCKED (retries left) after attempt 1" in again.stderr


def test_reset_json_over_a_corrupt_state_file(project: Path) -> None:
    setup(project, {"findings": [MAJOR_NEVER]})
    s = store(project)
    s.dir.mkdir(parents=True)
    corrupt = b'{"version": 1, "ticketId": "pt-1", "attempts": ['
    s.retry_state_path.write_bytes(corrupt)
    done = run_cli("reset", "pt-1", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    backup = Path(data["backup"])
    assert data == {
        "ticket": "pt-1",
        "backup": str(backup),
        "retryCountBefore": None,
        "repaired": [],
    }
    assert backup.parent == s.dir and re.fullmatch(BACKUP_NAME, backup.name)
    assert backup.read_bytes() == corrupt and not s.retry_state_path.exists()
    text = run_cli("reset", "pt-1")  # the file is gone now: a second reset has nothing to do
    assert (text.returncode, text.stdout) == (0, "pt-1: nothing to reset (no retry-state.json)\n")


def test_a_ticket_locked_by_another_process_is_refused_and_nothing_moves(
    project: Path,
) -> None:
    before = exhausted(project)
    s = store(project)
    journal_before = s.journal_path.read_bytes()
    with lock_held_elsewhere(project) as holder:
        done = run_cli("reset", "pt-1", "--json")
    assert done.returncode == 75, done.stderr
    assert f"ticket pt-1 is locked by another tf-fsm process (pid {holder.pid}" in done.stderr
    assert done.stdout == ""
    assert s.retry_state_path.read_bytes() == before
    assert s.journal_path.read_bytes() == journal_before
    assert list(s.dir.glob("retry-state.json.bak*")) == []
    assert run_cli("reset", "pt-1").returncode == 0  # once the holder is gone, it goes through


def test_an_unknown_ticket_is_bad_input_naming_it(project: Path) -> None:
    setup(project, {})
    missing = run_cli("reset", "pt-9")
    assert missing.returncode == 2 and missing.stdout == ""
    assert "ticket pt-9 not found" in missing.stderr
    assert str(project / ".tickets" / "pt-9.md") in missing.stderr
    hostile = run_cli("reset", "../pt-1")
    assert hostile.returncode == 2 and "invalid ticket id '../pt-1'" in hostile.stderr
    assert not (project / ".tf" / "knowledge").exists()  # nothing made for either


def test_a_ticket_never_run_has_nothing_to_reset_and_gets_no_directory(project: Path) -> None:
    setup(project, {})
    text = run_cli("reset", "pt-1")
    assert (text.returncode, text.stdout, text.stderr) == (
        0,
        "pt-1: nothing to reset (no retry-state.json)\n",
        "",
    )
    data = run_cli("reset", "pt-1", "--json")
    assert data.returncode == 0, data.stderr
    assert json.loads(data.stdout) == {
        "ticket": "pt-1",
        "backup": None,
        "retryCountBefore": None,
        "repaired": [],
    }
    assert not store(project).dir.exists()  # `status` does not list it as run


def test_views_a_crash_left_are_rebuilt_before_the_reset_moves_them(project: Path) -> None:
    """The journal ends without its durable point and retry-state.json was emptied by a power
    cut: the reset rebuilds it from the journal (as a run does), then moves the rebuilt file."""
    before = exhausted(project)
    s = store(project)
    cut_before_durable_point(project)
    s.retry_state_path.write_bytes(b"")
    done = run_cli("reset", "pt-1")
    assert done.returncode == 0, done.stderr
    [backup] = s.dir.glob("retry-state.json.bak.*")
    assert done.stdout.splitlines() == [
        "pt-1: rebuilt from the journal: retry-state.json",
        f"pt-1: retries reset: retry-state.json moved aside to {backup.name} "
        "(blocked attempts were 3); the next run starts at attempt 1",
    ]
    assert json.loads(backup.read_bytes()) == json.loads(before)
    tail = journal(project)[-3:]
    assert isinstance(tail[0], ViewsChecked) and tail[0].repaired == ["retry-state.json"]
    assert isinstance(tail[1], RetryStateReset) and tail[1].retryCountBefore == 3
    assert tail[2].event == "ViewsSynced"  # the reset ended at its durable point


def test_reset_retries_names_the_backup_after_the_time_given(project: Path) -> None:
    exhausted(project)
    at = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)
    done = reset_retries(project, "pt-1", now=at)
    s = store(project)
    assert done.backup == "retry-state.json.bak.20260304T050607Z"
    assert done.backup_at == str(s.dir / done.backup)  # where it is, for people and --json
    assert (done.ticket_id, done.retry_count_before, done.repaired) == ("pt-1", 3, [])
    assert (s.dir / done.backup).is_file() and not s.retry_state_path.exists()
    again = reset_retries(project, "pt-1", now=at)
    assert (again.backup, again.retry_count_before) == (None, None)


def test_a_journal_that_is_a_symlink_is_refused_before_anything_moves(
    project: Path, tmp_path: Path
) -> None:
    """The journal is appended to, never replaced: a symlink there would lead the reset's
    RetryStateReset out of the project. Refused (exit 2, naming it) before the move."""
    before = exhausted(project)
    s = store(project)
    outside = tmp_path / "elsewhere.jsonl"
    s.journal_path.rename(outside)
    s.journal_path.symlink_to(outside)
    journal_before = outside.read_bytes()
    done = run_cli("reset", "pt-1")
    assert done.returncode == 2, done.stderr
    assert str(s.journal_path) in done.stderr and "does not write through it" in done.stderr
    assert s.retry_state_path.read_bytes() == before
    assert list(s.dir.glob("retry-state.json.bak*")) == []
    assert outside.read_bytes() == journal_before
