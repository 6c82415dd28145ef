"""`tf-fsm stop TICKET` against real runs: a slow `tf-fsm run` and a `ralph` worker are stopped
as Ctrl-C stops them (the attempt stays resumable, `tf-fsm resume` finishes it), a ticket no
run holds and a holder that is not a run of the ticket alone are refused, a bad id is exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import lock_held_elsewhere, run_cli, tk_ticket, wait_for
from tests.ui_server import slow_project, start_run
from tf_fsm.storage.lock import lock_holder

STATE = ".tf/knowledge/tickets"


def _events(state: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (state / "events.jsonl").read_text().splitlines()]


def _in_implement(state: Path) -> bool:
    return lock_holder(state) > 0 and (state / "logs/attempt-1").is_dir()


def test_stop_ends_a_run_resumably_and_resume_finishes_it(project: Path) -> None:
    root = slow_project(project, ("t-1",), seconds=30)
    state = root / STATE / "t-1"
    run = start_run(root, "t-1")
    wait_for(lambda: _in_implement(state), 30, "the run in its implement phase")
    holder = lock_holder(state)
    assert holder == run.pid

    stopped = run_cli("stop", "t-1")

    assert stopped.returncode == 0, stopped.stderr
    assert f"sent SIGINT to pid {run.pid} (its run)" in stopped.stdout
    assert "stopped; the attempt is resumable: tf-fsm resume t-1" in stopped.stdout
    assert lock_holder(state) == 0  # released before stop returned
    assert run.wait(timeout=10) == 130  # what Ctrl-C makes of a run
    status = json.loads(run_cli("status", "t-1", "--json").stdout)
    assert status["state"] == "in_progress.implement" and status["next"].startswith("resume")
    assert not [e for e in _events(state) if e["event"] == "AttemptFinished"]

    (root / "agent-plan.json").write_text(json.dumps({}), encoding="utf-8")  # fast now
    resumed = run_cli("resume", "t-1")
    assert resumed.returncode == 0, resumed.stderr
    events = _events(state)
    assert [e["phase"] for e in events if e["event"] == "AttemptResumed"] == ["implement"]
    assert [e["status"] for e in events if e["event"] == "AttemptFinished"] == ["closed"]


def test_stop_of_a_ticket_no_run_holds_is_exit_7_and_a_bad_id_exit_2(project: Path) -> None:
    slow_project(project, ("t-1",))
    idle = run_cli("stop", "t-1")
    assert idle.returncode == 7
    assert "t-1: no run holds the ticket: nothing to stop" in idle.stderr
    bad = run_cli("stop", "../t-1")
    assert bad.returncode == 2 and "ticket id" in bad.stderr


def test_stop_leaves_a_holder_that_is_not_a_run_of_the_ticket_alone(project: Path) -> None:
    slow_project(project, ("t-1",))
    with lock_held_elsewhere(project, "t-1", "tf-fsm watch") as holder:
        refused = run_cli("stop", "t-1")
        assert refused.returncode == 75
        assert f"held by tf-fsm watch (pid {holder.pid})" in refused.stderr
        assert "nothing stopped" in refused.stderr
        assert holder.poll() is None  # still running: not signalled


def test_stop_of_a_loop_worker_stops_that_ticket_only(project: Path) -> None:
    root = slow_project(project, ("t-1", "t-2"), seconds=30)
    t2 = tk_ticket("t-2", title="Ticket t-2", tags="[component:lexer]")  # beside t-1's parser
    (root / ".tickets/t-2.md").write_text(t2, encoding="utf-8")
    loop = subprocess.Popen(
        [sys.executable, "-m", "tf_fsm", "ralph", "--workers", "2", "--no-worktree"],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        states = [root / STATE / t for t in ("t-1", "t-2")]
        wait_for(lambda: all(_in_implement(s) for s in states), 60, "both tickets running")
        worker_2 = lock_holder(states[1])

        stopped = run_cli("stop", "t-1")

        assert stopped.returncode == 0, stopped.stderr
        assert f"a worker of the loop pid {loop.pid}: only this ticket stops" in stopped.stdout
        assert lock_holder(states[1]) == worker_2  # the other ticket runs on
        assert loop.poll() is None
        time.sleep(1.5)  # a few of the loop's passes: it must not start t-1 again
        assert lock_holder(states[0]) == 0
        assert run_cli("stop", "t-2").returncode == 0
        out, err = loop.communicate(timeout=30)
    finally:
        if loop.poll() is None:
            loop.kill()
            loop.wait()
    assert loop.returncode == 0, err
    progress = (root / ".tf/ralph/progress.md").read_text()
    assert "its run was stopped (tf-fsm stop); tf-fsm resume t-1 continues it" in out + err
    assert "interrupted" in progress.lower()
