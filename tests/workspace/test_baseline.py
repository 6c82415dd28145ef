"""The gate baseline (tf_fsm.workspace.baseline) with real git repositories and real gate
commands: computed once per commit and cached, recomputed when the gate changes or the cache
is corrupt, once for concurrent callers, recovered after a killed computation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, tk_ticket
from tests.gitrepo import commit_all, git, init_repo, isolate
from tf_fsm.core.reports import render_post_fix_verification
from tf_fsm.engine.gates import (
    GateOutcome,
    GateResult,
    gate_baseline,
    gate_rows,
    run_gate,
    run_gates,
)
from tf_fsm.settings.load import QualityGate
from tf_fsm.storage.redact import Redactor
from tf_fsm.workspace.baseline import base_of, baseline, baseline_dir, lookup
from tf_fsm.workspace.judgement import BaseResult, Judged, judge, names_of

#: a gate: each failing test named in failing.txt fails; with --junit it writes report.xml
#: (an always-passing test `suite::ok` too); each run appends its cwd to the counter file;
#: --sleep S waits; --hold F waits while the file F exists
GATE_PY = """\
import os, sys, time
from pathlib import Path
args = sys.argv[1:]
Path(args[0]).open("a").write(os.getcwd() + "\\n")
if "--sleep" in args:
    time.sleep(float(args[args.index("--sleep") + 1]))
if "--hold" in args:
    hold = Path(args[args.index("--hold") + 1])
    for _ in range(600):
        if not hold.exists():
            break
        time.sleep(0.05)
failing = Path("failing.txt").read_text().split()
if "--junit" in args:
    cases = ['<testcase classname="suite" name="ok"/>'] + [
        f'<testcase classname="suite" name="{n}"><failure/></testcase>' for n in failing
    ]
    suite = "<testsuites><testsuite>" + "".join(cases) + "</testsuite></testsuites>"
    Path("report.xml").write_text(suite)
sys.exit(1 if failing else 0)
"""


@pytest.fixture
def repo(project: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch)
    return init_repo(project, {"gate.py": GATE_PY, "failing.txt": "", "sub/failing.txt": ""})


def gate(
    counter: Path, *extra: str, junit: bool = False, name: str = "tests", **keys: object
) -> QualityGate:
    argv = [sys.executable, str(Path("..") / "gate.py") if keys.get("cwd") else "gate.py"]
    argv += [str(counter), *(("--junit",) if junit else ()), *extra]
    return QualityGate(name=name, command=argv, junitXml="report.xml" if junit else None, **keys)


def runs(counter: Path) -> list[str]:
    return counter.read_text().splitlines() if counter.exists() else []


def worktrees(root: Path) -> list[str]:
    listing = git(root, "worktree", "list", "--porcelain").splitlines()
    return [ln for ln in listing if ln.startswith("worktree ")]


def test_computed_once_per_commit_then_read_from_the_cache(repo: Path, tmp_path: Path) -> None:
    (repo / "failing.txt").write_text("t1\n")
    sha = commit_all(repo, "t1 breaks")
    (repo / "failing.txt").write_text("t2\n")  # not committed: the baseline is the commit
    counter, notes = tmp_path / "runs", []
    g = gate(counter, junit=True)
    first = baseline(repo, sha, [g], run_gate, notes.append)
    assert first == {
        "tests": BaseResult("tests", False, 1, frozenset({"suite::t1"}), "exit code 1", sha)
    }
    assert runs(counter) == [str(baseline_dir(repo) / sha)]  # in the commit's own worktree
    assert any("running tests on the base commit" in n for n in notes)
    assert baseline(repo, sha, [g], run_gate, notes.append) == first
    assert baseline(repo, sha[:10], [g], run_gate, notes.append) == first  # abbreviated
    assert len(runs(counter)) == 1
    cached = json.loads((baseline_dir(repo) / f"{sha}.json").read_text())
    assert cached["sha"] == sha and cached["gates"]["tests"]["failingTests"] == ["suite::t1"]
    assert not (baseline_dir(repo) / sha).exists()  # the worktree is removed
    assert len(worktrees(repo)) == 1 and git(repo, "status", "--porcelain") == "M failing.txt"


def test_gates_computed_one_at_a_time_are_all_kept(repo: Path, tmp_path: Path) -> None:
    sha, counter = git(repo, "rev-parse", "HEAD"), tmp_path / "runs"
    gates = [gate(counter, name="lint"), gate(counter, name="tests")]
    of = lookup(repo, sha, gates, run_gate, print)
    assert [of(g).passed for g in gates] == [True, True]  # type: ignore[union-attr]
    assert len(runs(counter)) == 2
    found = baseline(repo, sha, gates, run_gate, print)
    assert sorted(found) == ["lint", "tests"] and len(runs(counter)) == 2


def test_optional_gates_are_not_run(repo: Path, tmp_path: Path) -> None:
    optional = gate(tmp_path / "runs", required=False)
    assert baseline(repo, git(repo, "rev-parse", "HEAD"), [optional], run_gate, print) == {}
    assert runs(tmp_path / "runs") == []


@pytest.mark.parametrize(
    "changed",
    [
        {"extra": ("--sleep", "0")},  # the command
        {"junit": True},  # the report (and the command)
        {"cwd": "sub"},
        {"timeoutSeconds": 99.0},
    ],
)
def test_a_changed_gate_runs_again(repo: Path, tmp_path: Path, changed: dict[str, object]) -> None:
    sha, counter = git(repo, "rev-parse", "HEAD"), tmp_path / "runs"
    baseline(repo, sha, [gate(counter)], run_gate, print)
    extra = changed.pop("extra", ())
    other = gate(counter, *extra, **changed)  # type: ignore[arg-type]
    assert baseline(repo, sha, [other], run_gate, print)["tests"].passed
    baseline(repo, sha, [other], run_gate, print)
    assert len(runs(counter)) == 2


def test_a_corrupt_cache_is_computed_again_with_a_note(repo: Path, tmp_path: Path) -> None:
    sha, counter, notes = git(repo, "rev-parse", "HEAD"), tmp_path / "runs", []
    baseline(repo, sha, [gate(counter)], run_gate, notes.append)
    cache = baseline_dir(repo) / f"{sha}.json"
    for garbage in ("{not json", '{"version": 1, "sha": "x", "gates": {}}', "[" * 5000):
        cache.write_text(garbage)
        notes.clear()
        assert baseline(repo, sha, [gate(counter)], run_gate, notes.append)["tests"].passed
        assert any(str(cache) in n and "computing it again" in n for n in notes), notes
        assert json.loads(cache.read_text())["sha"] == sha
    assert len(runs(counter)) == 4


def test_a_gate_that_cannot_start_on_the_base_is_not_cached(repo: Path, tmp_path: Path) -> None:
    sha, counter = git(repo, "rev-parse", "HEAD"), tmp_path / "runs"
    missing = QualityGate(name="tests", command=["true"], cwd="added-by-the-ticket")
    result = baseline(repo, sha, [missing], run_gate, print)["tests"]
    assert not result.started and "does not exist" in result.summary
    assert json.loads((baseline_dir(repo) / f"{sha}.json").read_text())["gates"] == {}
    assert runs(counter) == []


COMPUTE = """\
import json, sys
from pathlib import Path
from tf_fsm.engine.gates import run_gate
from tf_fsm.settings.load import QualityGate
from tf_fsm.workspace.baseline import baseline
gate = QualityGate.model_validate(json.loads(sys.argv[3]))
def note(text):
    print(text, file=sys.stderr)
found = baseline(Path(sys.argv[1]), sys.argv[2], [gate], run_gate, note)
print(json.dumps({k: [v.passed, v.exit_code] for k, v in found.items()}))
"""


def compute(repo: Path, sha: str, g: QualityGate) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", COMPUTE, str(repo), sha, g.model_dump_json()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def test_concurrent_callers_compute_a_commit_once(repo: Path, tmp_path: Path) -> None:
    (repo / "failing.txt").write_text("t1\n")
    sha, counter = commit_all(repo, "t1 breaks"), tmp_path / "runs"
    g = gate(counter, "--sleep", "1")
    procs = [compute(repo, sha, g) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert [json.loads(out) for out, _ in outs] == [{"tests": [False, 1]}] * 2
    assert len(runs(counter)) == 1
    assert sum("running tests" in err for _, err in outs) == 1


def test_a_killed_computation_is_cleaned_up_and_computed_again(repo: Path, tmp_path: Path) -> None:
    sha, counter, hold = git(repo, "rev-parse", "HEAD"), tmp_path / "runs", tmp_path / "hold"
    hold.touch()
    g = gate(counter, "--hold", str(hold))
    proc = compute(repo, sha, g)
    deadline = time.monotonic() + 30
    while not runs(counter) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert runs(counter), proc.stderr.read() if proc.stderr else ""
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    tree = baseline_dir(repo) / sha
    assert tree.is_dir() and not (baseline_dir(repo) / f"{sha}.json").exists()
    hold.unlink()
    notes: list[str] = []
    assert baseline(repo, sha, [g], run_gate, notes.append)["tests"].passed
    assert any("left by a baseline computation that was stopped" in n for n in notes)
    assert len(runs(counter)) == 2 and not tree.exists() and len(worktrees(repo)) == 1


@pytest.mark.parametrize("directory", ["kept", "gone"])
def test_a_worktree_left_locked_by_a_killed_git_is_recovered(
    repo: Path, tmp_path: Path, directory: str
) -> None:
    """git keeps the entry of a `worktree add` it did not finish locked ("initializing")."""
    sha, tree = git(repo, "rev-parse", "HEAD"), baseline_dir(repo) / git(repo, "rev-parse", "HEAD")
    git(repo, "worktree", "add", "--detach", str(tree), sha)
    git(repo, "worktree", "lock", "--reason", "initializing", str(tree))
    if directory == "gone":
        subprocess.run(["rm", "-rf", str(tree)], check=True)
    assert baseline(repo, sha, [gate(tmp_path / "runs")], run_gate, print)["tests"].passed
    assert not tree.exists() and len(worktrees(repo)) == 1


def test_base_of_the_root_and_of_a_ticket_worktree(repo: Path, tmp_path: Path) -> None:
    start = git(repo, "rev-parse", "HEAD")
    assert base_of(repo) == (repo, start)
    ticket = repo / ".tf" / "ralph" / "worktrees" / "pt-1"
    git(repo, "worktree", "add", "-q", "-b", "tf/pt-1", str(ticket))
    (ticket / "new.txt").write_text("x")
    commit_all(ticket, "the ticket's work")
    (repo / "other.txt").write_text("y")
    commit_all(repo, "the base moves on")
    assert base_of(ticket) == (repo, start)  # where the ticket started, not the base's tip
    assert base_of(repo / "sub") is None  # not the top of a worktree
    outside = tmp_path / "plain"
    outside.mkdir()
    assert base_of(outside) is None


def test_lookup_computes_on_first_ask_and_notes_a_base_it_cannot_make(
    repo: Path, tmp_path: Path
) -> None:
    sha, counter, notes = git(repo, "rev-parse", "HEAD"), tmp_path / "runs", []
    g = gate(counter)
    of = lookup(repo, sha, [g], run_gate, notes.append)
    assert runs(counter) == []  # nothing until asked
    assert of(g) == of(g) and of(g) is not None and len(runs(counter)) == 1
    missing = lookup(repo, "0" * 40, [g], run_gate, notes.append)
    assert missing(g) is None
    assert any("no base result for tests" in n for n in notes), notes


# --- the judgement ---------------------------------------------------------------------------

SHA = "abcdef0123456789" * 2 + "abcdef01"


def base(passed: bool, failing: set[str] | None, started: bool = True) -> BaseResult:
    summary = "passed" if passed else "exit code 1"
    tests = None if failing is None else frozenset(failing)
    return BaseResult("tests", passed, 0 if passed else 1, tests, summary, SHA, started)


def test_judge_a_passing_gate_never_blocks() -> None:
    assert judge((True, None), base(False, {"a"})) == Judged(False)
    assert judge((True, frozenset()), None) == Judged(False)


def test_judge_without_a_base_result_blocks_as_today() -> None:
    assert judge((False, frozenset({"a"})), None) == Judged(True)
    unstarted = judge((False, None), base(False, None, started=False))
    assert unstarted.blocks and "could not start on the base commit abcdef012345" in unstarted.note


def test_judge_with_reports_blocks_only_for_tests_that_did_not_fail_on_the_base() -> None:
    same = judge((False, frozenset({"a", "b"})), base(False, {"a", "b", "c"}))
    assert (same.blocks, same.preexisting, same.new_failures) == (False, True, frozenset())
    assert same.note == "all 2 tests failed on the base commit abcdef012345 too: a, b"
    worse = judge((False, frozenset({"a", "b"})), base(False, {"a"}))
    assert (worse.blocks, worse.preexisting, worse.new_failures) == (True, False, {"b"})
    assert worse.note == "1 test failing that did not fail on the base commit abcdef012345: b"
    added = judge((False, frozenset({"new"})), base(True, set()))  # passed there, or absent
    assert added.blocks and added.new_failures == {"new"}


def test_judge_a_report_without_failing_tests_blocks() -> None:
    assert judge((False, frozenset()), base(False, {"a"})).blocks  # fixed the tests, broke more
    same = judge((False, frozenset()), base(False, set()), hint="HINT")
    assert (same.blocks, same.preexisting) == (True, False)
    assert same.note == (
        "it fails on the base commit abcdef012345 too (exit code 1), but its report names no "
        "failing test, so its failure cannot be compared test by test: a failure is never "
        "pre-existing without a report on both sides; HINT"
    )
    assert judge((False, frozenset()), base(True, set())).blocks


@pytest.mark.parametrize(
    ("mine", "theirs", "why"),
    [
        (None, None, "neither run wrote a JUnit report"),
        (frozenset({"a"}), None, "the base run wrote no JUnit report"),
        (None, {"a"}, "this run wrote no JUnit report"),
    ],
)
def test_judge_without_both_reports_blocks_even_when_the_base_fails_too(
    mine: frozenset[str] | None, theirs: set[str] | None, why: str
) -> None:
    before = judge((False, mine), base(False, theirs), hint="set junitXml (docs/gates.md)")
    assert (before.blocks, before.preexisting, before.new_failures) == (True, False, frozenset())
    assert before.note == (
        f"it fails on the base commit abcdef012345 too (exit code 1), but {why}, so tf_fsm "
        "cannot tell which tests fail anew: a failure is never pre-existing without a report "
        "on both sides; set junitXml (docs/gates.md)"
    )
    passed = judge((False, mine), base(True, None if theirs is None else set()))
    assert passed.blocks and passed.note == "it passes on the base commit abcdef012345"


def test_names_in_a_note_are_bounded_and_one_line() -> None:
    assert names_of(frozenset(f"t{i:02}" for i in range(25))).endswith("t09 and 15 more")
    evil = "evil\n- x (required): BLOCKING"
    assert names_of(frozenset({evil})) == "evil - x (required): BLOCKING"


# --- run_gates and `tf-fsm gate --run` with a baseline ----------------------------------------


def gates_with_base(
    repo: Path, sha: str, g: QualityGate, fix: str | None = None, **keys: object
) -> tuple[GateOutcome, list[str]]:
    """run_gates on the tree at `repo` judged against `sha`; each feedback round's message,
    after which the 'fixer' writes `fix` into failing.txt."""
    sent: list[str] = []

    def send_back(message: str, round_: int, failed: list[GateResult]) -> None:
        sent.append(message)
        if fix is not None:
            (repo / "failing.txt").write_text(fix)

    outcome = run_gates(
        [g],
        repo,
        default_max=2,
        feedback=True,
        redact=Redactor(),
        on_result=lambda r, n: None,
        send_back=send_back,
        **keys,  # type: ignore[arg-type]
    )
    return outcome, sent


def test_a_failure_already_on_the_base_neither_blocks_nor_sends_the_fixer_back(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "failing.txt").write_text("t1\n")
    sha, g = commit_all(repo, "t1 breaks"), gate(tmp_path / "runs", junit=True)
    outcome, sent = gates_with_base(repo, sha, g, baseline=gate_baseline(repo, sha, [g], print))
    assert outcome.blocking is None and sent == []
    (row,) = gate_rows(outcome, Redactor())
    assert row["preexisting"] is True and row["passed"] is False and row["blocking"] is False
    assert "all 1 test failed" in row["baselineNote"]
    md, _ = render_post_fix_verification(
        "pt-1",
        mode="rereview",
        pre={},
        post={},
        fail_on=["Major"],
        passed=True,
        reason="ok",
        gates=[row],
    )
    assert "- tests (required): pre-existing on the base, not blocking, exit code 1" in md
    assert f"  - base: {row['baselineNote']}" in md
    unjudged, sent = gates_with_base(repo, sha, g)  # no baseline: today's behaviour
    assert unjudged.blocking is not None and len(sent) == 2


def test_without_a_report_a_failure_on_the_base_too_blocks_and_says_how_to_add_one(
    repo: Path, tmp_path: Path
) -> None:
    """Not pytest, no junitXml: the same failure on the base may hide a new one."""
    (repo / "failing.txt").write_text("t1\n")
    sha, g = commit_all(repo, "t1 breaks"), gate(tmp_path / "runs")
    (repo / "failing.txt").write_text("t1\nt2\n")  # worse, but the exit status is the same
    of = gate_baseline(repo, sha, [g], print)
    outcome, sent = gates_with_base(repo, sha, g, baseline=of)
    assert outcome.blocking is not None and len(sent) == 2
    (row,) = gate_rows(outcome, Redactor())
    assert row["blocking"] and not row["preexisting"] and row["newFailures"] == []
    note = row["baselineNote"]
    assert note.startswith(f"it fails on the base commit {sha[:12]} too (exit code 1), but ")
    assert "neither run wrote a JUnit report" in note
    assert "a failure is never pre-existing without a report on both sides" in note
    assert note.endswith(
        "set the gate's junitXml to the JUnit XML report its command writes "
        "(docs/gates.md#the-baseline-what-a-ticket-makes-worse)"
    )
    assert f"Compared with the base commit: {note}" in sent[0]
    assert len(runs(tmp_path / "runs")) == 1 + 3  # the base once, the tree on each round


def test_a_new_failing_test_blocks_with_feedback_naming_only_it(repo: Path, tmp_path: Path) -> None:
    (repo / "failing.txt").write_text("t1\n")
    sha, g = commit_all(repo, "t1 breaks"), gate(tmp_path / "runs", junit=True)
    (repo / "failing.txt").write_text("t1\nt2\n")
    of = gate_baseline(repo, sha, [g], print)
    outcome, sent = gates_with_base(repo, sha, g, fix="t1\n", baseline=of)
    assert outcome.blocking is None and len(sent) == 1  # fixed t2; t1 is the base's
    (compared,) = [ln for ln in sent[0].splitlines() if ln.startswith("Compared with the base")]
    assert "suite::t2" in compared and "suite::t1" not in compared
    assert gate_rows(outcome, Redactor())[0]["preexisting"] is True
    (repo / "failing.txt").write_text("t1\nt2\n")
    outcome, sent = gates_with_base(repo, sha, g, baseline=of)  # never fixed: out of retries
    assert outcome.blocking is not None and len(sent) == 2
    (row,) = gate_rows(outcome, Redactor())
    assert row["blocking"] and not row["preexisting"] and row["newFailures"] == ["suite::t2"]
    assert len(runs(tmp_path / "runs")) == 1 + 2 + 3  # the base ran once


def test_a_gate_that_passes_on_the_base_blocks(repo: Path, tmp_path: Path) -> None:
    sha, g = git(repo, "rev-parse", "HEAD"), gate(tmp_path / "runs")
    (repo / "failing.txt").write_text("t1\n")
    outcome, sent = gates_with_base(repo, sha, g, baseline=gate_baseline(repo, sha, [g], print))
    assert outcome.blocking is not None and len(sent) == 2
    assert "it passes on the base commit" in sent[0]


def test_no_base_is_run_when_gates_cannot_block(repo: Path, tmp_path: Path) -> None:
    sha, g = git(repo, "rev-parse", "HEAD"), gate(tmp_path / "runs")
    (repo / "failing.txt").write_text("t1\n")
    of = gate_baseline(repo, sha, [g], print)
    outcome, _ = gates_with_base(repo, sha, g, baseline=of, can_block=False)
    assert outcome.blocking is None and not outcome.results[0].preexisting
    assert runs(tmp_path / "runs") == [str(repo)]  # the ticket's run only


def test_gate_run_judges_against_the_base_commit(
    repo: Path, tmp_path: Path, write_settings: Callable[[dict[str, Any]], Path]
) -> None:
    g = gate(tmp_path / "runs", junit=True)
    write_settings({"workflow": {"qualityGates": [g.model_dump(exclude_none=True)]}})
    (repo / ".tickets").mkdir()
    (repo / ".tickets" / "pt-1.md").write_text(tk_ticket("pt-1"))
    (repo / "failing.txt").write_text("t1\n")
    commit_all(repo, "t1 breaks")
    result = run_cli("gate", "pt-1", "--run", cwd=repo)
    assert result.returncode == 0, result.stderr
    assert "pre-existing on the base, not blocking" in result.stdout
    assert "running tests on the base commit" in result.stderr
    assert run_cli("gate", "pt-1", "--run", "--no-baseline", cwd=repo).returncode == 3
    (repo / "failing.txt").write_text("t1\nt2\n")
    result = run_cli("gate", "pt-1", "--run", "--json", cwd=repo)
    assert result.returncode == 3, result.stderr
    row = json.loads(result.stdout)
    assert (row["preexisting"], row["newFailures"]) == (False, ["suite::t2"])
    assert len(runs(tmp_path / "runs")) == 1 + 1 + 1 + 1  # the base once, cached
