"""The worktree pool: a finished ticket's worktree is kept, out of every ticket's sight, for
the next ticket, which checks its branch out there instead of checking the whole project out
again (docs/workspaces.md, "The pool").

A pooled worktree stays registered with git, under a name no ticket id can have
(`.pool-<n>`, beside the tickets' worktrees). Moving one (a ticket's worktree into the pool,
a pooled one to a ticket's path) rewrites the `gitdir` file of its entry in git's registry
and renames the directory: `git worktree move` would do the same in a process of its own.
The entry's `locked` file, git's own guard against `git worktree prune`, holds the move's
two paths while it happens, so that a move a kill cut short is finished by the next caller
(`settle`); the tree a ticket took keeps a `locked` file until its branch is checked out and
the previous ticket's files are gone (`finish_claim`), so that a kill in between is redone.
Every move happens under tf_fsm's lock on git's registry (tf_fsm.workspace.locks), so two
workers never take the same worktree.
"""

from __future__ import annotations

import itertools
import os
import re
from dataclasses import dataclass
from pathlib import Path

from tf_fsm.errors import GitError, WorkspaceError
from tf_fsm.fs.atomic import atomic_write_text
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.workspace.agent_files import read_if_present
from tf_fsm.workspace.git import Git, said
from tf_fsm.workspace.leftover import gitfile_target
from tf_fsm.workspace.locks import registered_tree
from tf_fsm.workspace.model import worktrees_dir
from tf_fsm.workspace.registry import entries

#: the name a pooled worktree's directory starts with (a ticket id starts with a letter,
#: digit or `_`, so no ticket's worktree is ever named so)
POOL_PREFIX = ".pool-"
#: the first line of the `locked` file of a worktree being moved, its two paths after it
_MOVING = "tf-fsm: moving"
#: the `locked` file of a pooled worktree a ticket took, until it is ready for the ticket
_CLAIMED = "tf-fsm: claimed for a ticket, not yet checked out\n"


@dataclass(frozen=True)
class Pool:
    """Where the pooled worktrees are, how many may wait there, and what of a finished
    ticket's files they keep for the next one (`workspace.poolKeep`)."""

    directory: Path
    size: int
    keep: tuple[str, ...] = ()


def pool_of(root: Path, settings: LoadedSettings, *, workers: int = 1) -> Pool:
    """The pool of the project at `root`: `workspace.poolSize` worktrees at most; when it is
    not set, as many as the workers of the run's loop (`workers`, `ralph --workers`), or
    `ralph.parallelWorkers` when that is more."""
    section = settings.settings.workspace
    size = section.poolSize
    if size is None:
        size = max(workers, settings.settings.ralph.parallelWorkers)
    return Pool(worktrees_dir(root, settings), size, tuple(section.poolKeep))


def idle(pool: Pool) -> list[Path]:
    """The pooled worktrees waiting for a ticket (their directories), by name: those git's
    registry names (`slots` has every directory of the pool's)."""
    return [slot for slot in slots(pool) if entry_of(slot) is not None]


def slots(pool: Pool) -> list[Path]:
    """Every directory named as a pooled worktree, whole or not, by name."""
    try:
        return sorted(p for p in pool.directory.iterdir() if p.name.startswith(POOL_PREFIX))
    except (FileNotFoundError, NotADirectoryError):
        return []


def entry_of(slot: Path) -> Path | None:
    """The entry of git's registry the pooled worktree `slot` belongs to, when its `.git` file
    names one that registers it."""
    admin = gitfile_target(slot)
    if admin is None or registered_tree(admin) != Path(os.path.realpath(slot)):
        return None
    return admin


def park(pool: Pool, tree: Path, admin: Path) -> Path | None:
    """Move the worktree at `tree` (registered as `admin`; whatever it held that its branch
    lacks kept already) into the pool, its HEAD detached so that its branch can be deleted or
    checked out elsewhere. Its directory in the pool, or None when the pool is full."""
    if len(idle(pool)) >= pool.size:
        return None
    slot = next(
        path
        for n in itertools.count(1)
        if not os.path.lexists(path := pool.directory / f"{POOL_PREFIX}{n}")
    )
    tip = Git(tree).rev("HEAD")
    if tip is not None:  # git's own format of a detached HEAD (gitrepository-layout(5))
        atomic_write_text(admin / "HEAD", f"{tip}\n", within=admin, durable=False)
    _move(admin, tree, slot)
    return slot


def take(pool: Pool, tree: Path) -> Path | None:
    """Move a pooled worktree to `tree`, claimed (see `finish_claim`): its entry in git's
    registry, or None when no pooled worktree waits."""
    for slot in slots(pool):
        admin = entry_of(slot)
        if admin is not None:
            _move(admin, slot, tree, claim=True)
            return admin
    return None


def claimed(admin: Path) -> bool:
    """Did a ticket take this worktree from the pool, and its checkout is not done yet?"""
    return read_if_present(admin / "locked") == _CLAIMED


def finish_claim(pool: Pool, tree: Path, admin: Path, branch: str, start: str | None) -> bool:
    """Make the worktree a ticket took from the pool as a new one would be: the branch made at
    `start` and checked out (or, `start` None, the branch as it is), every file the previous
    ticket left that the branch does not hold removed, ignored ones too, except
    `pool.keep`'s. False, and nothing done, when `start` is given and the branch exists (git
    refuses to make it: it is checked out as it is, `start` None, by the caller)."""
    git = Git(tree)
    if start is None:
        git.run("checkout", "--force", "--quiet", branch)
    else:
        args = ("checkout", "--force", "--quiet", "-b", branch, start)
        made = git.run(*args, check=False)
        if made.exit_code != 0:
            if git.rev(f"refs/heads/{branch}") is None:  # refused for another reason: git's
                raise GitError(args, tree, made.exit_code, said(made))
            return False
    # `--exclude` takes an ignore pattern: each kept path as one, its wildcards taken literally
    kept = ["/" + re.sub(r"([\\*?\[!])", r"\\\1", path.strip("/")) for path in pool.keep]
    git.run("clean", "-ffdxq", *(f"--exclude={pattern}" for pattern in kept))
    (admin / "locked").unlink()
    return True


def settle(common: Path) -> list[str]:
    """Finish the moves a kill cut short (their entry's `locked` file names them), and say so."""
    notes = []
    for entry in entries(common):
        lines = (entry.locked or "").split("\n")
        if lines[0] == _MOVING and len(lines) >= 3:
            source, target = Path(lines[1]), Path(lines[2])
            _finish_move(entry.admin, source, target, claim=lines[3:4] == ["claimed"])
            notes.append(f"finished moving the worktree {source} to {target}")
    return notes


def _move(admin: Path, source: Path, target: Path, *, claim: bool = False) -> None:
    """Register the worktree at `source` as at `target`, then move it there; `claim`: taken
    for a ticket (its entry stays locked until `finish_claim`)."""
    if "\n" in f"{source}{target}":
        raise WorkspaceError(f"a worktree path with a line break cannot be moved: {source}")
    record = "\n".join([_MOVING, str(source), str(target), *(["claimed"] if claim else [])])
    # the one write made durable: after a power loss, it is what lets `settle` redo the rest
    atomic_write_text(admin / "locked", record + "\n", within=admin)
    _finish_move(admin, source, target, claim=claim)


def _finish_move(admin: Path, source: Path, target: Path, *, claim: bool) -> None:
    atomic_write_text(admin / "gitdir", f"{target / '.git'}\n", within=admin, durable=False)
    if os.path.lexists(source):
        if os.path.lexists(target):
            raise WorkspaceError(
                f"cannot move the worktree {source} to {target}: {target} exists; move or "
                "remove it and run again"
            )
        source.rename(target)
    if claim:
        atomic_write_text(admin / "locked", _CLAIMED, within=admin, durable=False)
    else:
        (admin / "locked").unlink()
