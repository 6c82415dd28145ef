"""The worktree pool (tf_fsm.workspace.pool, docs/workspaces.md "The pool"): a finished
ticket's worktree waits, detached, for the next ticket, which checks its branch out there with
nothing of the previous ticket left but the caches `workspace.poolKeep` names; the pool never
holds more than its size; two processes never get the same worktree. Real repositories."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import commit_all, git, init_repo, isolate
from tests.workspace.test_worktree import assert_complete, registered, tree_of
from tf_fsm.settings.load import LoadedSettings, settings_from_dict
from tf_fsm.workspace.pool import idle, pool_of
from tf_fsm.workspace.removal import discard_idle
from tf_fsm.workspace.worktree import ensure, find, remove

FILES = {"src/app.py": "v1\n", ".gitignore": ".tf/knowledge/\n.tf/ralph/\n*.log\n.venv/\n"}


def settings(**workspace: Any) -> LoadedSettings:
    return settings_from_dict({"workspace": workspace, "ralph": {"parallelWorkers": 2}})


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch)
    return init_repo(tmp_path / "repo", FILES, ignores=False)


def pooled(root: Path) -> list[str]:
    return sorted(
        p.name for p in (root / ".tf" / "ralph" / "worktrees").iterdir() if p.name[0] == "."
    )


def set_down(root: Path, ticket: str, conf: LoadedSettings, *, merged: bool = False) -> list[str]:
    ws = find(root, conf, ticket)
    assert ws is not None
    return remove(ws, delete_branch=merged, pool=pool_of(root, conf))


def leave_a_mess(tree: Path) -> None:
    """What a ticket's agents and gates leave: a commit, tracked edits, staged and untracked
    files, ignored build output and caches, a nested repository."""
    (tree / "src" / "feature.py").write_text("feature\n")
    commit_all(tree, "the ticket's commit")
    (tree / "src" / "app.py").write_text("edited, not committed\n")
    (tree / "staged.py").write_text("staged\n")
    git(tree, "add", "staged.py")
    (tree / "notes" / "deep").mkdir(parents=True)
    (tree / "notes" / "deep" / "todo.txt").write_text("untracked\n")
    (tree / "build.log").write_text("ignored\n")
    (tree / ".venv" / "lib").mkdir(parents=True)
    (tree / ".venv" / "lib" / "cache.py").write_text("a cache the user keeps\n")
    (tree / "node_modules" / "x").mkdir(parents=True)
    (tree / "node_modules" / "x" / "index.js").write_text("not kept\n")
    init_repo(tree / "vendored", {"a.txt": "a nested repository\n"}, ignores=False)


def test_the_next_ticket_gets_the_pooled_worktree_with_nothing_of_the_previous_left(
    repo: Path,
) -> None:
    conf = settings(poolKeep=[".venv"])
    ws, _ = ensure(repo, conf, "pt-1", "main")
    admin = (ws.tree / ".git").read_text()
    leave_a_mess(ws.tree)
    notes = set_down(repo, "pt-1", conf)
    slot = tree_of(repo, ".pool-1")
    assert f"moved the worktree {ws.tree} into the pool, for the next ticket: {slot}" in notes
    assert not ws.tree.exists() and pooled(repo) == [".pool-1"]
    assert git(slot, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"  # detached: no branch held
    # what it held that its branch lacks is kept, as for a removal
    kept = git(repo, "show", "--stat", "--format=", "refs/tf/pt-1/removed-uncommitted")
    for path in ("src/app.py", "staged.py", "notes/deep/todo.txt"):
        assert path in kept

    main = git(repo, "rev-parse", "main")
    ws2, notes = ensure(repo, conf, "pt-2", "main")
    assert f"took a worktree from the pool for tf/pt-2: {ws2.tree}" in notes
    assert (ws2.tree / ".git").read_text() == admin  # the same worktree, not a new checkout
    assert_complete(repo, "pt-2")
    assert git(ws2.tree, "rev-parse", "HEAD") == main
    assert pooled(repo) == []
    left = git(ws2.tree, "status", "--porcelain", "--ignored", "--untracked-files=all")
    assert left.splitlines() == ["!! .venv/lib/cache.py"]  # only the cache poolKeep names
    assert sorted(git(ws2.tree, "ls-files").splitlines()) == [".gitignore", "src/app.py"]
    assert (ws2.tree / "src" / "app.py").read_text() == "v1\n"
    # pt-1's branch is held by no worktree: it is checked out again in a worktree of its own
    ws1, _ = ensure(repo, conf, "pt-1", "main")
    assert (ws1.tree / "src" / "feature.py").read_text() == "feature\n"
    assert_complete(repo, "pt-1")


def test_a_ticket_whose_branch_exists_continues_on_it_in_a_pooled_worktree(repo: Path) -> None:
    conf = settings()
    ensure(repo, conf, "pt-1", "main")
    ws, _ = ensure(repo, conf, "pt-2", "main")
    (ws.tree / "src" / "two.py").write_text("two\n")
    tip = commit_all(ws.tree, "pt-2's work")
    set_down(repo, "pt-2", conf)  # out of retries: the branch stays, the worktree goes
    set_down(repo, "pt-1", conf)
    again, notes = ensure(repo, conf, "pt-2", "main")
    assert "checked out the branch tf/pt-2 at its tip in the pooled worktree" in notes
    assert git(again.tree, "rev-parse", "HEAD") == tip
    assert (again.tree / "src" / "two.py").read_text() == "two\n"
    assert_complete(repo, "pt-2")


def test_the_pool_holds_no_more_than_its_size(repo: Path) -> None:
    for ticket in ("pt-1", "pt-2", "pt-3"):
        ensure(repo, settings(), ticket, "main")
    # size: ralph.parallelWorkers (2) when workspace.poolSize is not set
    assert pool_of(repo, settings()).size == 2
    set_down(repo, "pt-1", settings())
    set_down(repo, "pt-2", settings())
    notes = set_down(repo, "pt-3", settings())
    assert notes[-1] == f"removed the worktree {tree_of(repo, 'pt-3')}"
    assert pooled(repo) == [".pool-1", ".pool-2"]
    assert len(registered(repo)) == 3
    # 0: no pool kept; the worktrees already waiting are still taken, not left to sit there
    ws, notes = ensure(repo, settings(poolSize=0), "pt-4", "main")
    assert f"took a worktree from the pool for tf/pt-4: {ws.tree}" in notes
    assert pooled(repo) == [".pool-2"]
    assert set_down(repo, "pt-4", settings(poolSize=0))[-1] == f"removed the worktree {ws.tree}"
    assert pooled(repo) == [".pool-2"]


def test_a_merged_tickets_branch_is_deleted_though_its_worktree_waits(repo: Path) -> None:
    conf = settings()
    ensure(repo, conf, "pt-1", "main")
    notes = set_down(repo, "pt-1", conf, merged=True)  # nothing of its own: merged already
    assert notes[-1].startswith("deleted the branch tf/pt-1")
    assert git(repo, "branch", "--list", "tf/*") == ""
    assert pooled(repo) == [".pool-1"]
    assert idle(pool_of(repo, conf)) == [tree_of(repo, ".pool-1")]
    _, notes = ensure(repo, conf, "pt-1", "main")  # the same id again: a fresh branch, pooled
    assert any(n.startswith("took a worktree from the pool") for n in notes)
    assert_complete(repo, "pt-1")


#: one process making a ticket's workspace, after a line on stdin (all start together)
ENSURE = (
    "import sys; from pathlib import Path; from tf_fsm.settings.load import settings_from_dict;"
    " from tf_fsm.workspace.worktree import ensure; sys.stdin.readline();"
    " ws, notes = ensure(Path(sys.argv[1]), settings_from_dict({}), sys.argv[2], 'main');"
    " print(any(n.startswith('took a worktree from the pool') for n in notes))"
)


def test_two_processes_never_take_the_same_pooled_worktree(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    conf = settings_from_dict({})  # a pool of one
    ensure(repo, conf, "pt-0", "main")
    set_down(repo, "pt-0", conf)
    monkeypatch.setenv("PYTHONPATH", str(Path.cwd()))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", ENSURE, str(repo), ticket],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for ticket in ("pt-1", "pt-2", "pt-3")
    ]
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    took = [proc.communicate(timeout=120)[0].strip() for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    assert sorted(took) == ["False", "False", "True"]  # one took it, the others made theirs
    for ticket in ("pt-1", "pt-2", "pt-3"):
        assert_complete(repo, ticket)
    assert len({(tree_of(repo, t) / ".git").read_text() for t in ("pt-1", "pt-2", "pt-3")}) == 3
    assert pooled(repo) == []


def test_a_pooled_directory_git_no_longer_knows_is_neither_counted_nor_taken(
    repo: Path,
) -> None:
    conf = settings_from_dict({})  # a pool of one
    ensure(repo, conf, "pt-1", "main")
    set_down(repo, "pt-1", conf)
    slot = tree_of(repo, ".pool-1")
    admin = Path((slot / ".git").read_text().removeprefix("gitdir: ").strip())
    shutil.rmtree(admin)  # its entry gone from git's registry (a person's doing)
    assert idle(pool_of(repo, conf)) == []  # not counted: the next one may wait beside it
    _, notes = ensure(repo, conf, "pt-2", "main")
    assert not any(n.startswith("took a worktree") for n in notes)
    assert_complete(repo, "pt-2")
    set_down(repo, "pt-2", conf)
    assert pooled(repo) == [".pool-1", ".pool-2"]
    notes = discard_idle(pool_of(repo, conf), repo / ".git")
    assert notes == [
        f"left {slot} alone: git's registry does not name it",
        f"removed the pooled worktree {tree_of(repo, '.pool-2')}",
    ]
