"""`tf-fsm workspaces` and `tf-fsm workspaces prune` (docs/workspaces.md): every ticket
workspace listed with its base, ahead/behind, uncommitted changes, state and size; prune
removes those of closed and abandoned tickets and never drops anybody's work: unmerged commits
and uncommitted changes stay unless --force, which keeps them under refs/tf/<id>/. Real git
repositories, real `tf-fsm` runs with tests/fake_agent.py as the agent."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.gitrepo import branches, commit_all, git, isolate
from tests.test_workspace_views import (
    BLOCKING,
    EDITS,
    git_log_shim,
    git_project,
    journal,
    run_ticket,
)

KEEP = {"ralph": {"parallelKeepWorktrees": True}}  # a merged ticket keeps its workspace
TWO_RETRIES = {"workflow": {"escalation": {"maxRetries": 2}}}
HOLD_LOCK = """
import sys
from pathlib import Path
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
root = Path(sys.argv[1])
with open_store(root, load_settings(root), sys.argv[2]).lock(note="a test's run"):
    print("held", flush=True)
    sys.stdin.read()
"""


def tree(project: Path, ticket_id: str) -> Path:
    return project / ".tf/ralph/worktrees" / ticket_id


def listing(env: dict[str, str] | None = None) -> dict[str, dict[str, Any]]:
    done = run_cli("workspaces", "--json", env=env)
    assert done.returncode == 0, done.stderr
    return {row["ticket"]: row for row in json.loads(done.stdout)}


def prune(*args: str, code: int = 0) -> dict[str, dict[str, Any]]:
    done = run_cli("workspaces", "prune", *args, "--json")
    assert done.returncode == code, done.stderr
    return {r["ticket"]: r for r in json.loads(done.stdout)} if code == 0 else {}


def registered(project: Path) -> list[str]:
    out = git(project, "worktree", "list", "--porcelain")
    return [line[9:] for line in out.splitlines() if line.startswith("worktree ")]


def tf_refs(project: Path) -> dict[str, str]:
    out = git(project, "for-each-ref", "--format=%(refname) %(objectname)", "refs/tf/")
    return dict(line.split() for line in out.splitlines())


Backlog = Callable[..., Path]


@pytest.fixture
def make(
    project: Path, write_settings: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> Backlog:
    """Makes the project a backlog of workspaces, each kind only when asked (each costs runs):
    pt-1 closed and merged, its workspace kept; pt-2 blocked with a retry left and an
    uncommitted file in its worktree; pt-3 blocked twice, out of retries (its worktree
    removed by the run, its unmerged branch kept); always tf/pt-9, a branch with no ticket at
    main's tip, and `stray`, an empty directory in the worktrees dir."""

    def make(closed: bool = True, blocked: bool = True, exhausted: bool = True) -> Path:
        git_project(
            project, write_settings, monkeypatch, ("pt-1", "pt-2", "pt-3"), **KEEP, **TWO_RETRIES
        )
        if closed:
            assert run_ticket(project, "pt-1", EDITS, "--worktree").returncode == 0
        if blocked:
            assert run_ticket(project, "pt-2", BLOCKING, "--worktree").returncode == 3
            (tree(project, "pt-2") / "notes.txt").write_text("a person's notes\n")
        if exhausted:
            assert run_ticket(project, "pt-3", BLOCKING, "--worktree").returncode == 3
            assert run_ticket(project, "pt-3", BLOCKING).returncode == 4
        git(project, "branch", "tf/pt-9", "main")
        tree(project, "stray").mkdir(parents=True)
        return project

    return make


def test_the_list_shows_each_kind_of_workspace(make: Backlog, tmp_path: Path) -> None:
    project = make()
    env, log = git_log_shim(tmp_path)
    rows = listing(env)
    assert sorted(rows) == ["pt-1", "pt-2", "pt-3", "pt-9", "stray"]
    one, two, three, nine, stray = (rows[t] for t in sorted(rows))
    assert (one["state"], one["ahead"], one["behind"], one["dirty"]) == ("closed", 0, 1, False)
    assert one["worktree"] is True and one["prunable"] is True and one["size"] > 0
    assert (two["state"], two["ahead"], two["dirty"], two["changes"]) == ("blocked", 1, True, 1)
    assert two["prunable"] is False and two["base"] == "main"
    assert (three["state"], three["ahead"], three["worktree"]) == ("exhausted", 1, False)
    assert three["dirty"] is None and three["size"] == 0 and three["branch"] == "tf/pt-3"
    assert nine["state"] == "no ticket state, no ticket file" and nine["ahead"] == 0
    assert stray["branch"] is None and stray["worktree"] is False
    # few git processes: three for all, a handful per workspace
    calls = log.read_text().splitlines()
    assert sum(c.startswith("rev-list --left-right") for c in calls) == 4  # one per branch
    assert sum(c.startswith("--no-optional-locks status") for c in calls) == 2
    assert len(calls) <= 3 + 6 * len(rows)
    table = run_cli("workspaces").stdout
    for cells in ("pt-1 ", "tf/pt-2", "yes (1)", "exhausted", "not a worktree", "KiB"):
        assert cells in table
    # pt-3's worktree went into the pool when its retries ran out: listed apart, not a ticket's
    pooled = run_cli("workspaces", "pool", "--json")
    [slot] = json.loads(pooled.stdout)
    assert slot["path"] == str(tree(project, ".pool-1")) and slot["size"] > 0
    assert slot["head"] == git(Path(slot["path"]), "rev-parse", "HEAD")
    assert table.rstrip().splitlines()[-1].startswith("pool: 1 of 1 worktrees waiting")


def test_a_dry_run_changes_nothing_and_prune_then_does_what_it_said(make: Backlog) -> None:
    backlog = make()

    def snapshot() -> tuple[object, ...]:
        refs = git(backlog, "for-each-ref", "--format=%(refname) %(objectname)")
        files = sorted(str(p) for p in (backlog / ".tf").rglob("*"))
        return refs, registered(backlog), files, json.dumps(journal(backlog, "pt-1"))

    before = snapshot()
    planned = prune("--dry-run")
    assert planned["pt-1"]["done"] == [
        f"would remove the worktree {tree(backlog, 'pt-1')}",
        "would delete the branch tf/pt-1",
    ]
    assert all(r["dryRun"] for r in planned.values())
    forced = prune("--dry-run", "--force")["pt-3"]["done"]
    assert forced == [
        "would keep the tip of tf/pt-3 under refs/tf/pt-3/removed-branch",
        "would delete the branch tf/pt-3",
    ]
    text = run_cli("workspaces", "prune", "--dry-run").stdout
    assert "pt-1: would be removed (dry run): closed; would remove the worktree" in text
    assert snapshot() == before
    tip3 = git(backlog, "rev-parse", "tf/pt-3")
    results = prune()
    outcomes = {t: r["outcome"] for t, r in results.items()}
    assert outcomes == {t: r["outcome"] for t, r in planned.items()}
    assert results["pt-1"]["outcome"] == "removed"
    assert results["pt-9"]["outcome"] == "removed"  # merged: nothing of it is lost
    assert results["stray"]["outcome"] == "removed"
    assert results["pt-2"]["outcome"] == "left_alone"
    assert "pt-2 --force" in results["pt-2"]["reason"]
    assert results["pt-3"]["outcome"] == "kept"  # exhausted, but its commit is not in main
    assert "1 commit not in main" in results["pt-3"]["reason"]
    assert branches(backlog, "tf/*") == ["tf/pt-2", "tf/pt-3"]
    assert git(backlog, "rev-parse", "tf/pt-3") == tip3
    # pt-3's worktree went into the pool when its retries ran out; a plain prune leaves it
    pooled = tree(backlog, ".pool-1")
    assert sorted(registered(backlog)) == sorted(map(str, [backlog, tree(backlog, "pt-2"), pooled]))
    planned = run_cli("workspaces", "prune", "--pool", "--dry-run").stdout.splitlines()
    said = f"would remove the pooled worktree {pooled} (dry run)"
    assert f"pool: would be removed (dry run): the pool; {said}" in planned
    assert pooled.is_dir()
    emptied = prune("--pool")[None]  # type: ignore[index]
    assert emptied["done"] == [f"removed the pooled worktree {pooled}"]
    assert registered(backlog) == [str(backlog), str(tree(backlog, "pt-2"))]
    assert sorted(p.name for p in (backlog / ".tf/ralph/worktrees").iterdir()) == ["pt-2"]
    assert (tree(backlog, "pt-2") / "notes.txt").read_text() == "a person's notes\n"
    assert tf_refs(backlog) == {}
    # journaled as a run journals it: status says the workspace is gone
    assert journal(backlog, "pt-1")[-1]["event"] == "WorkspaceRemoved"
    assert "; worktree and branch removed" in run_cli("status", "pt-1").stdout
    text = run_cli("workspaces", "prune").stdout.splitlines()  # again: the same two are left
    assert [line.split(":")[0] for line in text] == ["pt-2", "pt-3"]


def test_unmerged_commits_stay_without_force_and_under_a_ref_with_it(make: Backlog) -> None:
    backlog = make(blocked=False)
    # pt-1 closed and merged, then one more commit on its branch: a clean worktree goes,
    # the branch stays
    (tree(backlog, "pt-1") / "late.txt").write_text("after the merge\n")
    late = commit_all(tree(backlog, "pt-1"), "a late commit")
    results = prune("pt-1", "pt-3")
    assert results["pt-1"]["outcome"] == "worktree_removed"
    assert f"removed the worktree {tree(backlog, 'pt-1')}" in results["pt-1"]["done"]
    assert results["pt-3"]["outcome"] == "kept" and results["pt-3"]["done"] == []
    assert branches(backlog, "tf/*") == ["tf/pt-1", "tf/pt-3", "tf/pt-9"]
    assert not tree(backlog, "pt-1").exists()
    tip3 = git(backlog, "rev-parse", "tf/pt-3")
    results = prune("pt-1", "pt-3", "--force")
    assert "kept the tip of tf/pt-3 under refs/tf/pt-3/removed-branch" in results["pt-3"]["done"]
    assert tf_refs(backlog) == {
        "refs/tf/pt-1/removed-branch": late,
        "refs/tf/pt-3/removed-branch": tip3,
    }
    assert branches(backlog, "tf/*") == ["tf/pt-9"]


def test_uncommitted_changes_stay_without_force_and_under_a_ref_with_it(make: Backlog) -> None:
    backlog = make(blocked=False, exhausted=False)
    worktree = tree(backlog, "pt-1")
    (worktree / "work.txt").write_text("edited, not committed\n")
    results = prune("pt-1")
    assert results["pt-1"]["outcome"] == "kept" and results["pt-1"]["done"] == []
    assert "uncommitted changes (1 paths)" in results["pt-1"]["reason"]
    assert (worktree / "work.txt").read_text() == "edited, not committed\n"
    results = prune("pt-1", "--force")
    assert results["pt-1"]["outcome"] == "removed" and not worktree.exists()
    kept = "refs/tf/pt-1/removed-uncommitted"
    assert kept in tf_refs(backlog)
    assert git(backlog, "show", f"{kept}:work.txt") == "edited, not committed"


def test_a_named_ticket_whose_work_may_go_on_goes_only_with_force(make: Backlog) -> None:
    backlog = make(closed=False, exhausted=False)
    tip = git(backlog, "rev-parse", "tf/pt-2")
    assert prune("pt-2")["pt-2"]["outcome"] == "left_alone"
    assert branches(backlog, "tf/pt-2") == ["tf/pt-2"]
    result = prune("pt-2", "--force")["pt-2"]
    assert result["outcome"] == "removed"
    assert result["reason"] == "blocked, named with --force; --force"
    refs = tf_refs(backlog)
    assert refs["refs/tf/pt-2/removed-branch"] == tip
    assert git(backlog, "show", "refs/tf/pt-2/removed-uncommitted:notes.txt") == (
        "a person's notes"
    )
    assert branches(backlog, "tf/pt-2") == []


@pytest.fixture
def held(make: Backlog, project: Path) -> Iterator[int]:
    """pt-1 closed with its workspace kept, and its lock held by a second process (as a run
    holds it); that process's pid."""
    make(blocked=False, exhausted=False)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(project), "pt-1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    yield holder.pid
    holder.communicate(input="", timeout=30)


def test_a_locked_ticket_is_refused_when_named_and_left_alone_otherwise(
    project: Path, held: int
) -> None:
    named = run_cli("workspaces", "prune", "pt-9", "pt-1", "--force")
    assert named.returncode == 75
    assert f"pid {held}" in named.stderr
    assert branches(project, "tf/*") == ["tf/pt-1", "tf/pt-9"]
    assert listing()["pt-1"]["lockedBy"] == held
    results = prune()
    assert results["pt-1"]["outcome"] == "left_alone"
    assert f"locked by pid {held}" in results["pt-1"]["reason"]
    assert results["pt-9"]["outcome"] == "removed"
    assert tree(project, "pt-1").is_dir()


def test_a_named_ticket_without_a_workspace_is_exit_2_and_nothing_goes(make: Backlog) -> None:
    backlog = make(closed=False, blocked=False, exhausted=False)
    done = run_cli("workspaces", "prune", "pt-9", "pt-7")
    assert done.returncode == 2
    assert "pt-7: no workspace (no branch tf/pt-7" in done.stderr
    assert "tf/pt-9" in branches(backlog, "tf/*")


def test_no_workspace_and_no_repository_are_one_line_and_exit_0(
    project: Path, write_settings: Callable[..., Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    write_settings({})
    outside = run_cli("workspaces")
    assert outside.returncode == 0
    assert outside.stdout == f"{project} is not in a git repository: no ticket has a workspace\n"
    assert run_cli("workspaces", "--json").stdout.strip() == "[]"
    assert run_cli("workspaces", "prune").stdout.endswith("no workspace to prune\n")
    assert run_cli("workspaces", "prune", "pt-1").returncode == 2
    git_project(project, write_settings, monkeypatch)
    empty = run_cli("workspaces")
    assert empty.returncode == 0 and empty.stdout.startswith("no ticket workspaces")
    assert run_cli("workspaces", "--force").returncode == 2  # --force goes with prune
