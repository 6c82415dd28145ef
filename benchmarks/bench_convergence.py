"""Convergence economics: the retry policies on a simulated backlog, through the real
orchestrator, and the simulator's criteria (tf_fsm.simulate.criteria) as PASS/FAIL lines.

    python benchmarks/bench_convergence.py [--tickets 500] [--seed 1] [--jobs 2] [--chart X.svg]

Policies: (a) blind re-runs with the base models, (b) the tiered curve, (c) the curve
plus the same-failure short-circuit, (d) the strongest model for every role, (e) the strongest
model for the escalated roles only; then (c) again under the profile's per-ticket budget.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

from tf_fsm.simulate import criteria, load_profile, simulate, svg_chart, table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tickets", type=int, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--chart", default=None)
    args = parser.parse_args()
    profile = load_profile(None)
    tickets = args.tickets or profile.tickets
    started = time.perf_counter()
    results = simulate(profile, list("abcde"), tickets, args.seed, True, args.jobs)
    elapsed = time.perf_counter() - started
    print(f"{tickets} tickets, seed {args.seed}, {elapsed:.1f} s with {args.jobs} job(s)")
    print(table(results))
    if args.chart:
        Path(args.chart).write_text(svg_chart(results, f"{tickets} simulated tickets"))
    for name, ok, detail in criteria(results):
        print(f"{'PASS' if ok else 'FAIL'} {name}: {detail}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
