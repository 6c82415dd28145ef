"""The removal of git's stale lock files (tf_fsm.workspace.locks) against real git processes:
a lock a killed git left is removed, and a lock a running git holds never is, whichever tree
of the repository that git runs in and however its commands follow each other."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tests.gitrepo import GIT_ENV, git, init_repo, isolate
from tf_fsm.errors import GitError
from tf_fsm.settings.load import settings_from_dict
from tf_fsm.workspace.checkpoint import checkpoint, clear_locks
from tf_fsm.workspace.locks import clear_stale_locks, git_processes_in
from tf_fsm.workspace.model import Workspace
from tf_fsm.workspace.worktree import ensure

#: how long the stress test's sweeps run beside the git commands at the root (the sweep that
#: looked for running gits between its look at the locks and its unlink took a live lock in
#: 2.5-6.4 s, 5 runs of 5, on a loaded 2-core machine)
STRESS_SECONDS = 8.0

#: a sweep of the root checkout's locks, as the merge queue's recovery makes it, repeated in
#: its own process until `stop` exists; it prints how many sweeps it made
SWEEPER = """
import sys
from pathlib import Path
from tf_fsm.workspace.checkpoint import clear_locks
common, root, tree, stop = (Path(a) for a in sys.argv[1:5])
sweeps = 0
while not stop.exists():
    clear_locks(common, [common], root, tree, "tf/pt-1", "pt-1", ["refs/heads/main"])
    sweeps += 1
print(sweeps)
"""

#: git commands at the root, one after the other as a worker's are, each taking and releasing
#: the root's index.lock and main's ref lock; stops at the first that fails
GIT_AT_THE_ROOT = """
n=0
while [ ! -e "$1" ]; do
    for write in 1 2 3; do git read-tree HEAD || exit 1; done
    git commit -q --allow-empty -m "commit $n" || exit 1
    n=$((n + 1))
done
"""

#: a person's reference-transaction hook: when every lock of the deletion of their branch
#: `old` is taken, it says so and waits for the test's word
HOLD_TRANSACTION = """#!/bin/sh
[ "$1" = prepared ] || exit 0
grep -q " refs/heads/old$" || exit 0
touch "{held}"
while [ ! -e "{go}" ]; do sleep 0.02; done
"""


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    isolate(monkeypatch)
    root = init_repo(tmp_path / "repo", {"src/app.py": "v1\n"})
    made, _ = ensure(root, settings_from_dict({}), "pt-1", "main")
    return made


def lingering_git(where: Path) -> subprocess.Popen[bytes]:
    """A git process that runs in `where` until its stdin is closed, once it runs there."""
    running = subprocess.Popen(
        ["git", "cat-file", "--batch"],
        cwd=where,
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        env={**os.environ, **GIT_ENV},
    )
    deadline = time.monotonic() + 30
    while running.pid not in git_processes_in([where]):  # forked, not yet git
        assert time.monotonic() < deadline, "git never started"
        time.sleep(0.01)
    return running


def test_sweeps_beside_git_commands_at_the_root_never_take_a_live_lock(ws: Workspace) -> None:
    """Two processes sweep the root's locks over and over while git commands at the root
    take and release them: none of those commands loses its lock (git then fails with
    "unable to write new index file"), however the sweeps' looks and the commands' starts
    and ends interleave."""
    common, stop = ws.root / ".git", ws.root.parent / "stop"
    at_root = subprocess.Popen(
        ["sh", "-c", GIT_AT_THE_ROOT, "sh", str(stop)],
        cwd=ws.root,
        env={**os.environ, **GIT_ENV},
        stderr=subprocess.PIPE,
        text=True,
    )
    args = [str(common), str(ws.root), str(ws.tree), str(stop)]
    sweepers = [
        subprocess.Popen([sys.executable, "-c", SWEEPER, *args], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    deadline = time.monotonic() + STRESS_SECONDS
    while at_root.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    stop.touch()
    sweeps = [int(s.communicate(timeout=60)[0]) for s in sweepers]
    _, said = at_root.communicate(timeout=60)
    assert at_root.returncode == 0, f"a git at the root lost its lock: {said.strip()}"
    assert min(sweeps) > 0
    assert int(git(ws.root, "rev-list", "--count", "HEAD")) > 10


def test_a_lock_a_git_holds_in_another_worktree_is_never_taken(
    ws: Workspace, tmp_path: Path
) -> None:
    """A person's git in a worktree of their own, outside the project, holds packed-refs.lock
    (a branch deletion waiting in its reference-transaction hook) while a checkpoint sweeps
    the locks it may need: the lock stays, and the person's git completes."""
    theirs = tmp_path / "their-worktree"
    git(ws.root, "worktree", "add", "-q", "-b", "theirs", str(theirs))
    git(ws.root, "branch", "old")
    held, go = tmp_path / "held", tmp_path / "go"
    hook = ws.root / ".git" / "hooks" / "reference-transaction"
    hook.parent.mkdir(exist_ok=True)
    hook.write_text(HOLD_TRANSACTION.format(held=held, go=go), encoding="utf-8")
    hook.chmod(0o755)
    deleting = subprocess.Popen(
        ["git", "branch", "-D", "old"],
        cwd=theirs,
        env={**os.environ, **GIT_ENV},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not held.exists():
            assert time.monotonic() < deadline and deleting.poll() is None, "never held"
            time.sleep(0.02)
        packed = ws.root / ".git" / "packed-refs.lock"
        assert packed.exists()
        (ws.tree / "src" / "app.py").write_text("v2\n")
        assert checkpoint(ws, "implement", {}) is not None  # it does not need that lock
        assert packed.exists()
    finally:
        go.touch()
    _, said = deleting.communicate(timeout=60)
    assert deleting.returncode == 0, said
    assert git(ws.root, "branch", "--list", "old") == ""


def test_a_stale_lock_is_removed_once_no_git_runs_in_the_repository(ws: Workspace) -> None:
    """A killed git's lock is removed when, after it was seen, an instant comes at which no
    git runs in any tree of the repository: one running elsewhere is waited for."""
    own = Path(git(ws.tree, "rev-parse", "--absolute-git-dir"))
    (own / "index.lock").write_text("")
    running = lingering_git(ws.root)
    ender = threading.Timer(0.5, running.communicate)
    ender.start()
    try:
        notes = clear_locks(ws.root / ".git", [own], ws.root, ws.tree, ws.branch, ws.ticket_id)
    finally:
        ender.join()
    assert running.returncode == 0
    assert notes == [
        f"removed {own / 'index.lock'}, left by a git process that is no longer running"
    ]
    assert not (own / "index.lock").exists()


@pytest.mark.parametrize("where", ["root", "worktree"])
def test_a_lock_is_left_while_a_git_runs_anywhere_in_the_repository(
    ws: Workspace, where: str
) -> None:
    """A git at the root may hold a worktree's own lock (`git worktree add` checks the tree
    out from there): while any git runs, no lock is removed, and git's own message says why
    the command cannot run."""
    own = Path(git(ws.tree, "rev-parse", "--absolute-git-dir"))
    (own / "index.lock").write_text("")
    common = ws.root / ".git"
    running = lingering_git(ws.root if where == "root" else ws.tree)
    try:
        notes = clear_stale_locks(common, ws.root, [own], tree=ws.tree, patience=0.3)
        assert notes == [] and (own / "index.lock").exists()
    finally:
        running.communicate()
    assert clear_stale_locks(common, ws.root, [own], tree=ws.tree, patience=0.3) != []
    assert not (own / "index.lock").exists()


def test_a_git_that_keeps_running_leaves_the_lock_and_git_says_so(ws: Workspace) -> None:
    own = Path(git(ws.tree, "rev-parse", "--absolute-git-dir"))
    (own / "index.lock").write_text("")
    (ws.tree / "src" / "app.py").write_text("v2\n")
    running = lingering_git(ws.tree)
    try:
        with pytest.raises(GitError, match=r"index\.lock': File exists"):
            checkpoint(ws, "implement", {})
        assert (own / "index.lock").exists()
    finally:
        running.communicate()
    assert checkpoint(ws, "implement", {}) is not None
    assert not (own / "index.lock").exists()
