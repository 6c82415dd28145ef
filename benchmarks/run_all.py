"""Every benchmark, one after the other; each prints its figures, baselines and PASS/FAIL.

python benchmarks/run_all.py [--tk /path/to/tk]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).parent
SUITE = [
    "bench_lifecycle.py",
    "bench_agent_start.py",
    "bench_startup.py",
    "bench_selection.py",
    "bench_watch.py",
    "bench_parallel.py",
    "bench_workspace.py",
    "bench_conflicts.py",
    "bench_convergence.py",
    "bench_ui.py",
    "bench_temporal.py",
]


def main() -> int:
    extra = sys.argv[1:]
    failed = 0
    for name in SUITE:
        if not (HERE / name).exists():
            continue
        print(f"\n== {name}", flush=True)
        args = extra if name == "bench_selection.py" else []
        done = subprocess.run(
            [sys.executable, str(HERE / name), *args], capture_output=True, text=True
        )
        print(done.stdout, end="")
        if done.returncode != 0:
            print(done.stderr, end="")
            failed += 1
        failed += done.stdout.count("FAIL ")
    print(f"\n{failed} budget(s) failed or benchmark(s) broke")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
