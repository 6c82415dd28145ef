"""Budget 4: `tf-fsm --help` and `tf-fsm status` on an empty project start fast.

Budget: each <= 2 x `python -c pass` + 100 ms, measured in the same run.

    python benchmarks/bench_startup.py [--repeat N]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _budget import budget, median_seconds, ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / ".tf").mkdir()

        def run(*argv: str) -> None:
            subprocess.run([sys.executable, *argv], cwd=tmp, capture_output=True, check=True)

        python = median_seconds(lambda: run("-c", "pass"), args.repeat)
        limit = 2 * python + 0.100
        print(f"baseline: python -c pass {ms(python)}; budget {ms(limit)}")
        for argv in (("--help",), ("status",)):
            took = median_seconds(lambda argv=argv: run("-m", "tf_fsm", *argv), args.repeat)
            budget(f"tf-fsm {' '.join(argv)}", took, limit, f"{ms(took)} (budget <= {ms(limit)})")


if __name__ == "__main__":
    main()
