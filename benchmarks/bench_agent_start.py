"""What starting a child costs tf_fsm: its door (tf_fsm.process.door.run_process) through
the launcher, against the same door tying the child to tf_fsm with `setpriv --pdeathsig
KILL` (the way before the launcher; the launcher switched off in this process), against
`subprocess.run` alone. Two children: `/bin/true` (the start is all there is) and a Python
agent that reads its prompt (`python -S`, what a trivial agent costs). The three sides
alternate, 9 rounds of 40 starts each; medians per start. Also the launcher's own start,
once per tf_fsm process.

Budget: through the launcher, a Python agent's start <= 1.1 x the same spawned alone (the
lifecycle's 1.25 x leaves the rest to tf_fsm's own work, bench_lifecycle.py).

    python benchmarks/bench_agent_start.py [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _budget import budget, ms

from tf_fsm.process import launcher
from tf_fsm.process.door import run_process

STARTS = 40
CHILDREN = {
    "/bin/true": ["/bin/true"],
    "a Python agent": [sys.executable, "-S", "-c", "import sys; sys.stdin.read()"],
}


def per_start(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    for _ in range(STARTS):
        fn()
    return (time.perf_counter() - start) / STARTS


def measure(argv: list[str], cwd: Path, rounds: int) -> dict[str, float]:
    available = launcher.available
    sides: dict[str, list[float]] = {"alone": [], "launcher": [], "setpriv": []}

    def door() -> None:
        assert run_process(argv, cwd=cwd, stdin="prompt").exit_code == 0

    def alone() -> None:
        subprocess.run(argv, input=b"prompt", capture_output=True, cwd=cwd, check=True)

    try:
        for _ in range(rounds):
            sides["alone"].append(per_start(alone))
            launcher.available = available
            sides["launcher"].append(per_start(door))
            launcher.available = lambda: False  # the door as it was: setpriv, else a hook
            sides["setpriv"].append(per_start(door))
    finally:
        launcher.available = available
    return {side: statistics.median(times) for side, times in sides.items()}


def launcher_start() -> float:
    """A fresh launcher, until it has started its first child (the cost per tf_fsm process)."""
    times = []
    for _ in range(7):
        start = time.perf_counter()
        boot = launcher.Launcher()
        with tempfile.TemporaryDirectory() as tmp:
            launcher._CURRENT[:] = [boot]
            run_process(["/bin/true"], cwd=Path(tmp))
        times.append(time.perf_counter() - start)
        boot.control.close()
        boot.server.wait()
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    if not launcher.available():
        print("SKIP  the launcher runs on Linux with pidfds only")
        return
    with tempfile.TemporaryDirectory() as tmp:
        run_process(["/bin/true"], cwd=Path(tmp))  # the launcher up, as in a run
        found = {name: measure(argv, Path(tmp), args.rounds) for name, argv in CHILDREN.items()}
    for name, sides in found.items():
        alone = sides["alone"]
        print(
            f"{name}: alone {ms(alone)} per start; the door through the launcher "
            f"{ms(sides['launcher'])} ({sides['launcher'] / alone:.2f} x), through setpriv "
            f"{ms(sides['setpriv'])} ({sides['setpriv'] / alone:.2f} x)"
        )
    print(f"the launcher's own start, once per tf_fsm process: {ms(launcher_start())}")
    agent = found["a Python agent"]
    budget(
        "a Python agent's start through the launcher vs spawned alone",
        agent["launcher"] / agent["alone"],
        1.1,
        f"ratio {agent['launcher'] / agent['alone']:.2f} (budget <= 1.1)",
    )


if __name__ == "__main__":
    main()
