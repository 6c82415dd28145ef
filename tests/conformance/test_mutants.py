"""The conformance suites catch what they are for: each suite, run in a pytest process of its
own against its deliberately broken implementations (broken_workspaces.py,
broken_executors.py, broken_stores.py), must fail every one of them. A promise a suite stops
checking shows here as a mutant it no longer catches.

Each mutant leaves the run at its first failing test (conftest.py), so a run costs about what
the suite costs up to the test that catches the last mutant.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conformance import broken_executors, broken_stores, broken_workspaces
from tests.conformance.conftest import CAUGHT_ENV, MUTANTS_ENV

REPO = Path(__file__).resolve().parents[2]
#: the suite's file, and its broken implementations by name
SUITES = {
    "workspaces": ("tests/conformance/test_workspaces.py", sorted(broken_workspaces.BROKEN)),
    "executors": ("tests/conformance/test_executors.py", sorted(broken_executors.BROKEN)),
    "stores": ("tests/conformance/test_store.py", sorted(broken_stores.BROKEN)),
}


@dataclass
class MutantRun:
    """One suite's pytest process against its broken implementations."""

    proc: subprocess.Popen[str]
    caught_file: Path

    def wait(self) -> tuple[int, str, dict[str, str]]:
        """Its exit code, the end of its output, and which test caught each mutant."""
        out, err = self.proc.communicate(timeout=600)
        caught = self.caught_file
        found = json.loads(caught.read_text(encoding="utf-8")) if caught.exists() else {}
        return self.proc.returncode, out[-4000:] + err[-2000:], found


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, MutantRun]]:
    """Every suite's mutant run, started together (they take turns on nothing)."""
    started = {}
    for suite, (path, _mutants) in SUITES.items():
        caught_file = tmp_path_factory.mktemp(suite) / "caught.json"
        env = {**os.environ, MUTANTS_ENV: suite, CAUGHT_ENV: str(caught_file)}
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", path, "-q", "-p", "no:cacheprovider", "-rN"],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        started[suite] = MutantRun(proc, caught_file)
    yield started
    for run in started.values():
        if run.proc.poll() is None:
            run.proc.kill()
        run.proc.communicate()


@pytest.mark.parametrize("suite", sorted(SUITES))
def test_the_suite_fails_every_broken_implementation(
    suite: str, runs: dict[str, MutantRun]
) -> None:
    mutants = SUITES[suite][1]
    code, output, caught = runs[suite].wait()
    assert code == 1, f"exit {code}, not 1 (tests failed):\n{output}"
    assert set(caught) <= set(mutants), caught  # only the broken implementations ran
    table = "\n".join(f"  {m}: {caught.get(m, 'NOT CAUGHT').split('::')[-1]}" for m in mutants)
    print(f"{suite}: {len(caught)}/{len(mutants)} broken implementations caught\n{table}")
    assert sorted(caught) == mutants, f"not caught: {sorted(set(mutants) - set(caught))}\n{output}"
