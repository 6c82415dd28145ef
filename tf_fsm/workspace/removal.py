"""A ticket's worktree set down: its changes kept under a ref, then moved into the pool for
the next ticket (tf_fsm.workspace.pool) or removed; and what a `git worktree add` or a
removal cut off by a kill left, cleared so that it can run again (docs/workspaces.md).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from tf_fsm.errors import WorkspaceError
from tf_fsm.fs.atomic import fsync_dir, open_no_follow
from tf_fsm.fs.confine import check_within
from tf_fsm.workspace.agent_files import remove_entry
from tf_fsm.workspace.checkpoint import keep_uncommitted
from tf_fsm.workspace.git import Git
from tf_fsm.workspace.leftover import clear_leftover, foreign, only_mirror
from tf_fsm.workspace.locks import worktree_registry
from tf_fsm.workspace.model import Workspace
from tf_fsm.workspace.pool import Pool, claimed, entry_of, park, settle, slots
from tf_fsm.workspace.registry import entries, git_at_work, named, registers, settled


def clear(
    git: Git, common: Path, tree: Path, *, removing: bool, mirror: Path | None = None
) -> list[str]:
    """Undo what a `git worktree add` (or `remove`) cut off left at `tree`, so that it can run
    again, and (given the ticket's `mirror` path) a directory holding nothing but tf_fsm's
    copies of the ticket's files. A directory there that is not such a leftover is never
    touched: refused when making the worktree, noted when removing it."""
    registry = entries(common)
    ours = [e for e in registry if registers(e, tree)]
    strays = [e for e in registry if e.tree is None and e.locked is not None and named(e, tree)]
    notes = []
    cut_off = [e for e in ours if e.half_made or removing]
    if os.path.lexists(trash_of(tree)):
        remove_entry(trash_of(tree))
        notes.append(f"removed {trash_of(tree)}, a worktree half removed")
    if cut_off:
        remove_entry(tree)
        notes.append(f"removed {tree}, a worktree half made or half removed")
    elif ours and os.path.lexists(tree) and not only_mirror(tree, common, mirror):
        raise foreign(tree, "is registered as a worktree but has no valid .git file")
    if not git_at_work(git.cwd, tree):  # else another `worktree add` may be at work
        cut_off += strays
    for entry in cut_off:
        shutil.rmtree(entry.admin)
        notes.append(f"removed {entry.admin}, git's record of a worktree never finished")
    try:
        notes += clear_leftover(tree, common, mirror)
    except WorkspaceError:
        if not removing:
            raise
        notes.append(f"left {tree} alone: it is not a worktree of this repository")
    if any(e.tree is not None and not os.path.lexists(e.tree) for e in entries(common)):
        # an entry whose directory is gone holds its branch: `worktree add` refuses it
        git.run("worktree", "prune")
    return notes


def remove_tree(ws: Workspace, common: Path, pool: Pool | None) -> list[str]:
    """Set the ticket's worktree down: into `pool` when it has room, else removed."""
    entry = settled(ws.root, common, ws.tree)
    if entry is None:
        return clear(ws.root_git, common, ws.tree, removing=True)
    if claimed(entry.admin):  # taken from the pool, never checked out: none of its work there
        return _set_down(ws.tree, entry.admin, pool, kept=None)
    if entry.locked is not None:
        raise WorkspaceError(
            f"the worktree {ws.tree} is locked ({entry.locked.strip() or 'no reason given'}): "
            f"unlock it (git worktree unlock {ws.tree}) to remove it"
        )
    # The agent files copied from the root go first: no checkpoint or scan ever keeps a copy
    # (a run made again copies them again). The scan runs before every removal, clean or
    # not: a `git worktree remove` killed half way leaves tracked files deleted, which a
    # rerun could not tell from a person's deletions, so they are never left to tell apart.
    for copy in ws.copied:
        try:
            check_within(ws.tree / copy, ws.tree)
        except WorkspaceError:
            continue  # led out of the worktree by a link: the removal unlinks it, never follows it
        remove_entry(ws.tree / copy)
    kept = keep_uncommitted(ws, "removed-uncommitted")
    return _set_down(ws.tree, entry.admin, pool, kept=kept)


def discard_idle(pool: Pool, common: Path) -> list[str]:
    """Remove every worktree waiting in `pool` (git's record of it, then its files)."""
    with worktree_registry(common):
        notes = settle(common)
        for slot in slots(pool):
            admin = entry_of(slot)
            if admin is None:
                notes.append(f"left {slot} alone: git's registry does not name it")
                continue
            _discard(slot, admin)
            notes.append(f"removed the pooled worktree {slot}")
    return notes


def _set_down(tree: Path, admin: Path, pool: Pool | None, *, kept: str | None) -> list[str]:
    notes = [f"kept the uncommitted changes of {tree} under {kept}"] if kept else []
    slot = park(pool, tree, admin) if pool is not None else None
    if slot is not None:
        return [*notes, f"moved the worktree {tree} into the pool, for the next ticket: {slot}"]
    _discard(tree, admin)
    return [*notes, f"removed the worktree {tree}"]


def _discard(tree: Path, admin: Path) -> None:
    """Remove a worktree whose changes are kept: out of git's sight first, in one rename, then
    git's record of it, then its files. A `git worktree remove` killed half way left tracked
    files deleted in a tree git still knew, which a rerun could not tell from a person's
    deletions; killed anywhere here, the tree is either whole where it was (scanned again) or
    gone from it (its record and its files, under `trash_of`, are cleared by the rerun)."""
    trash = trash_of(tree)
    remove_entry(trash)  # what a removal killed before left
    tree.rename(trash)
    shutil.rmtree(admin)
    remove_entry(trash)


#: the mark beside a merged ticket's worktree (docs/workspaces.md, "Recovery"): its worktree
#: and branch go, then the journal records it; a run killed in between leaves no worktree or
#: branch by which the loop could find the ticket again, but it leaves this mark
REMOVAL_MARK = ".removed-"


def mark_removal(tree: Path, root: Path) -> None:
    """Mark that the merged ticket's workspace at `tree` is being removed, until `unmark_removal`
    (after the journal records it): durably, as git's ref deletion may outlive a power loss."""
    mark = _mark_of(tree)
    os.close(open_no_follow(mark, os.O_WRONLY | os.O_CREAT, within=root, operation="mark"))
    fsync_dir(mark.parent)


def unmark_removal(tree: Path) -> None:
    """The journal records the removal `mark_removal` marked: the mark goes."""
    _mark_of(tree).unlink(missing_ok=True)


def marked_removals(names: Iterable[str]) -> set[str]:
    """The ticket ids whose removal mark is among `names` (the worktrees directory's)."""
    return {n.removeprefix(REMOVAL_MARK) for n in names if n.startswith(REMOVAL_MARK)}


def _mark_of(tree: Path) -> Path:
    return tree.with_name(REMOVAL_MARK + tree.name)


def trash_of(tree: Path) -> Path:
    """Where a worktree being removed is moved first: beside it, under a name no ticket id can
    have (one starts with a letter, digit or `_`), which listings of the worktrees skip."""
    return tree.with_name(f".removing-{tree.name}")
