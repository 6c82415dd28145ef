"""Backlog selection (`tk ready`'s rules) over a generated backlog, against tk itself.

Generates N tickets in the tk format (30% closed, 0-3 random deps each, priorities 0-4, some
component tags) and times tf_fsm's one-pass scan plus selection in-process (warm, median) and
as `tf-fsm tickets ready` (a whole process, Python start-up included). With `--tk PATH` (a tk
script; nothing is vendored here) it times `tk ready` on the same directory, checks that both
print the same bytes, and prints the ratio.

    python benchmarks/bench_selection.py [--tickets 10000] [--tk /path/to/tk] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tf_fsm import selection
from tf_fsm.tickets import new_ticket, scan


def generate(directory: Path, count: int, seed: int = 7) -> None:
    rnd = random.Random(seed)
    directory.mkdir(parents=True, exist_ok=True)
    ids = [f"bk-{i:05x}" for i in range(count)]
    for tid in ids:
        deps = tuple(sorted(set(rnd.sample(ids, rnd.randint(0, 3)))))
        text = new_ticket(
            tid,
            f"Generated ticket {tid}",
            status="closed" if rnd.random() < 0.3 else rnd.choice(["open", "in_progress"]),
            deps=deps,
            priority=rnd.randint(0, 4),
            tags=tuple(rnd.sample(["component:api", "component:db", "component:ui"], 1)),
            created="2026-02-10T12:00:00Z",
            description="Body text that tk's awk reads line by line as well.",
        )
        (directory / f"{tid}.md").write_text(text, encoding="utf-8")


def time_in_process(directory: Path, repeat: int) -> tuple[float, float, str]:
    scans, totals = [], []
    output = ""
    for _ in range(repeat):
        start = time.perf_counter()
        backlog = scan(directory)
        scanned = time.perf_counter()
        output = "".join(selection.ready_line(ln) + "\n" for ln in selection.ready(backlog))
        totals.append(time.perf_counter() - start)
        scans.append(scanned - start)
    return statistics.median(scans), statistics.median(totals), output


def time_command(argv: list[str], env: dict[str, str], cwd: Path, repeat: int) -> tuple[float, str]:
    times = []
    out = ""
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=True)
        times.append(time.perf_counter() - start)
        out = done.stdout.decode("utf-8", "surrogateescape")
    return statistics.median(times), out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tickets", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tk", help="path to a tk script, to compare with `tk ready`")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        directory = root / ".tickets"
        start = time.perf_counter()
        generate(directory, args.tickets)
        print(f"generated {args.tickets} tickets in {time.perf_counter() - start:.1f}s")
        env = {**os.environ, "TICKETS_DIR": str(directory), "LC_ALL": "C", "TF_FSM_ROOT": tmp}

        scan_s, total_s, ours = time_in_process(directory, args.repeat)
        ready = ours.count("\n")
        print(
            f"tf_fsm in-process: scan {scan_s * 1000:.0f} ms, "
            f"scan + ready {total_s * 1000:.0f} ms ({ready} ready)"
        )
        cli_s, cli_out = time_command(
            [sys.executable, "-m", "tf_fsm", "tickets", "ready"], env, root, args.repeat
        )
        assert cli_out == ours, "tf-fsm tickets ready differs from the in-process selection"
        print(f"tf-fsm tickets ready (whole process): {cli_s * 1000:.0f} ms")

        if args.tk:
            tk_s, tk_out = time_command(["bash", args.tk, "ready"], env, root, 1)
            same = "identical" if tk_out == ours else "DIFFERENT"
            print(f"tk ready: {tk_s * 1000:.0f} ms; output {same}")
            print(
                f"ratio tk / tf_fsm: {tk_s / total_s:.1f}x in-process, "
                f"{tk_s / cli_s:.1f}x whole process"
            )


if __name__ == "__main__":
    main()
