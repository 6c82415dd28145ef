"""A process killed at every instant of the worktree pool's two moves (a finished ticket's
worktree set down into the pool; a pooled worktree taken by the next ticket) leaves state the
next call finishes: nothing the previous ticket left uncommitted is lost, no agent ever gets
a worktree that still holds the previous ticket's files, no worktree is lost from git's
registry or left locked. The kill comes from the process itself (SIGKILL), at the n-th file
write, rename or removal it makes (a Python audit hook counts them), for every n until the
operation ends unkilled."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.gitrepo import git, init_repo, isolate
from tests.workspace.test_pool import FILES, pooled
from tests.workspace.test_worktree import assert_complete, registered, tree_of
from tf_fsm.settings.load import settings_from_dict
from tf_fsm.workspace.pool import pool_of
from tf_fsm.workspace.worktree import ensure, find, remove

#: kills its own process at the n-th write, rename or removal of a file made after it is set
KILL_AT = """
import os, signal, sys
_at, _seen = int(sys.argv[2]), 0
_CHANGES = {"os.rename", "os.remove", "os.rmdir", "shutil.rmtree", "os.truncate"}
def _writes(args):
    mode, flags = args[1], args[2]
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return bool((flags or 0) & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
def _hook(event, args):
    global _seen
    if event in _CHANGES or (event == "open" and _writes(args)):
        _seen += 1
        if _seen == _at:
            os.kill(os.getpid(), signal.SIGKILL)
"""
PREPARE = """
from pathlib import Path
from tf_fsm.settings.load import settings_from_dict
from tf_fsm.workspace.pool import pool_of
from tf_fsm.workspace.worktree import ensure, find, remove
root, conf = Path(sys.argv[1]), settings_from_dict({})
"""
#: the finished ticket pt-1's worktree set down into the pool
PARK = """ws = find(root, conf, 'pt-1')
sys.addaudithook(_hook)
remove(ws, delete_branch=False, pool=pool_of(root, conf))
"""
#: pt-2's workspace made, the pooled worktree taken for it
TAKE = "sys.addaudithook(_hook)\nensure(root, conf, 'pt-2', 'main')\n"
#: how many kill points an operation may have before the test calls it endless
MOST = 200


def killed_at(root: Path, operation: str, at: int) -> bool:
    """Run `operation` in a process of its own that kills itself at its `at`-th file change;
    whether it was killed (else it ran to its end)."""
    script = KILL_AT + PREPARE + operation
    done = subprocess.run([sys.executable, "-c", script, str(root), str(at)], timeout=120)
    assert done.returncode in (0, -signal.SIGKILL), done
    return done.returncode == -signal.SIGKILL


def mess(tree: Path, n: int) -> None:
    """What pt-1's agents leave uncommitted in trial `n`, each time different."""
    (tree / "src" / "app.py").write_text(f"edited in trial {n}\n")
    (tree / "notes").mkdir(exist_ok=True)
    (tree / "notes" / "todo.txt").write_text(f"todo of trial {n}\n")
    (tree / "build.log").write_text("ignored build output\n")


def kept(root: Path) -> set[str]:
    """The notes each ref pt-1's uncommitted changes were kept under holds."""
    refs = git(root, "for-each-ref", "--format=%(refname)", "refs/tf/pt-1/").splitlines()
    return {git(root, "show", f"{ref}:notes/todo.txt") for ref in refs}


def no_locked_entry(root: Path) -> None:
    admins = (root / ".git" / "worktrees").iterdir()
    assert [a.name for a in admins if (a / "locked").exists()] == []


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch)
    monkeypatch.setenv("PYTHONPATH", str(Path.cwd()))
    return init_repo(tmp_path / "repo", FILES, ignores=False)


def every_kill_point(trial: Callable[[int], bool], what: str) -> None:
    """`trial(n)` for n = 1, 2, ... until its operation ends unkilled (it says whether it was
    killed); more than a few of them killed in it, not only before it began."""
    for at in range(1, MOST):
        if not trial(at):
            assert at > 5, at
            return
    pytest.fail(f"{what} made more than {MOST} file changes")


def test_a_worktree_set_down_into_the_pool_killed_at_any_instant_loses_nothing(
    repo: Path,
) -> None:
    conf = settings_from_dict({})
    ensure(repo, conf, "pt-1", "main")

    def trial(at: int) -> bool:
        mess(tree_of(repo), at)
        killed = killed_at(repo, PARK, at)
        ws = find(repo, conf, "pt-1")
        assert ws is not None
        remove(ws, delete_branch=False, pool=pool_of(repo, conf))  # the rerun's removal
        assert not tree_of(repo).exists() and pooled(repo) == [".pool-1"]
        slot = tree_of(repo, ".pool-1")
        assert git(slot, "rev-parse", "--abbrev-ref", "HEAD") == "HEAD"
        assert sorted(registered(repo)) == sorted(str(p.resolve()) for p in (repo, slot))
        no_locked_entry(repo)
        assert f"todo of trial {at}\n".strip() in kept(repo)  # nothing uncommitted lost
        ensure(repo, conf, "pt-1", "main")  # back for the next trial, from the pool
        assert_complete(repo)
        return killed

    every_kill_point(trial, "setting a worktree down")


def test_a_pooled_worktree_taken_killed_at_any_instant_is_never_handed_over_half_made(
    repo: Path,
) -> None:
    conf = settings_from_dict({})
    ensure(repo, conf, "pt-1", "main")

    def trial(at: int) -> bool:
        mess(tree_of(repo), at)
        remove(find(repo, conf, "pt-1"), delete_branch=False, pool=pool_of(repo, conf))  # type: ignore[arg-type]
        killed = killed_at(repo, TAKE, at)
        ws, _ = ensure(repo, conf, "pt-2", "main")  # the rerun's
        assert_complete(repo, "pt-2")
        left = git(ws.tree, "status", "--porcelain", "--ignored", "--untracked-files=all")
        assert left == ""  # nothing of pt-1's: not its edits, notes or build output
        assert (ws.tree / "src" / "app.py").read_text() == "v1\n"
        no_locked_entry(repo)
        assert pooled(repo) == []
        # back for the next trial: pt-2's worktree into the pool, taken by pt-1 again
        remove(ws, delete_branch=True, pool=pool_of(repo, conf))
        ensure(repo, conf, "pt-1", "main")
        assert_complete(repo)
        return killed

    every_kill_point(trial, "taking a pooled worktree")
