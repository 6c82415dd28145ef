"""Budget 3: backlog scale. `tf-fsm tickets ready` and the loop's selection over 10,000 and
100,000 generated tk tickets.

Each backlog is generated once into a temporary directory: tk tickets (30% closed, 0-3 random
deps, priorities 0-4, one component tag each) and, for 3% of them, a retry-state.json (one
blocked attempt, retries exhausted, or closed before and reopened). Timed, per size:

* `tf-fsm tickets ready` as a whole process (Python start-up included), median;
* the same scan + selection in-process (warm), for reference;
* the loop's selection: `tf-fsm ralph`'s own `Loop._fill` with 4 worker slots, each start
  recorded instead of spawned (scan, tk ready's order, reading each candidate's files); and,
  for information, a later pass of the same loop (its scan cache warm, the files unchanged).

Budgets: 10k <= 0.5 s; 100k <= 12 x 10k (linear); peak memory of a 100k process <= 300 MB
(the CLI's and the loop selection's, each in a fresh process); no state machine built while
selecting. With `--tk PATH` (a tk script; nothing is vendored here) it also times `tk ready`
on the 10k backlog 5 times, each run followed by 5 runs of `tf-fsm tickets ready`, checks both
print the same bytes and wants tf_fsm >= 10 x faster (medians), then prints where the time
goes: the CLI on an empty backlog, reading the files, parsing them (the scan overlaps those
two, in two processes), and selecting and printing.

    python benchmarks/bench_selection.py [--sizes 10000,100000] [--tk /path/to/tk] [--repeat 3]
"""

from __future__ import annotations

import argparse
import io
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _budget import budget, median_seconds, ms

from tf_fsm.cli.run import worker_main
from tf_fsm.core import machine
from tf_fsm.core.state import EscalationRecord, finish_attempt, new_state, start_attempt
from tf_fsm.loop.ralph import Loop
from tf_fsm.loop.records import LoopOptions, Plan
from tf_fsm.loop.view import Reporter
from tf_fsm.settings.load import settings_from_dict
from tf_fsm.tk import file_reader as _file_reader
from tf_fsm.tk import selection
from tf_fsm.tk.backlog import _parse_file
from tf_fsm.tk.file_reader import read_file
from tf_fsm.tk.tickets import Backlog, new_ticket, scan

WORKERS = 4
LIMIT_10K = 0.5
MAX_GROWTH = 12.0  # 100k may take at most 12 x 10k: linear, with room for noise
MAX_RSS_MB = 300.0
TK_RUNS = 5  # tk takes about 1.3 s at 10k
CLI_RUNS_PER_TK = 5
NOW = datetime(2026, 2, 10, 12, 0, tzinfo=UTC)

# Runs argv as its only child and prints the child's peak RSS (KB): RUSAGE_CHILDREN of a
# fresh process, so nothing else this benchmark ran is counted.
PEAK_RSS = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def _state_templates() -> list[dict[str, Any]]:
    """retry-state.json bodies: one blocked attempt (a retry is due), retries exhausted (the
    loop skips it), closed once and reopened in tk (starts over at attempt 1)."""

    def attempts(*ends: str) -> dict[str, Any]:
        state = new_state("x", NOW)
        for end in ends:
            state = start_attempt(
                state, trigger="initial", escalation=EscalationRecord.of(), fail_on=[], now=NOW
            )
            state = finish_attempt(state, status=end, counts={}, max_retries=3, now=NOW)  # type: ignore[arg-type]
        return state.to_json_dict()

    return [attempts("blocked"), attempts("blocked", "blocked", "blocked"), attempts("closed")]


def generate(root: Path, count: int, seed: int = 7) -> None:
    rnd = random.Random(seed)
    directory = root / ".tickets"
    directory.mkdir(parents=True)
    states = _state_templates()
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
        if rnd.random() < 0.03:
            state_dir = root / ".tf/knowledge/tickets" / tid
            state_dir.mkdir(parents=True)
            body = {**rnd.choice(states), "ticketId": tid}
            (state_dir / "retry-state.json").write_text(json.dumps(body), encoding="utf-8")


class _SelectOnly(Loop):
    """The loop's own `_fill`, recording each start instead of spawning a worker."""

    def _launch(self, plan: Plan) -> None:
        self.running[plan.ticket] = SimpleNamespace(plan=plan)  # type: ignore[assignment]


def select_only_loop(root: Path) -> _SelectOnly:
    settings = settings_from_dict({"executor": {"kind": "scripted"}})
    options = LoopOptions(workers=WORKERS, max_iterations=10**9)
    reporter = Reporter(None, err=io.StringIO())
    return _SelectOnly(root, settings, options, reporter, worker=worker_main)  # never started


def loop_selection(root: Path) -> list[str]:
    loop = select_only_loop(root)
    loop._fill()
    return list(loop.running)


def later_pass(loop: _SelectOnly) -> list[str]:
    """A pass of a loop that has scanned before, its workers gone: the backlog's files are
    unchanged, so its scan cache answers for them (a stat per file)."""
    loop.running.clear()
    loop._fill()
    return list(loop.running)


def ready_cli(root: Path | str) -> list[str]:
    """`tf-fsm tickets ready` on the project at `root`, as a whole process."""
    return [sys.executable, "-m", "tf_fsm", "--root", str(root), "tickets", "ready"]


def ready_text(backlog: Backlog) -> str:
    """What `tickets ready` prints for a scanned backlog."""
    return "".join(selection.ready_line(ln) + "\n" for ln in selection.ready(backlog))


def ready_in_process(root: Path) -> str:
    return ready_text(scan(root / ".tickets"))


def run(argv: list[str], root: Path) -> bytes:
    env = {**os.environ, "LC_ALL": "C"}
    env.pop("TICKETS_DIR", None)
    return subprocess.run(argv, cwd=root, env=env, capture_output=True, check=True).stdout


def peak_rss_mb(argv: list[str], root: Path) -> float:
    return int(run([sys.executable, "-c", PEAK_RSS, *argv], root)) / 1024


def measure(roots: dict[int, Path], repeat: int) -> dict[int, dict[str, float]]:
    """Median times per size. The sizes take turns, run by run, so that a change in the
    machine's load (it is shared) weighs on both sides of the growth ratio alike."""
    steps: dict[int, dict[str, Callable[[], object]]] = {}
    for count, root in roots.items():
        cli = ready_cli(root)
        ours = ready_in_process(root)
        assert run(cli, root).decode("utf-8", "surrogateescape") == ours, "CLI != in-process"
        print(
            f"{count:>7,} tickets: {ours.count(chr(10))} ready, loop starts "
            f"{len(loop_selection(root))} of {WORKERS} (3 components, 1 each)"
        )
        warm = select_only_loop(root)
        warm._fill()
        steps[count] = {
            "cli": lambda cli=cli, root=root: run(cli, root),
            "in_process": lambda root=root: ready_in_process(root),
            "loop": lambda root=root: loop_selection(root),
            "later": lambda warm=warm: later_pass(warm),
        }
    times: dict[int, dict[str, list[float]]] = {n: {k: [] for k in steps[n]} for n in steps}
    for _ in range(repeat):
        for count, named in steps.items():
            for key, step in named.items():
                times[count][key].append(median_seconds(step, 1))
    figures = {n: {k: statistics.median(v) for k, v in kinds.items()} for n, kinds in times.items()}
    for count, f in figures.items():
        print(
            f"{count:>7,} tickets: tf-fsm tickets ready {ms(f['cli'])} "
            f"(in-process {ms(f['in_process'])}); loop selection {ms(f['loop'])}, "
            f"a later pass {ms(f['later'])}"
        )
    return figures


def growth_budgets(small: int, large: int, figures: dict[int, dict[str, float]]) -> None:
    s, big = figures[small], figures[large]
    growth = large / small
    allowed = MAX_GROWTH * growth / 10
    for key, what in (("cli", "tf-fsm tickets ready"), ("loop", "loop selection")):
        detail = f"{ms(s[key])} (budget <= {ms(LIMIT_10K)})"
        budget(f"{what}, {small:,} tickets", s[key], LIMIT_10K, detail)
        ratio = big[key] / s[key]
        detail = f"{ratio:.1f}x for {growth:.0f}x the tickets (budget <= {allowed:.0f}x)"
        budget(f"{what}, {large:,} / {small:,}", ratio, allowed, detail)


def memory_budgets(root: Path, count: int) -> None:
    cli = ready_cli(root)
    select = [sys.executable, __file__, "--select-once", str(root)]
    for what, argv in (("tf-fsm tickets ready", cli), ("loop selection", select)):
        peak = peak_rss_mb(argv, root)
        detail = f"{peak:.0f} MB (budget <= {MAX_RSS_MB:.0f} MB)"
        budget(f"{what}, {count:,} tickets, peak memory", peak, MAX_RSS_MB, detail)


def compare_tk(tk: str, root: Path, count: int) -> None:
    """`tk ready` against `tf-fsm tickets ready`, run in turns (the machine's speed moves from
    minute to minute, so each side's median comes from the same minutes): after each tk run,
    CLI_RUNS_PER_TK runs of the CLI, which takes a tenth of the time and moves more with the
    machine's hiccups."""
    cli = ready_cli(root)
    times: dict[str, list[float]] = {"tk": [], "cli": []}
    outputs: dict[str, bytes] = {}
    for _ in range(TK_RUNS):
        for side, argv in (("tk", ["bash", tk, "ready"]), *[("cli", cli)] * CLI_RUNS_PER_TK):
            start = time.perf_counter()
            outputs[side] = run(argv, root)
            times[side].append(time.perf_counter() - start)
    tk_s, cli_seconds = statistics.median(times["tk"]), statistics.median(times["cli"])
    same = "identical" if outputs["tk"] == outputs["cli"] else "DIFFERENT"
    print(
        f"tk ready, {count:,} tickets: {ms(tk_s)} (median of {TK_RUNS}); `tf-fsm tickets "
        f"ready` in the same minutes {ms(cli_seconds)} (median of {len(times['cli'])}, "
        f"{CLI_RUNS_PER_TK} after each tk run); output {same}"
    )
    detail = f"{tk_s / cli_seconds:.1f}x faster, whole process against tk (budget >= 10x)"
    budget(f"tf-fsm tickets ready / tk ready, {count:,} tickets", cli_seconds / tk_s, 0.1, detail)
    # Where the time goes: the process with the CLI imported; reading and parsing the files
    # (the scan overlaps them: a forked reader reads most files while this process reads the
    # first share and parses them all); the rest.
    with tempfile.TemporaryDirectory() as empty:
        (Path(empty) / ".tickets").mkdir()
        start_up = median_seconds(lambda: run(ready_cli(empty), Path(empty)), 5)
    paths = sorted(str(p) for p in (root / ".tickets").glob("*.md"))
    reads = [read_file(path, False) for path in paths]
    reading = median_seconds(lambda: [read_file(path, False) for path in paths], 5)
    parsing = median_seconds(
        lambda: [_parse_file(p, r) for p, r in zip(paths, reads, strict=True)], 5
    )
    backlog = scan(root / ".tickets")
    rest = median_seconds(lambda: ready_text(backlog), 5)
    share = _file_reader._OWN_SHARE
    floor = start_up + max(share * reading + parsing, (1 - share) * reading) + rest
    print(
        f"where the time goes: start-up (an empty backlog) {ms(start_up)}; reading the "
        f"{count:,} files {ms(reading)} and parsing them {ms(parsing)} (the scan overlaps "
        f"them: this process reads {share:.0%} of the files and parses all, a forked reader "
        f"reads the rest); selecting and printing {ms(rest)}. Their sum, with the longer of "
        f"the two sides of the scan, is {ms(floor)}, {tk_s / floor:.1f}x faster than tk"
    )


def count_lifecycles() -> list[int]:
    """Counts `Lifecycle` constructions from here on (the loop must build none)."""
    made = [0]
    built = machine.Lifecycle.__init__

    def counting_init(self: machine.Lifecycle, *args: Any, **kwargs: Any) -> None:
        made[0] += 1
        built(self, *args, **kwargs)

    machine.Lifecycle.__init__ = counting_init  # type: ignore[method-assign]
    return made


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="small,large (default 10k,100k)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--tk", help="path to a tk script, to compare with `tk ready`")
    parser.add_argument("--select-once", metavar="ROOT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.select_once:  # the loop's selection alone, in a fresh process (peak memory)
        loop_selection(Path(args.select_once))
        return
    small, large = (int(n) for n in args.sizes.split(","))
    made = count_lifecycles()
    with tempfile.TemporaryDirectory() as tmp:
        roots = {count: Path(tmp) / str(count) for count in (small, large)}
        for count, root in roots.items():
            start = time.perf_counter()
            generate(root, count)
            print(f"generated {count:,} tickets in {time.perf_counter() - start:.1f}s")
        # The kernel would otherwise write the new files back while the figures are taken, on
        # the same 2 cores: flushed first, so that the benchmark times tf_fsm, not its own setup.
        start = time.perf_counter()
        os.sync()
        print(f"flushed the generated files to disk in {time.perf_counter() - start:.1f}s")
        figures = measure(roots, args.repeat)
        growth_budgets(small, large, figures)
        memory_budgets(Path(tmp) / str(large), large)
        transitions = "transitions" in sys.modules
        detail = f"Lifecycle built {made[0]} times; transitions imported: {transitions}"
        budget("no state machine while selecting", made[0] + transitions, 0, detail)
        if args.tk:
            compare_tk(args.tk, Path(tmp) / str(small), small)
        else:
            print("tk ready: not compared (no tk script is vendored; pass --tk /path/to/tk)")


if __name__ == "__main__":
    main()
