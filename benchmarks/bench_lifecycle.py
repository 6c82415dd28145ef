"""Per-phase orchestration overhead with full durability, against the fsync limit.

A 3-attempt lifecycle (blocked, blocked, closed) runs through the real orchestrator with the
in-process scripted agent, so everything measured is tf_fsm's own work: the machine, the
retry-state writes, the fsynced journal, the reports. The baseline, measured in the same run,
is the physical limit: one atomic fsynced write of a 2 KB file.

    python benchmarks/bench_lifecycle.py [--tickets N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from tf_fsm.journal import PhaseStarted
from tf_fsm.orchestrator import RunOptions, run_ticket
from tf_fsm.store import TicketStore, atomic_write_bytes

TICKET = "---\nid: {id}\nstatus: open\ndeps: []\nlinks: []\ntype: task\npriority: 2\n---\n# T\n"
SCENARIO = {
    "findings": [
        # reported on attempts 1 and 2 only, and nobody fixes it: blocked, blocked, closed
        {"id": "A", "severity": "Major", "text": "`a.py:1` - x", "fixedBy": [], "attempts": [1, 2]},
    ]
}


def make_project(root: Path, tickets: int) -> None:
    settings = {
        "metaModels": {"third": {"model": "p/third"}},
        "workflow": {
            "failOn": ["Critical", "Major"],
            "escalation": {"enabled": True, "maxRetries": 3, "models": {"worker": "third"}},
        },
        "executor": {"kind": "scripted", "scenario": "scenario.json"},
    }
    (root / ".tf/config").mkdir(parents=True)
    (root / ".tf/config/settings.json").write_text(json.dumps(settings))
    (root / "scenario.json").write_text(json.dumps(SCENARIO))
    (root / ".tickets").mkdir()
    for i in range(tickets):
        (root / f".tickets/b-{i}.md").write_text(TICKET.format(id=f"b-{i}"))


def fsync_baseline(directory: Path, n: int = 200) -> float:
    data = b"x" * 2048
    times = []
    for i in range(n):
        start = time.perf_counter()
        atomic_write_bytes(directory / f"f{i % 5}.bin", data)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tickets", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        make_project(root, args.tickets)
        baseline = fsync_baseline(root)
        per_phase = []
        for i in range(args.tickets):
            start = time.perf_counter()
            outcome = run_ticket(root, f"b-{i}", RunOptions())
            elapsed = time.perf_counter() - start
            if (outcome.status, outcome.attempts_run) != ("closed", 3):
                raise SystemExit(f"unexpected outcome {outcome}")
            store = TicketStore(root / ".tf/knowledge", f"b-{i}")
            phases = sum(isinstance(e, PhaseStarted) for e in store.read_events().events)
            per_phase.append(elapsed / phases)
    median = statistics.median(per_phase)
    print(f"phases per 3-attempt lifecycle: {phases}")
    print(f"tf_fsm per phase (median of {args.tickets} lifecycles): {median * 1e3:.2f} ms")
    print(f"baseline: one atomic fsynced 2 KB write: {baseline * 1e3:.3f} ms")
    print(f"ratio per phase / fsync write: {median / baseline:.1f}x")


if __name__ == "__main__":
    main()
