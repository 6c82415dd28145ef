"""git's worktree registry (`<common git dir>/worktrees/<name>/`, gitrepository-layout(5)),
read directly: what a `git worktree add` killed half-way leaves there (a `locked` file saying
"initializing", a `gitdir` file not yet written) is what tells a half-made worktree, which is
redone, from a directory of somebody's, which is never touched.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from tf_fsm.errors import WorkspaceError
from tf_fsm.workspace.agent_files import read_if_present
from tf_fsm.workspace.leftover import gitfile_target
from tf_fsm.workspace.locks import git_processes_in, registered_tree, running_git

#: the reason in the `locked` file git writes first and removes once the checkout is done
_HALF_MADE = "initializing"
#: how long a git still running in a half-made worktree is waited for
_GIT_GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class Entry:
    """One worktree of git's registry."""

    admin: Path  # <common git dir>/worktrees/<name>
    tree: Path | None  # the directory it registers; None before git wrote its `gitdir` file
    locked: str | None  # the reason in its `locked` file; None when it has none

    @property
    def half_made(self) -> bool:
        return self.locked is not None and self.locked.strip() == _HALF_MADE


def entries(common: Path) -> list[Entry]:
    """Every entry of the registry in the common git directory `common`, by name."""
    try:
        admins = sorted(p for p in (common / "worktrees").iterdir() if p.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [Entry(a, registered_tree(a), read_if_present(a / "locked")) for a in admins]


def registers(entry: Entry, tree: Path) -> bool:
    return entry.tree is not None and same(entry.tree, tree)


def ready(common: Path, tree: Path) -> Entry | None:
    """The registry's entry of a complete worktree at `tree`: registered, its checkout done
    (not locked "initializing"), its `.git` file pointing back at the entry."""
    target = gitfile_target(tree)
    if target is None:
        return None
    for entry in entries(common):
        if registers(entry, tree) and not entry.half_made and same(entry.admin, target):
            return entry
    return None


def settled(root: Path, common: Path, tree: Path) -> Entry | None:
    """`ready`, asked again once no git is at work on the tree any more (one a killed run
    left may be finishing it right now)."""
    entry = ready(common, tree)
    if entry is None:
        _no_git_running(root, tree)
        entry = ready(common, tree)
    return entry


def git_at_work(root: Path, tree: Path) -> list[int]:
    """git processes that may be making or removing `tree`: in it, or at the root (where
    `git worktree add` runs); those in the other worktrees beside it do not count."""
    running = running_git()
    elsewhere = set(git_processes_in([tree.parent], running))
    elsewhere -= set(git_processes_in([tree], running))
    return [pid for pid in git_processes_in([root, tree], running) if pid not in elsewhere]


def _no_git_running(root: Path, tree: Path) -> None:
    """A git a killed tf-fsm started may outlive it for a moment (the checkout `git worktree
    add` runs, or the whole command when tf-fsm died as it started it): it is given a few
    seconds to end before the half-made worktree is touched."""
    deadline = time.monotonic() + _GIT_GRACE_SECONDS
    while running := git_at_work(root, tree):
        if time.monotonic() < deadline:
            time.sleep(0.05)
            continue
        raise WorkspaceError(
            f"git is still running in {tree} (pid {', '.join(map(str, running))}); "
            "tf-fsm repairs the worktree once it ends: run again"
        )


def named(entry: Entry, tree: Path) -> bool:
    """Is `entry` named as git names a worktree at `tree` (its directory's name, a number
    added when taken)?"""
    name = entry.admin.name
    return name == tree.name or (name.startswith(tree.name) and name[len(tree.name) :].isdigit())


def same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)
