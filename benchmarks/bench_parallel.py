"""Budget 6: the backlog loop's parallel throughput, in the shared tree and in worktrees.

Tagged, shared tree: a backlog of independent tickets (no deps, one component tag each, so any
4 may run together) is run to the end by `tf-fsm ralph --workers 1` and, in a fresh copy, by
`--workers 4`, in a directory that is not a git repository. The agent is a real process per
invocation, benchmarks/sleepy_agent.sh: it sleeps and writes a clean report, so every ticket
closes in one attempt (6 invocations: research, implement, 3 reviews, close). A real process
rather than the in-process scripted executor, because spawning agents is part of what the
loop and its workers do.

Untagged, worktrees: the same kind of backlog without any tag, committed in a git repository,
run by `ralph --workers 1 --worktree` and `--workers 4 --worktree` (docs/workspaces.md): each
ticket gets its branch and worktree, its implement phase edits a file of its own (a
checkpoint), and every ticket is merged into `main` through the merge queue (rebased first
when `main` moved). Then `--workers 4 --no-worktree` on the same untagged backlog: in the
shared tree an untagged ticket runs alone, so 4 workers cannot do better than 1 there.

The agent sleeps on every invocation so that the figure measures how the loop schedules
tickets side by side, not tf_fsm's fixed cost per ticket (which the lifecycle benchmark
measures): with no sleep the ratio would be bounded by the cores alone. The worktree case
sleeps longer by default (0.2 s against 0.05 s per invocation): its fixed cost per ticket is
higher (the worktree's checkout, a checkpoint, the merge queue: git processes), and the
figure is about running tickets side by side, which real agents, busy for minutes per phase,
leave to the loop.

Budget: 4 workers take <= 0.35 x the time of 1 worker, tagged in the shared tree and untagged
in worktrees. Also printed: the CPU time of the whole run (loop, workers, agents, git) per
ticket against the agent's sleep per ticket, and the best ratio this machine's cores allow for
that CPU time: with C CPU-seconds and K cores, 4 workers cannot take less than
max(t1 / 4, C / K).

    python benchmarks/bench_parallel.py [--tickets 60] [--sleep 0.05]
                                        [--untagged 16] [--untagged-sleep 0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _budget import CHECKOUT, budget

sys.path.append(str(CHECKOUT))  # tests.gitrepo: the fixed git identity the tests use too
from tests.gitrepo import GIT_ENV
from tf_fsm.settings.project import STATE_IGNORE, STATE_IGNORE_RELPATH
from tf_fsm.tk.tickets import new_ticket, scan

AGENT = Path(__file__).resolve().parent / "sleepy_agent.sh"
LIMIT = 0.35
INVOCATIONS = 6  # research, implement, review x 3, close: the default settings' lifecycle
#: the worktree case's agent: implement edits one file of the ticket's own (a coding agent's
#: change, so each ticket has a checkpoint and a real merge), then it is the sleepy agent
EDITING_AGENT = f"""#!/bin/sh
if [ "$TF_PHASE" = implement ]; then
  mkdir -p work && echo "$TF_TICKET_ID" >"work/$TF_TICKET_ID.txt"
fi
exec {AGENT}
"""

# Runs argv as its only child; prints wall seconds and the CPU seconds of the child and all
# its descendants (RUSAGE_CHILDREN of a fresh process: workers, agents and git included).
TIMED = (
    "import resource, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
    "wall = time.perf_counter() - start\n"
    "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(wall, r.ru_utime + r.ru_stime)\n"
)


def make_project(root: Path, count: int, agent: Path, *, tagged: bool) -> None:
    (root / ".tickets").mkdir(parents=True)
    (root / ".tf" / "config").mkdir(parents=True)
    settings = {
        "executor": {"kind": "command", "command": [str(agent)]},
        "ralph": {"maxIterations": count * 2},
    }
    (root / ".tf" / "config" / "settings.json").write_text(json.dumps(settings))
    for i in range(count):
        tid = f"pb-{i:04d}"
        tags = (f"component:c{i}",) if tagged else ()
        text = new_ticket(tid, f"Ticket {i}", tags=tags, created="2026-02-10T12:00:00Z")
        (root / ".tickets" / f"{tid}.md").write_text(text, encoding="utf-8")


def make_repository(root: Path) -> None:
    """The project committed as the first commit of `main`, its run state ignored as
    `tf-fsm init` has it."""
    (root / STATE_IGNORE_RELPATH).write_text(STATE_IGNORE, encoding="utf-8")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "backlog"]):
        subprocess.run(["git", *args], cwd=root, env=git_env(), check=True)


def git_env() -> dict[str, str]:
    return {**os.environ, **GIT_ENV}


def run_loop(
    template: Path, name: str, sleep: float, workers: int, *mode: str
) -> tuple[float, float]:
    root = template.parent / name
    shutil.copytree(template, root, symlinks=True)
    env = {**git_env(), "SLEEPY_AGENT_SECONDS": str(sleep)}
    argv = [sys.executable, "-m", "tf_fsm", "--root", str(root), "ralph"]
    done = subprocess.run(
        [sys.executable, "-c", TIMED, *argv, "--workers", str(workers), *mode],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall, cpu = (float(x) for x in done.stdout.split())
    records = scan(root / ".tickets").records.values()
    open_left = sum(r.status != "closed" for r in records)
    assert open_left == 0, f"{open_left} tickets not closed in {name}"
    return wall, cpu


def merges_on_main(root: Path) -> int:
    out = subprocess.run(
        ["git", "rev-list", "--count", "--merges", "main"],
        cwd=root,
        env=git_env(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out)


def report(label: str, n: int, sleep: float, runs: dict[str, tuple[float, float]]) -> None:
    print(
        f"{label}: {n} tickets, {INVOCATIONS} agent invocations each, agent sleeps "
        f"{sleep:.2f} s per invocation ({INVOCATIONS * sleep:.2f} s per ticket)"
    )
    for name, (wall, cpu) in runs.items():
        print(
            f"  {name}: {wall:.1f} s ({wall / n * 1e3:.0f} ms/ticket), "
            f"CPU {cpu:.1f} s ({cpu / n * 1e3:.0f} ms/ticket)"
        )


def floor_line(t1: float, cpu4: float) -> None:
    cores = os.cpu_count() or 1
    floor = max(t1 / 4, cpu4 / cores) / t1
    print(
        f"  best ratio {cores} cores allow for that CPU: {floor:.2f} "
        f"(max(t1 / 4, CPU / {cores}) / t1)"
    )


def tagged_shared(tmp: Path, n: int, sleep: float) -> None:
    template = tmp / "tagged"
    make_project(template, n, AGENT, tagged=True)
    runs = {
        "1 worker": run_loop(template, "tagged-1", sleep, 1),
        "4 workers": run_loop(template, "tagged-4", sleep, 4),
    }
    report("tagged backlog, shared tree (no git)", n, sleep, runs)
    (t1, _), (t4, cpu4) = runs["1 worker"], runs["4 workers"]
    floor_line(t1, cpu4)
    ratio = t4 / t1
    budget("tagged, 4 workers / 1 worker", ratio, LIMIT, f"{ratio:.3f} (budget <= {LIMIT})")


def untagged_worktrees(tmp: Path, n: int, sleep: float) -> None:
    agent = tmp / "editing_agent.sh"
    agent.write_text(EDITING_AGENT, encoding="utf-8")
    agent.chmod(0o755)
    template = tmp / "untagged"
    make_project(template, n, agent, tagged=False)
    make_repository(template)
    runs = {
        "1 worker, --worktree": run_loop(template, "wt-1", sleep, 1, "--worktree"),
        "4 workers, --worktree": run_loop(template, "wt-4", sleep, 4, "--worktree"),
        "1 worker, --no-worktree": run_loop(template, "shared-1", sleep, 1, "--no-worktree"),
        "4 workers, --no-worktree": run_loop(template, "shared-4", sleep, 4, "--no-worktree"),
    }
    for name in ("wt-1", "wt-4"):
        merged = merges_on_main(tmp / name)
        assert merged == n, f"{merged} merges on main in {name}, not {n}"
    report("untagged backlog, git repository", n, sleep, runs)
    print(f"  every ticket merged into main once (--worktree: {n} merge commits each run)")
    t1, _ = runs["1 worker, --worktree"]
    t4, cpu4 = runs["4 workers, --worktree"]
    floor_line(t1, cpu4)
    shared = runs["4 workers, --no-worktree"][0] / runs["1 worker, --no-worktree"][0]
    print(
        f"  shared tree, untagged: 4 workers / 1 worker = {shared:.2f} (an untagged ticket "
        "runs alone in the shared tree: no parallelism without worktrees)"
    )
    ratio = t4 / t1
    budget(
        "untagged in worktrees, 4 workers / 1 worker",
        ratio,
        LIMIT,
        f"{ratio:.3f} (budget <= {LIMIT})",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tickets", type=int, default=60, help="tagged backlog's size")
    parser.add_argument("--sleep", type=float, default=0.05, help="agent sleep per phase (s)")
    parser.add_argument("--untagged", type=int, default=16, help="untagged backlog's size")
    parser.add_argument(
        "--untagged-sleep", type=float, default=0.2, help="agent sleep per phase (s), worktrees"
    )
    args = parser.parse_args()
    # The cores are shared with whatever else runs: the load says how much of them was ours.
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count() or 1} cores")
    with tempfile.TemporaryDirectory() as tmp:
        if args.tickets:
            tagged_shared(Path(tmp), args.tickets, args.sleep)
        if args.untagged:
            untagged_worktrees(Path(tmp), args.untagged, args.untagged_sleep)


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"(benchmark took {time.perf_counter() - started:.0f} s)")
