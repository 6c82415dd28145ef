"""`tf-fsm run --phases N` and `--hold-merge` end to end (docs/lifecycle.md, "Step by step"):
a ticket run one phase per process ends as one plain run leaves it, in the project's tree and
in a git worktree, and a held merge waits for `tf-fsm merge`. Real `tf-fsm` processes, the
fake agent (tests/fake_agent.py) and, for worktrees, real git repositories.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.e2e.conftest import BASE_FIXER, STRONG, TICKET_ID, Harness, finding
from tests.e2e.workspace_project import Project
from tests.gitrepo import git, isolate

#: the events each run that resumes an attempt journals at its start (the worktree opened
#: again, the attempt resumed): what one run per phase adds to one plain run's journal
RESUME_EVENTS = ("AttemptResumed", "WorkspaceReady")
#: the store's own events: each retry-state.json and chain-context.json written (ViewSaved),
#: each run's end (ViewsSynced); a run per phase writes them once per run
STORE_EVENTS = ("ViewSaved", "ViewsSynced")
#: a quality gate verify runs: the close summary reports it, also after a resume at close
QUIET_GATE = {"name": "tests", "command": "true"}
#: the ticket's files that hold the run's times (compared without them)
TIMED = ("events.jsonl", "retry-state.json")
STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")
SECONDS = re.compile(r"\b\d+\.\d+s\b")  # an invocation's duration in its log


def harness(tmp_path: Path, name: str) -> Harness:
    """A project of its own under `tmp_path` with the e2e harness (tests/e2e/conftest.py)."""
    root = tmp_path / name / "project"
    (root / ".tf" / "config").mkdir(parents=True)

    def write(data: dict[str, Any]) -> Path:
        path = root / ".tf" / "config" / "settings.json"
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")
        return path

    return Harness(root, tmp_path / name, write)


def step_by_step(run: Any, *args: str, once: bool = True) -> list[dict[str, Any]]:
    """`run --once --phases 1 --json` (with `args`; without `--once` unless `once`) until it
    is not paused: each report."""
    reports: list[dict[str, Any]] = []
    for _ in range(30):
        done = run(*(["--once"] if once else []), "--phases", "1", "--json", *args)
        report = json.loads(done.stdout.splitlines()[-1])
        assert done.returncode == (3 if report["status"] == "blocked" else 0), done
        reports.append(report)
        if report["status"] != "paused":
            return reports
    raise AssertionError(f"still paused after 30 runs: {reports[-1]}")


def journal(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def domain(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ticket's own events (the store's left out), less what each resuming run adds
    (RESUME_EVENTS after the first run's end, its ViewsSynced)."""
    names = [e["event"] for e in events]
    first_end = names.index("ViewsSynced") if "ViewsSynced" in names else len(events)
    return [
        e
        for i, e in enumerate(events)
        if e["event"] not in STORE_EVENTS and (i < first_end or e["event"] not in RESUME_EVENTS)
    ]


def phase_trace(events: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """Each event's name and phase, in order (timestamps aside)."""
    return [(e["event"], e.get("phase")) for e in events]


def timeless(text: str, *roots: Path) -> str:
    for root in roots:
        text = text.replace(str(root), "<root>")
    return SECONDS.sub("<s>", STAMP.sub("<ts>", text))


def ticket_files(directory: Path, root: Path) -> dict[str, str]:
    """The ticket's files, times and the project's path taken out."""
    return {
        str(p.relative_to(directory)): timeless(p.read_text(encoding="utf-8"), root)
        for p in sorted(directory.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def check_paused_reports(reports: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    """Every run but the last paused, naming the phase that runs next, which is where the
    next run resumed (its AttemptResumed), each resume once."""
    *paused, last = reports
    assert last["status"] != "paused" and all(r["status"] == "paused" for r in paused)
    resumed = [e["phase"] for e in events if e["event"] == "AttemptResumed"]
    nexts = [re.search(r"; (\w+) of attempt \d+ runs next", r["reason"]) for r in paused]
    assert [m.group(1) for m in nexts if m] == resumed, (paused, resumed)
    for report in paused:
        assert report["reason"].startswith("paused after 1 phase(s) (--phases): "), report
        assert report["ticket"] == TICKET_ID, report


# -- in the project's tree ------------------------------------------------------------------


def test_one_phase_per_run_ends_as_one_plain_run(tmp_path: Path) -> None:
    """Every phase runs (research, implement, review, fix, the re-reviews of verify, close):
    run one per process, the journal, the ticket's files, the retry state and the agent's
    invocations are those of one plain `run --once`, each invocation made once."""
    plain, stepped = harness(tmp_path, "plain"), harness(tmp_path, "stepped")
    for e2e in (plain, stepped):
        e2e.settings(postFixVerification="rereview", qualityGates=[QUIET_GATE])
        e2e.plan(findings=[finding("f1", [BASE_FIXER])])
    whole = plain.run("--once", "--json")
    assert whole.returncode == 0, whole.stderr
    assert json.loads(whole.stdout)["status"] == "closed"

    reports = step_by_step(stepped.run)
    assert reports[-1]["status"] == "closed"
    # research, implement, review, fix, verify, close: a pause before each but the first
    assert len(reports) == 6, reports
    events = stepped.events()
    check_paused_reports(reports, events)

    assert phase_trace(domain(events)) == phase_trace(domain(plain.events()))
    assert [e["event"] for e in events].count("ViewsSynced") == len(reports)
    calls = Counter((c["attempt"], c["phase"], c["role"]) for c in stepped.agent_calls())
    assert calls == Counter((c["attempt"], c["phase"], c["role"]) for c in plain.agent_calls())
    assert set(calls.values()) == {1}
    assert {phase for _, phase, _ in calls} == {
        "research", "implement", "review", "fix", "verify", "close"
    }  # fmt: skip

    files = ticket_files(stepped.dir, stepped.project)
    expected = ticket_files(plain.dir, plain.project)
    assert sorted(files) == sorted(expected)
    for name in expected:
        if name not in TIMED:
            assert files[name] == expected[name], name
    assert "tests" in files["close-summary.md"] and "gates" in files["post-fix-verification.json"]
    state, plain_state = stepped.read_state(), plain.read_state()
    assert timeless(json.dumps(state)) == timeless(json.dumps(plain_state))
    assert stepped.ticket_file.read_text().count("status: closed") == 1


def test_one_phase_per_run_across_a_blocked_attempt_ends_as_one_plain_run(
    tmp_path: Path,
) -> None:
    """Without --once: attempt 1 blocks (only the escalated fixer clears the finding) and the
    run that completed its close goes straight on to attempt 2, pausing before its first
    phase. Run one phase per process, the ticket ends as one plain `run` leaves it."""
    plain, stepped = harness(tmp_path, "plain"), harness(tmp_path, "stepped")
    for e2e in (plain, stepped):
        e2e.plan(findings=[finding("f1", [STRONG])])
    whole = plain.run("--json")
    assert whole.returncode == 0, whole.stderr

    reports = step_by_step(stepped.run, once=False)
    assert reports[-1]["status"] == "closed"
    events = stepped.events()
    check_paused_reports(reports, events)
    crossing = next(r for r in reports if "close of attempt 1 completed" in r["reason"])
    assert "; review of attempt 2 runs next" in crossing["reason"], crossing
    assert (crossing["attempt"], crossing["attemptsRun"]) == (2, 2), crossing
    assert phase_trace(domain(events)) == phase_trace(domain(plain.events()))
    started = [e["trigger"] for e in events if e["event"] == "AttemptStarted"]
    assert started == ["initial", "quality_gate"]
    calls = Counter((c["attempt"], c["phase"], c["role"]) for c in stepped.agent_calls())
    assert calls == Counter((c["attempt"], c["phase"], c["role"]) for c in plain.agent_calls())
    assert set(calls.values()) == {1}
    assert timeless(json.dumps(stepped.read_state())) == timeless(json.dumps(plain.read_state()))


def test_a_paused_attempt_stays_in_progress_and_a_plain_run_finishes_it(tmp_path: Path) -> None:
    """After `--phases 2` the attempt is in progress at the next phase, as a Ctrl-C there
    leaves it: status says it resumes there, and a run without the flag runs the rest."""
    e2e = harness(tmp_path, "one")
    paused = e2e.run("--phases", "2")
    assert paused.returncode == 0, paused.stderr
    assert re.search(
        r"pt-1: PAUSED \(resumable: run it again for the next phase\) after attempt 1 .*"
        r"implement completed; review of attempt 1 runs next",
        paused.stdout,
    ), paused.stdout
    state = e2e.read_state()
    assert (state["status"], state["attempts"][-1]["status"]) == ("active", "in_progress")
    assert state["attempts"][-1]["phase"] == "review"
    assert [c["phase"] for c in e2e.agent_calls()] == ["research", "implement"]
    root = {"TF_FSM_ROOT": str(e2e.project)}
    shown = run_cli("status", TICKET_ID, "--json", cwd=e2e.project, env=root)
    assert shown.returncode == 0, shown.stderr
    status = json.loads(shown.stdout)
    assert status["next"].startswith("resume attempt 1 at review"), status

    rest = e2e.run()
    assert rest.returncode == 0, rest.stderr
    assert e2e.read_state()["status"] == "closed"
    assert [e["phase"] for e in e2e.events() if e["event"] == "AttemptResumed"] == ["review"]
    assert Counter(c["phase"] for c in e2e.agent_calls())["implement"] == 1


# -- in a git worktree ------------------------------------------------------------------------

WORKTREE = {"workspace": {"mode": "worktree"}}
NO_AUTO_MERGE = {**WORKTREE, "ralph": {"parallelAutoMerge": False}}
EDITS = [
    {"phase": "implement", "file": "{ticket}.txt", "text": "implemented"},
    {"phase": "fix", "file": "{ticket}.txt", "text": "fixed"},
]


def git_project(tmp_path: Path, name: str, settings: dict[str, Any]) -> Project:
    root = tmp_path / name / "project"
    root.mkdir(parents=True)
    proj = Project(root, tmp_path / name)
    proj.create([TICKET_ID], settings)
    proj.plan(edits=EDITS, findings=[finding("f1", [BASE_FIXER])])
    return proj


def store_dir(proj: Project) -> Path:
    return proj.root / ".tf" / "knowledge" / "tickets" / TICKET_ID


def checkpoints(proj: Project, ref: str) -> list[tuple[str, str]]:
    """(subject, Tf-Phase) of each commit on `ref`, oldest first."""
    return [(c["subject"], c["phase"]) for c in reversed(proj.log_of("--topo-order", ref))]


@pytest.fixture
def git_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The git environment of the workspace tests (author, no global config); each project
    here is found from its own directory, not the test's."""
    isolate(monkeypatch)
    monkeypatch.delenv("TF_FSM_ROOT")


@pytest.mark.usefixtures("git_env")
def test_one_phase_per_run_in_a_worktree_ends_as_one_plain_run(tmp_path: Path) -> None:
    plain = git_project(tmp_path, "plain", WORKTREE)
    stepped = git_project(tmp_path, "stepped", WORKTREE)
    whole = plain.cli("run", TICKET_ID, "--once")
    assert whole.returncode == 0, whole.stderr

    reports = step_by_step(lambda *a: stepped.cli("run", TICKET_ID, *a))
    assert reports[-1]["status"] == "closed"
    events = stepped.events(TICKET_ID)
    check_paused_reports(reports, events)
    assert phase_trace(domain(events)) == phase_trace(domain(plain.events(TICKET_ID)))
    assert [e["event"] for e in events].count("WorkspaceReady") == len(reports)
    assert "WorkSetAside" not in [e["event"] for e in events]  # nothing was cut short

    # the same checkpoints, phase by phase, merged the same way
    assert checkpoints(stepped, "main") == checkpoints(plain, "main")
    assert checkpoints(stepped, "main") == [
        ("initial", ""),
        ("tf-fsm: pt-1 attempt 1 implement", "implement"),
        ("tf-fsm: pt-1 attempt 1 fix", "fix"),
        ("Merge pt-1: Ticket pt-1", ""),
    ]
    assert stepped.show("main:pt-1.txt") == plain.show("main:pt-1.txt")
    files = ticket_files(store_dir(stepped), stepped.root)
    expected = ticket_files(store_dir(plain), plain.root)
    assert sorted(files) == sorted(expected)
    assert {n: t for n, t in files.items() if n not in TIMED} == {
        n: t for n, t in expected.items() if n not in TIMED
    }
    calls = Counter((c["attempt"], c["phase"], c["role"]) for c in stepped.calls())
    assert calls == Counter((c["attempt"], c["phase"], c["role"]) for c in plain.calls())
    assert set(calls.values()) == {1}
    stepped.assert_nothing_left()


@pytest.mark.usefixtures("git_env")
def test_hold_merge_stops_a_passed_ticket_as_the_setting_does_and_merge_merges_it(
    tmp_path: Path,
) -> None:
    """`run --once --phases 1 --hold-merge`, run by run (a worker's phase step), ends
    awaiting_merge as a plain run with ralph.parallelAutoMerge false does; `tf-fsm merge`
    then merges and closes it."""
    setting = git_project(tmp_path, "setting", NO_AUTO_MERGE)
    held = git_project(tmp_path, "held", WORKTREE)
    reference = setting.cli("run", TICKET_ID, "--once", "--json")
    assert reference.returncode == 0, reference.stderr
    assert json.loads(reference.stdout)["status"] == "awaiting_merge"

    reports = step_by_step(lambda *a: held.cli("run", TICKET_ID, *a), "--hold-merge")
    last = reports[-1]
    assert last["status"] == "awaiting_merge", last
    assert last["reason"] == (
        "passed, waiting for `tf-fsm merge pt-1` (--hold-merge): not closed in tk until it is "
        "merged"
    )
    events = held.events(TICKET_ID)
    assert phase_trace(domain(events)) == phase_trace(domain(setting.events(TICKET_ID)))
    assert [e["event"] for e in events if e["event"].startswith("Merge")] == ["MergeHeld"]
    state = json.loads((store_dir(held) / "retry-state.json").read_text(encoding="utf-8"))
    reference_state = json.loads((store_dir(setting) / "retry-state.json").read_text("utf-8"))
    assert timeless(json.dumps(state)) == timeless(json.dumps(reference_state))
    assert state["attempts"][-1]["status"] == "in_progress"
    initial = git(held.root, "rev-parse", "main")
    assert checkpoints(held, "main") == [("initial", "")]
    assert held.tk_status(TICKET_ID) == "in_progress"

    # held again: a run with the flag does nothing more; the merge is a step of its own
    again = held.cli("run", TICKET_ID, "--once", "--phases", "1", "--hold-merge", "--json")
    assert again.returncode == 0 and json.loads(again.stdout)["status"] == "awaiting_merge"
    calls = len(held.calls())
    merged = held.cli("merge", TICKET_ID, "--json")
    assert merged.returncode == 0, merged.stderr
    assert json.loads(merged.stdout)["status"] == "closed"
    assert len(held.calls()) == calls
    assert git(held.root, "rev-parse", "main^1") == initial
    assert held.show("main:pt-1.txt") == "implemented\nfixed\n"
    assert held.tk_status(TICKET_ID, "main") == "closed" == held.tk_status(TICKET_ID)
    merges = [e["event"] for e in held.events(TICKET_ID) if e["event"].startswith("Merge")]
    assert merges == ["MergeHeld", "MergeStarted", "MergeCompleted"]
    held.assert_nothing_left()


@pytest.mark.usefixtures("git_env")
def test_a_merge_held_by_the_flag_is_merged_by_a_plain_run_with_auto_merge_on(
    tmp_path: Path,
) -> None:
    """The flag holds the merge for the run that passes it: status then says the merge is
    left, and a run without the flag (ralph.parallelAutoMerge on) merges it, no agent run."""
    proj = git_project(tmp_path, "auto", WORKTREE)
    held = proj.cli("run", TICKET_ID, "--hold-merge", "--json")
    assert held.returncode == 0, held.stderr
    assert json.loads(held.stdout)["status"] == "awaiting_merge"
    assert "passed; not merged (--hold-merge)" in held.stderr, held.stderr
    row = proj.status_json()[TICKET_ID]
    assert row["state"] == "awaiting_merge" and row["next"].startswith("resume attempt 1 at merge")
    calls = len(proj.calls())
    merged = proj.cli("run", TICKET_ID, "--json")
    assert merged.returncode == 0, merged.stderr
    assert json.loads(merged.stdout)["status"] == "closed"
    assert len(proj.calls()) == calls
    assert proj.show("main:pt-1.txt") == "implemented\nfixed\n"
    proj.assert_nothing_left()


# -- bad combinations -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("--phases", "0"), "argument --phases: 0: the run completes at least 1 phase"),
        (("--phases", "-2"), "argument --phases: -2: the run completes at least 1 phase"),
        (("--phases", "two"), "argument --phases: 'two' is not a whole number"),
        (("--phases", "1", "--plan"), "--phases with --plan: the plan runs nothing"),
        (("--hold-merge", "--no-worktree"), "--hold-merge with --no-worktree: in the project's"),
    ],
)
def test_bad_combinations_exit_2_and_run_nothing(
    e2e: Harness, args: tuple[str, ...], says: str
) -> None:
    done = e2e.run(*args)
    assert done.returncode == 2, done
    assert says in done.stderr, done.stderr
    assert e2e.agent_calls() == []
    assert not e2e.dir.exists()


def test_hold_merge_in_the_project_tree_closes_as_usual(e2e: Harness) -> None:
    """No worktree, no merge to hold: a passed ticket closes, as with the setting off."""
    done = e2e.run("--hold-merge", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "closed"
    assert not [e for e in e2e.names() if e.startswith("Merge")]
    assert e2e.read_state()["status"] == "closed"
