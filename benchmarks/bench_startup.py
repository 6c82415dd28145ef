"""Budget 4: `tf-fsm --help` and `tf-fsm status` on an empty project start fast.

Budget: each <= 2 x `python -c pass` + 100 ms, measured in the same run. "Empty project" is
measured twice: a project with no settings file (the package defaults apply, nothing to
validate) and one fresh from `tf-fsm init` (a settings file that init validated and recorded in
`.tf/cache/settings-checked.json`, so `status` need not load pydantic; docs/settings.md).
For information, not budgeted: `status` after the settings file was edited (the record no
longer vouches for it, so it is validated with pydantic), and the floor of that: Python
importing pydantic and validating one one-field model.

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

# The least a settings check with pydantic can cost: its import and one model.
PYDANTIC_FLOOR = """\
from pydantic import BaseModel, ConfigDict, Field
class M(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    n: int = Field(default=1, ge=0)
M.model_validate({"n": 2})
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        bare, initialised = Path(tmp) / "bare", Path(tmp) / "init"
        (bare / ".tf").mkdir(parents=True)
        initialised.mkdir()

        def run(*argv: str, cwd: Path = bare) -> None:
            subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, check=True)

        run("-m", "tf_fsm", "init", cwd=initialised)
        python = median_seconds(lambda: run("-c", "pass"), args.repeat)
        limit = 2 * python + 0.100
        print(f"baseline: python -c pass {ms(python)}; budget {ms(limit)}")
        floor = median_seconds(lambda: run("-c", PYDANTIC_FLOOR), args.repeat)
        print(f"floor: python importing pydantic and validating one model {ms(floor)}")
        cases = (
            ("tf-fsm --help", ("--help",), bare),
            ("tf-fsm status (no settings file)", ("status",), bare),
            ("tf-fsm status (after tf-fsm init)", ("status",), initialised),
        )
        for name, argv, cwd in cases:
            took = median_seconds(
                lambda argv=argv, cwd=cwd: run("-m", "tf_fsm", *argv, cwd=cwd), args.repeat
            )
            budget(name, took, limit, f"{ms(took)} (budget <= {ms(limit)})")
        settings = initialised / ".tf/config/settings.json"
        settings.write_text(settings.read_text() + "\n")  # same settings, other bytes
        took = median_seconds(lambda: run("-m", "tf_fsm", "status", cwd=initialised), args.repeat)
        print(f"info: tf-fsm status (settings edited since recorded: validated) {ms(took)}")


if __name__ == "__main__":
    main()
