"""Budget 6: the backlog loop's parallel throughput.

A backlog of 200 independent tickets (no deps, one component tag each, so any 4 may run
together) is run to the end by `tf-fsm ralph --workers 1` and, in a fresh copy, by
`--workers 4`. The agent is a real process per invocation, benchmarks/sleepy_agent.sh: it sleeps
50 ms and writes a clean report, so every ticket closes in one attempt (6 invocations:
research, implement, 3 reviews, close). A real process rather than the in-process scripted
executor, because spawning agents is part of what the loop and its workers do.

Budget: 4 workers take <= 0.35 x the time of 1 worker. Also printed: the CPU time of the whole
run (loop, workers, agents) per ticket against the agent's sleep per ticket, and the best
ratio this machine's cores allow for that CPU time: with C CPU-seconds and K cores, 4 workers
cannot take less than max(t1 / 4, C / K).

    python benchmarks/bench_parallel.py [--tickets 200] [--sleep 0.05]
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
from _budget import budget

from tf_fsm.tk.tickets import new_ticket, scan

AGENT = Path(__file__).resolve().parent / "sleepy_agent.sh"
LIMIT = 0.35
INVOCATIONS = 6  # research, implement, review x 3, close: the default settings' lifecycle

# Runs argv as its only child; prints wall seconds and the CPU seconds of the child and all
# its descendants (RUSAGE_CHILDREN of a fresh process: workers and agents included).
TIMED = (
    "import resource, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
    "wall = time.perf_counter() - start\n"
    "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(wall, r.ru_utime + r.ru_stime)\n"
)


def make_project(root: Path, count: int) -> None:
    (root / ".tickets").mkdir(parents=True)
    (root / ".tf" / "config").mkdir(parents=True)
    settings = {
        "executor": {"kind": "command", "command": [str(AGENT)]},
        "ralph": {"maxIterations": count * 2},
    }
    (root / ".tf" / "config" / "settings.json").write_text(json.dumps(settings))
    for i in range(count):
        tid = f"pb-{i:04d}"
        text = new_ticket(
            tid, f"Ticket {i}", tags=(f"component:c{i}",), created="2026-02-10T12:00:00Z"
        )
        (root / ".tickets" / f"{tid}.md").write_text(text, encoding="utf-8")


def run_loop(template: Path, workers: int, sleep: float) -> tuple[float, float]:
    root = template.parent / f"workers-{workers}"
    shutil.copytree(template, root)
    env = {**os.environ, "SLEEPY_AGENT_SECONDS": str(sleep)}
    argv = [sys.executable, "-m", "tf_fsm", "--root", str(root), "ralph", "--workers"]
    done = subprocess.run(
        [sys.executable, "-c", TIMED, *argv, str(workers)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    wall, cpu = (float(x) for x in done.stdout.split())
    records = scan(root / ".tickets").records.values()
    open_left = sum(r.status != "closed" for r in records)
    assert open_left == 0, f"{open_left} tickets not closed with {workers} worker(s)"
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tickets", type=int, default=200)
    parser.add_argument("--sleep", type=float, default=0.05, help="agent sleep per phase (s)")
    args = parser.parse_args()
    n, cores = args.tickets, os.cpu_count() or 1
    # The cores are shared with whatever else runs: the load says how much of them was ours.
    print(f"load average before: {os.getloadavg()[0]:.2f} on {cores} cores")
    with tempfile.TemporaryDirectory() as tmp:
        template = Path(tmp) / "template"
        make_project(template, n)
        t1, cpu1 = run_loop(template, 1, args.sleep)
        t4, cpu4 = run_loop(template, 4, args.sleep)
    sleep = INVOCATIONS * args.sleep
    print(f"{n} tickets, {INVOCATIONS} agent invocations each, agent sleeps {sleep:.2f} s/ticket")
    for workers, wall, cpu in ((1, t1, cpu1), (4, t4, cpu4)):
        print(
            f"{workers} worker(s): {wall:.1f} s ({wall / n * 1e3:.0f} ms/ticket), "
            f"CPU {cpu:.1f} s ({cpu / n * 1e3:.0f} ms/ticket)"
        )
    floor = max(t1 / 4, cpu4 / cores) / t1
    print(
        f"best ratio {cores} cores allow for that CPU: {floor:.2f} "
        f"(max(t1 / 4, CPU / {cores}) / t1)"
    )
    ratio = t4 / t1
    budget("4 workers / 1 worker", ratio, LIMIT, f"{ratio:.3f} (budget <= {LIMIT})")


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"(benchmark took {time.perf_counter() - started:.0f} s)")
