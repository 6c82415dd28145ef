"""The per-test report tf_fsm asks pytest for (docs/gates.md, "The baseline"): a required gate
without `junitXml` whose failure is judged against the base commit runs with `--junitxml` to a
temporary file outside the tree (PYTEST_ADDOPTS), read and removed; real pytest processes on a
real test suite. And the rule that decides which gates are warned about."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.gitrepo import commit_all, git, init_repo, isolate
from tf_fsm.engine.gates import gate_baseline, run_gate
from tf_fsm.settings.gate_reports import looks_like_pytest
from tf_fsm.settings.load import QualityGate
from tf_fsm.workspace.baseline import baseline_dir

#: the projects' pytest gates start without this venv's plugins (tests/conftest.py)
pytestmark = pytest.mark.usefixtures("plain_pytest")

SUITE = """\
def test_broken():
    assert False


def test_fine():
    assert True


def test_deselectable():
    assert False
"""
PYTEST = f"{sys.executable} -m pytest -q -p no:cacheprovider"
BROKEN = "suite.test_suite::test_broken"
DESELECTABLE = "suite.test_suite::test_deselectable"


@pytest.fixture
def suite(project: Path, temp_dir: Path) -> Path:
    """A project with a pytest suite, in a test with its own TMPDIR."""
    (project / "suite").mkdir()
    (project / "suite" / "__init__.py").write_text("")
    (project / "suite" / "test_suite.py").write_text(SUITE)
    return project


def files_in(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if "__pycache__" not in p.parts)


def temp_left(tmp_path: Path) -> list[str]:
    """What is left in the test's TMPDIR (the `temp_dir` fixture)."""
    return sorted(p.name for p in (tmp_path / "temp").iterdir())


@pytest.mark.parametrize(
    "command",
    [f"{PYTEST} suite", f"cd suite && {PYTEST} . | cat; exit ${{PIPESTATUS[0]}}"],
    ids=["command line", "a pipe in another directory"],
)
def test_a_judged_pytest_gate_gets_a_report_outside_the_tree(
    suite: Path, tmp_path: Path, command: str
) -> None:
    before = files_in(suite)
    result = run_gate(QualityGate(name="tests", command=command), suite, judged=True)
    assert (result.passed, result.exit_code) == (False, 1)
    owner = "suite.test_suite" if command.endswith("suite") else "test_suite"
    assert result.failing_tests == {f"{owner}::test_broken", f"{owner}::test_deselectable"}
    assert files_in(suite) == before  # nothing written into the tree
    assert temp_left(tmp_path) == []  # the report is removed once read


def test_an_argv_pytest_gate_keeps_the_user_s_pytest_addopts(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTEST_ADDOPTS", "-k 'not deselectable'")
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "suite"]
    result = run_gate(QualityGate(name="tests", command=argv), suite, judged=True)
    assert result.failing_tests == {BROKEN}  # the user's -k still applies
    assert temp_left(tmp_path) == []


def test_no_report_is_asked_for_when_nothing_is_judged(suite: Path, tmp_path: Path) -> None:
    gate = QualityGate(name="tests", command=f"{PYTEST} suite")
    assert run_gate(gate, suite).failing_tests is None  # no baseline: as it always ran
    optional = QualityGate(name="tests", command=f"{PYTEST} suite", required=False)
    assert run_gate(optional, suite, judged=True).failing_tests is None  # never judged
    marker = tmp_path / "addopts.txt"
    printing = f'printf %s "${{PYTEST_ADDOPTS-unset}}" > {marker}; exit 1'
    run_gate(QualityGate(name="x", command=printing), suite)
    assert marker.read_text() == "unset"


def test_a_junitxml_on_the_command_line_wins_so_the_run_has_no_report_of_tf_fsm_s(
    suite: Path, tmp_path: Path
) -> None:
    gate = QualityGate(name="tests", command=f"{PYTEST} --junitxml=own.xml suite")
    result = run_gate(gate, suite, judged=True)
    assert result.passed is False and result.failing_tests is None
    assert (suite / "own.xml").is_file()  # the command's own report, as it always wrote it
    assert temp_left(tmp_path) == []


def test_the_gate_s_own_junitxml_wins_and_nothing_is_added(suite: Path, tmp_path: Path) -> None:
    marker = tmp_path / "addopts.txt"
    command = f'printf %s "${{PYTEST_ADDOPTS-unset}}" > {marker}; {PYTEST} --junitxml=r.xml suite'
    gate = QualityGate(name="tests", command=command, junitXml="r.xml")
    result = run_gate(gate, suite, judged=True)
    assert result.failing_tests == {BROKEN, DESELECTABLE}
    assert marker.read_text() == "unset"


def test_a_non_pytest_gate_has_no_report(suite: Path, tmp_path: Path) -> None:
    gate = QualityGate(name="lint", command=["bash", "-c", "exit 1"])
    result = run_gate(gate, suite, judged=True)
    assert (result.passed, result.failing_tests) == (False, None)
    assert temp_left(tmp_path) == []


def test_the_base_run_gets_the_report_too_and_an_old_cache_is_not_served(
    suite: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    init_repo(suite, {".gitignore": ".tf/\n__pycache__/\n"})
    sha = commit_all(suite, "the suite")
    gate = QualityGate(name="tests", command=f"{PYTEST} suite")
    notes: list[str] = []
    found = gate_baseline(suite, sha, [gate], notes.append)(gate)
    assert found is not None and found.failing_tests == {BROKEN, DESELECTABLE}
    cache = baseline_dir(suite) / f"{sha}.json"
    doc = json.loads(cache.read_text())
    assert doc["version"] == 2
    # a file of the version that judged such a gate as a whole: computed again, with a note
    doc["version"] = 1
    doc["gates"]["tests"]["failingTests"] = None
    cache.write_text(json.dumps(doc))
    notes.clear()
    again = gate_baseline(suite, sha, [gate], notes.append)(gate)
    assert again is not None and again.failing_tests == {BROKEN, DESELECTABLE}
    assert any("is of another cache version (1, not 2); computing it again" in n for n in notes)
    assert git(suite, "status", "--porcelain") == "" and temp_left(tmp_path) == []


@pytest.mark.parametrize(
    ("command", "pytest_like"),
    [
        ("pytest -q", True),
        ("python -m pytest tests", True),
        (".venv/bin/pytest", True),
        ("uv run pytest tests | tee out.txt", True),
        ("cd sub && py.test", True),
        ("pytest-3 -q", True),
        (["/usr/bin/python3", "-m", "pytest", "-q"], True),
        (["bash", "-c", "pytest -x"], True),
        ("make test", False),
        ("ruff check .", False),
        ("python tests/test_pytest_things.py", False),
        ("tox -c pytest.ini", False),
        ("pip install pytest-cov", False),
        (["bash", "-c", "exit 1"], False),
    ],
)
def test_which_commands_look_like_pytest(command: str | list[str], pytest_like: bool) -> None:
    assert looks_like_pytest(command) is pytest_like
