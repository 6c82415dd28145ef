"""The contracts that keep the core pure break the build when broken: a copy of the package gets
one violation at a time, and the real `lint-imports` and `ruff check` (the CI's commands, with
this project's pyproject.toml) must fail naming it. A contract that passes anything would pass
these injections too."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The package and its pyproject.toml, copied where a violation may be written."""
    where = tmp_path / "copy"
    shutil.copytree(REPO / "tf_fsm", where / "tf_fsm", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(REPO / "pyproject.toml", where / "pyproject.toml")
    return where


def lint_imports(where: Path) -> subprocess.CompletedProcess[str]:
    # the copy first on the path: lint-imports graphs the package it imports
    env = {**os.environ, "PYTHONPATH": str(where)}
    return subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache"],
        cwd=where,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def ruff(where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "ruff"), "check", "--no-cache", "--output-format", "concise", "tf_fsm"],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
    )


def append(path: Path, code: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + code, encoding="utf-8")


PURE = "The core is pure: no file, process, clock or network access of its own BROKEN"


def test_the_copy_passes_as_it_is(copy: Path) -> None:
    """The baseline: without an injection both commands pass, so a failure below is the
    injection's."""
    imports = lint_imports(copy)
    assert imports.returncode == 0, imports.stdout + imports.stderr
    contracts = (REPO / "pyproject.toml").read_text().count("[[tool.importlinter.contracts]]")
    assert f"Contracts: {contracts} kept, 0 broken." in imports.stdout
    lint = ruff(copy)
    assert lint.returncode == 0, lint.stdout + lint.stderr


@pytest.mark.parametrize(
    ("module", "code", "named"),
    [
        # a file-system module, imported by the core itself
        ("core/gate.py", "\nimport os  # noqa: E402, F401\n", ["-   tf_fsm.core.gate -> os"]),
        # a settings reader: the core takes loaded settings, it never loads them
        (
            "core/gate.py",
            "\nfrom tf_fsm.settings.load import load_settings  # noqa: E402, F401\n",
            [
                "tf_fsm.core is not allowed to import tf_fsm.settings.load",
                "tf_fsm.core is not allowed to import tf_fsm.fs",
            ],
        ),
        (
            "core/next_step.py",
            "\nfrom tf_fsm.settings.project import find_project_root  # noqa: E402, F401\n",
            ["tf_fsm.core is not allowed to import tf_fsm.settings.project"],
        ),
        # indirect: a pure settings module the core imports starts reading files
        (
            "settings/schema.py",
            "\nimport pathlib  # noqa: E402, F401\n",
            [
                "tf_fsm.core is not allowed to import pathlib",
                "tf_fsm.settings.schema -> pathlib",
            ],
        ),
    ],
)
def test_an_import_the_core_may_not_make_breaks_lint_imports(
    copy: Path, module: str, code: str, named: list[str]
) -> None:
    append(copy / "tf_fsm" / module, code)
    result = lint_imports(copy)
    assert result.returncode == 1, result.stdout + result.stderr
    assert PURE in result.stdout
    for line in named:
        assert line in result.stdout


CLOCK = """

def _stamp() -> object:
    from datetime import datetime

    return datetime.now()
"""
OPEN = """

def _read(name: str) -> str:
    with open(name) as handle:
        return handle.read()
"""
PRINT = """

def _say() -> None:
    print("said")
"""


@pytest.mark.parametrize(
    ("code", "rule"),
    [
        (CLOCK, "TID251 `datetime.datetime.now` is banned: the core takes `now` from its caller"),
        (OPEN, "PTH123 `open()` should be replaced by `Path.open()`"),
        (PRINT, "T201 `print` found"),
    ],
)
def test_a_call_the_core_may_not_make_breaks_ruff(copy: Path, code: str, rule: str) -> None:
    append(copy / "tf_fsm" / "core" / "gate.py", code)
    result = ruff(copy)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "tf_fsm/core/gate.py:" in result.stdout
    assert rule in result.stdout


def test_outside_the_core_the_clock_and_print_are_allowed(copy: Path) -> None:
    """The bans are the core's: the views (which show the time and print) are not held to
    them."""
    append(copy / "tf_fsm" / "views" / "legend.py", CLOCK + PRINT)
    result = ruff(copy)
    assert result.returncode == 0, result.stdout + result.stderr
