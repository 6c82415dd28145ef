"""The store backend chosen per run: `tf-fsm run --store memory` runs a ticket to its close with
the fake agent and leaves no ticket state on disk; the default keeps pi-ticketflow's files; the
memory store is refused where other processes must see the records (exit 2, naming it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import run_cli
from tf_fsm.loop.work import WorkOrder

from .conftest import TICKET_ID, Harness


def _ticket_dirs(project: Path) -> list[str]:
    tickets = project / ".tf" / "knowledge" / "tickets"
    return sorted(p.name for p in tickets.iterdir()) if tickets.is_dir() else []


def test_a_run_in_memory_closes_the_ticket_and_leaves_no_state_on_disk(
    e2e: Harness, temp_dir: Path
) -> None:
    result = e2e.run("--store", "memory", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.splitlines()[-1])["status"] == "closed"
    assert "status: closed" in e2e.ticket_file.read_text(encoding="utf-8")  # the tk file's own
    assert not e2e.dir.exists()
    assert _ticket_dirs(e2e.project) == []
    assert not list(temp_dir.glob("tf-fsm-memory-*"))  # the agents' exchange area went too
    calls = [json.loads(line) for line in e2e.log_file.read_text().splitlines()]
    assert {c["phase"] for c in calls} >= {"implement", "review", "close"}  # agents really ran


def test_the_default_store_keeps_the_files(e2e: Harness) -> None:
    result = e2e.run()
    assert result.returncode == 0, result.stderr
    kept = {p.name for p in e2e.dir.iterdir()}
    assert {"retry-state.json", "events.jsonl", "chain-context.json", "close-summary.md"} <= kept
    assert e2e.read_state()["status"] == "closed"


def test_the_memory_store_setting_is_refused_where_other_processes_look(e2e: Harness) -> None:
    e2e.settings()
    path = e2e.project / ".tf" / "config" / "settings.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**data, "storage": {"backend": "memory"}}), encoding="utf-8")
    for args in (["ralph", "--dry-run"], ["watch", "--once"]):
        done = run_cli(*args, cwd=e2e.project)
        assert done.returncode == 2, (args, done.stderr)
        assert 'storage.backend is "memory"' in done.stderr, done.stderr
    # a loop's worker, given its work order as the loop gives it
    order = WorkOrder(e2e.project, TICKET_ID, loop="1.2").to_json()
    code = "import sys; from tf_fsm.cli.run import worker_main; sys.exit(worker_main(sys.argv[1]))"
    worker = subprocess.run(
        [sys.executable, "-c", code, order], capture_output=True, text=True, timeout=60
    )
    assert worker.returncode == 2, worker.stderr
    assert 'storage.backend is "memory"' in worker.stderr, worker.stderr
    assert _ticket_dirs(e2e.project) == []


def test_an_unknown_backend_is_refused_naming_the_key(e2e: Harness) -> None:
    path = e2e.project / ".tf" / "config" / "settings.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    path.write_text(json.dumps({**data, "storage": {"backend": "disk"}}), encoding="utf-8")
    done = e2e.run()
    assert done.returncode == 2
    assert "storage.backend" in done.stderr, done.stderr
    typo = {**data, "storage": {"backends": "memory"}}
    path.write_text(json.dumps(typo), encoding="utf-8")
    done = e2e.run()
    assert done.returncode == 2 and "storage.backends" in done.stderr, done.stderr
