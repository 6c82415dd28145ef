"""What the views show of a ticket's git workspace (docs/workspaces.md): `status` (the
`workspace` key and line, read from the journal with no git process), `diagram --ticket` (the
merge on the machine's edges, checkpoints in the notes, nothing unmapped) and `run/resume
--plan` (which tree the attempt would run in, nothing made). Real git repositories, real
`tf-fsm` processes, tests/fake_agent.py as the agent."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, tk_ticket
from tests.gitrepo import branches, git, init_repo, isolate
from tf_fsm.core import journal as ev
from tf_fsm.core import machine as fsm
from tf_fsm.core import workspace_events as wev
from tf_fsm.views import history as journal_history

FAKE_AGENT = Path(__file__).parent / "fake_agent.py"
CLOSE, MERGING = fsm.phase_state("close"), fsm.MERGING
#: a Major finding no fixer clears: the attempt blocks
BLOCKING = {
    "edits": [{"phase": "implement", "file": "work.txt"}],
    "findings": [
        {"id": "f1", "severity": "Major", "text": "x", "reviewer": "reviewer-general",
         "fixedBy": []},
    ],
}  # fmt: skip
EDITS = {"edits": [{"phase": "implement", "file": "work.txt"}]}


def git_project(
    project: Path,
    write_settings: Callable[[dict[str, Any]], Path],
    monkeypatch: pytest.MonkeyPatch,
    tickets: tuple[str, ...] = ("pt-1",),
    **settings: Any,
) -> Path:
    """The test's project as a git repository (tickets and settings committed on main), with
    the fake agent as its executor and tf_fsm's own git isolated."""
    isolate(monkeypatch)
    executor = {"kind": "command", "command": [sys.executable, str(FAKE_AGENT)], "maxRestarts": 0}
    write_settings({"executor": executor, **settings})
    (project / ".tickets").mkdir(exist_ok=True)
    for ticket_id in tickets:
        (project / ".tickets" / f"{ticket_id}.md").write_text(tk_ticket(ticket_id))
    return init_repo(project)


def run_ticket(
    project: Path, ticket_id: str, plan: dict[str, Any], *flags: str
) -> subprocess.CompletedProcess[str]:
    """`tf-fsm run TICKET` with the fake agent following `plan`."""
    plan_file = project.parent / f"plan-{ticket_id}.json"
    plan_file.write_text(json.dumps(plan))
    return run_cli("run", ticket_id, *flags, env={"FAKE_AGENT_PLAN": str(plan_file)})


def status_row(ticket_id: str) -> dict[str, Any]:
    done = run_cli("status", ticket_id, "--json")
    assert done.returncode == 0, done.stderr
    row: dict[str, Any] = json.loads(done.stdout)
    return row


def journal(project: Path, ticket_id: str) -> list[dict[str, Any]]:
    path = project / ".tf/knowledge/tickets" / ticket_id / "events.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def git_log_shim(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose `git` logs each invocation to a file, then runs the real one."""
    real = subprocess.run(["which", "git"], capture_output=True, text=True, check=True)
    shim_dir, log = tmp_path / "shim", tmp_path / "git-calls.log"
    shim_dir.mkdir()
    shim = shim_dir / "git"
    shim.write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {real.stdout.strip()} "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    return {"PATH": f"{shim_dir}{os.pathsep}{os.environ['PATH']}"}, log


def conflicted_merge(project: Path) -> None:
    """pt-1 passes its gate in its worktree while main gets a conflicting commit: the closer
    fails once (the attempt stops in error before the merge), main moves, and the resumed
    attempt's merge conflicts (exit 5)."""
    crash = {**EDITS, "crash": [{"phase": "close", "attempt": 1, "exitCode": 3, "times": 1}]}
    assert run_ticket(project, "pt-1", crash, "--worktree").returncode == 5
    (project / "work.txt").write_text("main's own line\n")
    git(project, "add", "work.txt")
    git(project, "commit", "-q", "-m", "main edits work.txt")
    done = run_ticket(project, "pt-1", crash)
    assert done.returncode == 5, done.stderr
    assert "merge conflict" in done.stderr


# -- status -------------------------------------------------------------------------------


def test_status_shows_a_merged_workspace_from_the_journal_alone(
    project: Path,
    write_settings: Callable[..., Path],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    git_project(project, write_settings, monkeypatch)
    assert run_ticket(project, "pt-1", EDITS, "--worktree").returncode == 0
    ws = status_row("pt-1")["workspace"]
    main = git(project, "rev-parse", "main")
    tree = project / ".tf/ralph/worktrees/pt-1"
    assert ws["branch"] == "tf/pt-1" and ws["base"] == "main" and ws["path"] == str(tree)
    assert ws["exists"] is False and ws["branchDeleted"] is True  # merged: both removed
    assert ws["merged"] == main
    [point] = ws["checkpoints"]
    assert point["attempt"] == 1 and point["phase"] == "implement"
    subject = git(project, "log", "-1", "--format=%s", point["sha"])
    assert subject == "tf-fsm: pt-1 attempt 1 implement"
    text = run_cli("status").stdout
    line = f"pt-1: branch tf/pt-1 (base main) at {tree}; checkpoints of attempt 1: implement "
    assert f"{line}{point['sha'][:8]}; merged into main as {main[:8]}" in text
    # read from the journal: status starts no git process
    env, log = git_log_shim(tmp_path)
    assert run_cli("status", "--json", env=env).returncode == 0
    assert not log.exists()


def test_status_shows_a_kept_workspace_and_none_for_a_shared_tree_ticket(
    project: Path, write_settings: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    git_project(project, write_settings, monkeypatch, tickets=("pt-1", "pt-2"))
    assert run_ticket(project, "pt-1", BLOCKING, "--worktree", "--once").returncode == 3
    ws = status_row("pt-1")["workspace"]
    tip = git(project, "rev-parse", "tf/pt-1")
    assert ws["exists"] is True and ws["branchDeleted"] is False and ws["merged"] is None
    assert ws["checkpoints"] == [{"attempt": 1, "phase": "implement", "sha": tip}]
    assert ws["setAside"] == []
    assert run_ticket(project, "pt-2", BLOCKING, "--no-worktree", "--once").returncode == 3
    assert status_row("pt-2")["workspace"] is None
    text = run_cli("status").stdout
    assert f"checkpoints of attempt 1: implement {tip[:8]}\n" in text
    assert "merged into" not in text and "removed" not in text
    assert "pt-2: branch" not in text


def test_state_words_and_the_merging_state() -> None:
    from tf_fsm.core.state import Attempt
    from tf_fsm.core.ticket_rules import lifecycle_state
    from tf_fsm.views.status import state_words

    assert state_words("in_progress.fix", "active", None, False) == "in_progress at fix"
    assert state_words("error", "active", "merge_conflict", False) == "error (merge_conflict)"
    assert state_words("blocked", "active", None, False) == "blocked"
    assert state_words("blocked", "active", None, True) == "exhausted"
    assert state_words("initial", None, None, False) == "no ticket state"
    now = {"ts": "2026-11-22T12:00:00.000Z", "ticket": "t-1", "attempt": 1}
    cur = Attempt.model_validate(
        {
            "attemptNumber": 1,
            "startedAt": "2026-11-22T12:00:00Z",
            "status": "in_progress",
            "trigger": "initial",
        }
    )
    started = ev.AttemptStarted(**now, trigger="initial", escalation={})
    merge = wev.MergeStarted(**now, base="main", baseSha="a" * 40, tip="b" * 40, strategy="merge")
    done = wev.MergeCompleted(**now, commit="c" * 40, base="main")
    assert lifecycle_state(cur, "close", [started, merge]) == MERGING
    assert lifecycle_state(cur, "close", [started, merge, done]) == CLOSE


# -- diagram --ticket -----------------------------------------------------------------------


def taken(project: Path) -> journal_history.History:
    history, _ = journal_history.load_history(project, "pt-1")
    assert history.unmapped == []
    return history


def test_a_worktree_run_is_drawn_through_merging_with_its_checkpoints(
    project: Path, write_settings: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    git_project(project, write_settings, monkeypatch)
    assert run_ticket(project, "pt-1", EDITS, "--worktree").returncode == 0
    history = taken(project)
    sha = next(e["sha"] for e in journal(project, "pt-1") if e["event"] == "CheckpointCommitted")
    implement = history.taken[(fsm.phase_state("implement"), "complete", fsm.phase_state("review"))]
    assert f"a1 checkpoint {sha[:8]}" in implement
    assert (CLOSE, "complete", MERGING) in history.taken
    assert (CLOSE, "complete", fsm.CLOSED) not in history.taken
    merged = history.taken[(MERGING, "merged", fsm.CLOSED)]
    assert f"a1 merged into main as {git(project, 'rev-parse', 'main')[:8]}" in merged
    drawn = run_cli("diagram", "--ticket", "pt-1", "-o", "-")
    assert drawn.returncode == 0 and "warning" not in drawn.stderr
    assert "merging --> closed: merged<br/>✔ a1 merge into main (merge)" in drawn.stdout


def test_a_merge_conflict_and_its_resumed_merge_are_drawn_on_the_machine_s_edges(
    project: Path, write_settings: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    git_project(project, write_settings, monkeypatch)
    conflicted_merge(project)
    history = taken(project)
    assert history.current == fsm.ERROR
    refused = history.taken[(MERGING, "fail", fsm.ERROR)]
    assert refused[0] == "a1 merge into main (merge)"
    assert "a1 resolution 1 by fixer: work.txt (add/add)" in refused
    assert "a1 merge refused: merge_conflict in work.txt" in refused
    assert refused[-1] == "a1 work set aside under refs/tf/pt-1/resolution-1"
    assert (fsm.ERROR, "resume", CLOSE) in history.taken  # the closer's failure, resumed
    # A person resolves it in the worktree, and leaves one more edit uncommitted.
    tree = project / ".tf/ralph/worktrees/pt-1"
    git(tree, "rebase", "main", check=False)
    assert (tree / "work.txt").read_text().startswith("<<<<<<<")  # the conflict, as git left it
    (tree / "work.txt").write_text("both lines, resolved\n")
    git(tree, "add", "work.txt")
    git(tree, "-c", "core.editor=true", "rebase", "--continue")
    (tree / "work.txt").write_text("both lines, resolved, and a fix\n")
    done = run_ticket(project, "pt-1", EDITS)
    assert done.returncode == 0, done.stderr
    history = taken(project)
    assert history.current == fsm.CLOSED
    fix = next(e for e in journal(project, "pt-1") if e.get("phase") == "merge")
    assert fix["event"] == "CheckpointCommitted"
    assert f"a1 checkpoint {fix['sha'][:8]}" in history.taken[(CLOSE, "complete", MERGING)]
    for edge in [
        (fsm.ERROR, "resume", CLOSE),
        (MERGING, "fail", fsm.ERROR),
        (MERGING, "merged", fsm.CLOSED),
    ]:
        assert edge in history.taken
    assert git(project, "show", "main:work.txt") == "both lines, resolved, and a fix"


def test_an_attempt_resumed_in_progress_takes_no_edge() -> None:
    now = {"ts": "2026-11-22T12:00:00.000Z", "ticket": "t-1", "attempt": 1}
    events = [
        ev.AttemptStarted(**now, trigger="initial", escalation={}),
        ev.PhaseStarted(**now, phase="research", roles=["researcher"]),
        wev.WorkSetAside(**now, ref="refs/tf/t-1/attempt-1-interrupted", reason="x", head="a"),
        ev.AttemptResumed(**now, phase="research"),
    ]
    history = journal_history.replay("t-1", events, fsm.phase_state("research"))
    assert history.unmapped == []
    assert list(history.taken) == [(fsm.INITIAL, "start", fsm.phase_state("research"))]


# -- run --plan ---------------------------------------------------------------------------


def plan_tree(*args: str) -> dict[str, Any]:
    done = run_cli(*args, "--plan", "--json")
    assert done.returncode == 0, done.stderr
    tree: dict[str, Any] = json.loads(done.stdout)["tree"]
    return tree


def test_the_plan_names_the_tree_and_makes_nothing(
    project: Path, write_settings: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    git_project(project, write_settings, monkeypatch)
    shared = plan_tree("run", "pt-1", "--no-worktree")
    assert shared["worktree"] is False and shared["why"] == "--no-worktree"
    assert shared["summary"] == "the project's working tree (--no-worktree)"
    ours = plan_tree("run", "pt-1")  # in a git repository: the ticket's worktree by default
    assert ours["worktree"] is True and ours["exists"] is False
    assert ours["branch"] == "tf/pt-1" and ours["base"] == "main"
    assert ours["why"] == "workspace.mode auto"
    assert ours["summary"] == (
        "the ticket's worktree .tf/ralph/worktrees/pt-1 (branch tf/pt-1 from main)"
    )
    asked = plan_tree("run", "pt-1", "--worktree")
    assert {**asked, "why": "workspace.mode auto"} == ours and asked["why"] == "--worktree"
    text = run_cli("run", "pt-1", "--plan")
    assert f"\ntree: {ours['summary']}\n" in text.stdout, text.stdout + text.stderr
    assert branches(project, "tf/*") == [] and not (project / ".tf/ralph").exists()
    assert not (project / ".git/worktrees").exists()


def test_the_plan_of_a_resume_runs_in_the_ticket_s_worktree(
    project: Path, write_settings: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    git_project(project, write_settings, monkeypatch)
    conflicted_merge(project)
    tree = plan_tree("resume", "pt-1")  # the branch exists: it keeps running there
    assert tree["worktree"] is True and tree["exists"] is True
    assert tree["path"] == str(project / ".tf/ralph/worktrees/pt-1")


def test_the_plan_outside_git_says_why_and_what_run_would_do(
    project: Path, write_settings: Callable[..., Path]
) -> None:
    (project / ".tickets").mkdir()
    (project / ".tickets/pt-1.md").write_text(tk_ticket("pt-1"))
    write_settings({"ralph": {"serialUseWorktree": True}})  # auto would pick a worktree
    auto = plan_tree("run", "pt-1")
    assert auto["worktree"] is False and auto["note"].startswith("not a git repository")
    assert auto["summary"].startswith("the project's working tree (not a git repository")
    asked = plan_tree("run", "pt-1", "--worktree")
    assert asked["refused"] == "--worktree asks for a worktree, but not a git repository"
    assert asked["summary"].endswith("(run exits 2)")
