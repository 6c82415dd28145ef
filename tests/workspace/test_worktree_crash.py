"""A ticket's worktree made while git or tf_fsm is SIGKILLed at random moments: whatever the
kill leaves, the next `ensure` completes (tf_fsm.workspace.worktree)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.gitrepo import GIT_ENV, branches, git, init_repo, isolate, status
from tests.workspace.test_worktree import assert_complete, registered, settings, tree_of
from tf_fsm.process.strays import end_orphans
from tf_fsm.workspace.worktree import ensure, find, remove

# -- killed for real, at random moments ------------------------------------------------------

#: tf_fsm's ensure in a process of its own, to be SIGKILLed
ENSURE = (
    "import sys; from pathlib import Path; from tf_fsm.settings.load import settings_from_dict;"
    " from tf_fsm.workspace.worktree import ensure;"
    " ensure(Path(sys.argv[1]), settings_from_dict({}), 'pt-1', 'main')"
)


def many_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose checkout takes long enough to be killed in the middle of."""
    isolate(monkeypatch)
    files = {f"pkg/m{i:04}.py": f"x = {i}\n" for i in range(400)}
    root = init_repo(tmp_path / "big", files)
    (root / "AGENTS.md").write_text("agents\n")
    (root / ".claude").mkdir()
    for i in range(50):
        (root / ".claude" / f"c{i}.md").write_text(f"{i}\n")
    return root


def killed_after(argv: list[str], cwd: Path, delay: float, seen: Path | None = None) -> None:
    """Start `argv`, SIGKILL its whole process group `delay` seconds after it started (or
    after `seen` appeared, when given). What a killed tf_fsm left running (its launcher's
    children, a git among them, live in sessions of their own) is then ended as the next
    `tf-fsm run` or `ralph` ends it before touching the repository: else that git, still
    running a moment, could take a ref's lock after the next removal swept for stale ones."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env={**os.environ, **GIT_ENV, "PYTHONPATH": str(Path.cwd())},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 5
    while seen is not None and not seen.exists() and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(delay)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    end_orphans()


def timed(argv: list[str], cwd: Path) -> float:
    started = time.monotonic()
    subprocess.run(argv, cwd=cwd, env={**os.environ, **GIT_ENV}, check=True, capture_output=True)
    return time.monotonic() - started


def test_git_worktree_add_killed_at_any_moment_is_repaired_by_ensure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = many_files(tmp_path, monkeypatch)
    tree = tree_of(root)
    add = ["git", "worktree", "add", "-q", str(tree), "tf/pt-1"]
    git(root, "branch", "tf/pt-1", "main")
    took = []
    for _ in range(2):  # the first, from a cold cache, is the slower
        took.append(timed(add, root))
        git(root, "worktree", "remove", "--force", str(tree))
    cut_off = 0
    for seed in range(10):
        delay = random.Random(seed).uniform(0, min(took))  # noqa: S311 - timing, not crypto
        if seed % 2:  # inside the checkout, once git has begun registering the worktree
            killed_after(add, root, delay / 2, root / ".git" / "worktrees" / "pt-1")
        else:
            killed_after(add, root, delay)
        cut_off += not (tree / ".git").is_file() or any(
            (p / "locked").exists() for p in (root / ".git" / "worktrees").glob("*")
        )
        ws, _ = ensure(root, settings(), "pt-1", "main")
        assert_complete(root)
        assert len(list((ws.tree / "pkg").iterdir())) == 400
        remove(ws, delete_branch=False)
        assert registered(root) == [str(root.resolve())]
        assert list((root / ".git" / "worktrees").glob("*")) == []
    assert cut_off >= 3, (took, cut_off)  # the kills did land inside `git worktree add`


def test_ensure_killed_at_any_moment_is_completed_by_the_next_ensure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = many_files(tmp_path, monkeypatch)
    monkeypatch.setenv("PYTHONPATH", str(Path.cwd()))
    argv = [sys.executable, "-c", ENSURE, str(root)]
    took = timed(argv, root)
    remove(find(root, settings(), "pt-1"), delete_branch=True)  # type: ignore[arg-type]
    cut_off = 0
    for seed in range(6):
        delay = random.Random(seed).uniform(0.05, took)  # noqa: S311 - test timing, not crypto
        killed_after(argv, root, delay)
        cut_off += not (tree_of(root) / "AGENTS.md").exists()
        ws, _ = ensure(root, settings(), "pt-1", "main")
        assert_complete(root)
        assert ws.copied == (".claude", "AGENTS.md")
        assert len(list((ws.tree / ".claude").iterdir())) == 50
        assert [p.name for p in ws.tree.glob(".*tf-fsm-copy*")] == []
        assert ".tf/" not in status(root)
        remove(ws, delete_branch=True)
        assert branches(root, "tf/*") == []
    assert cut_off >= 2


#: tf_fsm's removal of the ticket's worktree and branch, in a process of its own
REMOVE = (
    "import sys; from pathlib import Path; from tf_fsm.settings.load import settings_from_dict;"
    " from tf_fsm.workspace.worktree import find, remove;"
    " remove(find(Path(sys.argv[1]), settings_from_dict({}), 'pt-1'), delete_branch=True)"
)


def test_a_removal_killed_at_any_moment_keeps_nothing_and_is_finished_by_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tree is never left half deleted where git still knows it: a rerun finds it whole
    (and clean) or gone, so no deletion of git's is ever kept as a person's."""
    root = many_files(tmp_path, monkeypatch)
    monkeypatch.setenv("PYTHONPATH", str(Path.cwd()))
    argv = [sys.executable, "-c", REMOVE, str(root)]
    ensure(root, settings(), "pt-1", "main")
    took = timed(argv, root)
    aside = tree_of(root).with_name(".removing-pt-1")
    for seed in range(8):
        ws, _ = ensure(root, settings(), "pt-1", "main")
        rng = random.Random(seed)  # noqa: S311 - test timing, not crypto
        if seed % 2:  # in the deletion, once the tree is out of git's sight
            killed_after(argv, root, rng.uniform(0.0, 0.02), seen=aside)
        else:  # anywhere
            killed_after(argv, root, rng.uniform(0.0, took))
        assert not (seed % 2 and tree_of(root).exists())  # renamed: gone from its place
        if tree_of(root).exists():  # whole where it was: no tracked file of it is missing
            assert git(tree_of(root), "ls-files", "--deleted") == ""
        remove(ws, delete_branch=True)
        assert not tree_of(root).exists() and not aside.exists()
        assert registered(root) == [str(root)]
        assert branches(root, "tf/*") == []
        assert git(root, "for-each-ref", "refs/tf/") == ""  # nothing kept as uncommitted
