"""Nothing tf_fsm starts outlives the run that started it, whatever kills that run.

The fake agent leaves processes running on purpose (`background`): one in its own process
group, as `cmd &` does, and one in a session of its own, as a daemon does. Runs and loops are
SIGKILLed at seeded random instants, by their pid alone; /proc then says what is still alive
once the next run or loop has started. Processes are named by pid and start time, so a pid
reused meanwhile is never mistaken for a survivor.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, tk_ticket
from tests.e2e.conftest import AGENT, Harness, alive

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")

#: a leftover of every kind in every phase: in the agent's group (holding its output open, or
#: not) and in a session of its own
LEFTOVERS = [
    {"keepOutput": True},
    {"keepOutput": False},
    {"setsid": True},
    {"setsid": True, "keepOutput": True},
]


def start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def running(pid: int, start: int) -> bool:
    """That very process (not a later one with its pid) is alive and not a zombie."""
    return start_ticks(pid) == start and alive(pid)


def descendants(root: int) -> set[tuple[int, int]]:
    """(pid, start) of every process below `root`, from /proc's parent links."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    found: set[tuple[int, int]] = set()
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        start = start_ticks(pid)
        if start is not None:
            found.add((pid, start))
        todo += children.get(pid, [])
    return found


def leftovers(record: Path, owner: int | None = None) -> list[dict[str, Any]]:
    """The processes the fake agent left running (of one tf_fsm process, with `owner`)."""
    if not record.exists():
        return []
    rows = [json.loads(line) for line in record.read_text().splitlines()]
    return [r for r in rows if owner is None or r["mark"].split(".")[0] == str(owner)]


def wait_gone(pids: set[tuple[int, int]], seconds: float = 10.0) -> set[tuple[int, int]]:
    deadline = time.monotonic() + seconds
    while (left := {p for p in pids if running(*p)}) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_what_an_agent_leaves_running_ends_with_its_phase(e2e: Harness, tmp_path: Path) -> None:
    """A finished run leaves nothing behind, and output held open by a leftover does not hold
    the phase up until its timeout (the agent's timeout is 20 s, the leftovers sleep 300)."""
    record = tmp_path / "background.jsonl"
    e2e.plan(background=LEFTOVERS)
    started = time.monotonic()
    done = run_cli(
        "run",
        "pt-1",
        cwd=e2e.project,
        env={"FAKE_AGENT_PLAN": str(e2e.plan_file), "FAKE_AGENT_BACKGROUND": str(record)},
    )
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 60, "a phase waited for its leftovers' output"
    left = leftovers(record)
    assert len(left) >= 4 * 6, left  # every kind in every phase of the lifecycle
    assert not [r for r in left if running(r["pid"], r["start"])]


def _spawn_run(e2e: Harness, record: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "FAKE_AGENT_PLAN": str(e2e.plan_file),
        "FAKE_AGENT_BACKGROUND": str(record),
        "TF_FSM_ROOT": str(e2e.project),
    }
    return subprocess.Popen(
        [sys.executable, "-m", "tf_fsm", "run", "pt-1"],
        cwd=e2e.project,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # the kill below is of its pid alone, not of a group
    )


@pytest.mark.parametrize("seed", range(4))
def test_a_killed_runs_leftovers_end_when_the_next_run_starts(
    e2e: Harness, tmp_path: Path, seed: int
) -> None:
    record = tmp_path / "background.jsonl"
    e2e.plan(background=LEFTOVERS, hang=[{"phase": "review", "seconds": 0.5}])
    killed = _spawn_run(e2e, record)
    # Until the first agent has run at least once, then a random instant after that.
    deadline = time.monotonic() + 30
    while not leftovers(record) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(random.Random(seed).uniform(0.0, 2.0))  # noqa: S311 - a seeded instant
    tree = descendants(killed.pid)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=10)
    mine = {(r["pid"], r["start"]) for r in leftovers(record, owner=killed.pid)}
    assert mine, "the agent left nothing running before the kill"

    e2e.plan()  # the next run's agents leave nothing
    again = run_cli("run", "pt-1", cwd=e2e.project, env={"FAKE_AGENT_PLAN": str(e2e.plan_file)})
    assert again.returncode == 0, again.stderr
    survivors = wait_gone(mine | tree, seconds=0)
    assert not survivors, f"alive after the next run: {survivors}"
    if "ended processes a killed tf-fsm run left running" in again.stderr:
        lines = again.stderr.splitlines()
        said = next(i for i, ln in enumerate(lines) if "a killed tf-fsm run left" in ln)
        resumed = next(i for i, ln in enumerate(lines) if "resuming attempt" in ln)
        assert said < resumed  # ended when the run starts, before any agent of its own


# --- the backlog loop ---------------------------------------------------------------------------


class Backlog:
    def __init__(self, root: Path, tmp_path: Path) -> None:
        self.root = root
        self.record = tmp_path / "background.jsonl"
        self.plan_file = tmp_path / "plan.json"
        (root / ".tickets").mkdir()
        self.ids = [f"pt-{n}" for n in range(4)]
        for tid in self.ids:
            (root / ".tickets" / f"{tid}.md").write_text(tk_ticket(tid, tags="[]"))
        settings = {
            "workflow": {"failOn": ["Critical", "Major"]},
            "ralph": {"parallelAllowUntagged": True},
            "executor": {"command": [sys.executable, str(AGENT)], "timeoutSeconds": 60},
        }
        (root / ".tf" / "config" / "settings.json").write_text(json.dumps(settings))

    def plan(self, **plan: Any) -> None:
        self.plan_file.write_text(json.dumps(plan))

    def env(self) -> dict[str, str]:
        return {
            "FAKE_AGENT_PLAN": str(self.plan_file),
            "FAKE_AGENT_BACKGROUND": str(self.record),
            "TF_FSM_ROOT": str(self.root),
        }

    def statuses(self) -> list[str]:
        return [
            (self.root / ".tickets" / f"{t}.md").read_text().split("status: ")[1].split()[0]
            for t in self.ids
        ]


@pytest.mark.parametrize("seed", range(3))
def test_sigkill_of_the_loop_alone_takes_its_workers_and_agents_down(
    project: Path, tmp_path: Path, seed: int
) -> None:
    """`kill -9 <ralph pid>` (not its group): its fork server, workers and their agents end,
    and the next loop runs every ticket instead of finding them all locked."""
    backlog = Backlog(project, tmp_path)
    backlog.plan(background=LEFTOVERS, hang=[{"phase": "review", "seconds": 1}])
    loop = subprocess.Popen(
        [sys.executable, "-m", "tf_fsm", "ralph", "--workers", "2"],
        cwd=project,
        env={**os.environ, **backlog.env()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while len(leftovers(backlog.record)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(random.Random(seed).uniform(0.0, 2.5))  # noqa: S311 - a seeded instant
    tree = descendants(loop.pid)
    os.kill(loop.pid, signal.SIGKILL)
    loop.wait(timeout=10)
    assert tree, "the loop had started nothing"

    backlog.plan()
    again = run_cli("ralph", "--workers", "2", cwd=project, env=backlog.env())
    assert again.returncode == 0, again.stderr
    assert backlog.statuses() == ["closed"] * 4, again.stderr
    left = {(r["pid"], r["start"]) for r in leftovers(backlog.record)}
    survivors = wait_gone(tree | left, seconds=0)
    assert not survivors, f"alive after the next loop: {survivors}\n{again.stderr}"
