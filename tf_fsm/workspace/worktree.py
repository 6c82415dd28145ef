"""A ticket's branch and worktree: made from the base branch's tip, found again, repaired
after a crash at any instant, removed (docs/workspaces.md).

git's own worktree registry (`<common git dir>/worktrees/<name>/`, gitrepository-layout(5)) is
read directly: what a `git worktree add` killed half-way leaves there (a `locked` file saying
"initializing", a `gitdir` file not yet written) is what tells a half-made worktree, which is
redone, from a directory of somebody's, which is never touched.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from tf_fsm.errors import GitError, WorkspaceError
from tf_fsm.fs.confine import check_within
from tf_fsm.settings.load import LoadedSettings, knowledge_dir
from tf_fsm.workspace.agent_files import (
    Record,
    agent_entries,
    agent_files,
    present_untracked,
    read_if_present,
    read_record,
    remove_entry,
)
from tf_fsm.workspace.checkpoint import clear_locks, keep_uncommitted, on_branch, save_ref
from tf_fsm.workspace.git import (
    Git,
    rebase_in_progress,
    remember_worktree,
    require_repository,
    said,
)
from tf_fsm.workspace.leftover import clear_leftover, foreign, gitfile_target, only_mirror
from tf_fsm.workspace.locks import git_processes_in, registered_tree, worktree_registry
from tf_fsm.workspace.loose_objects import loose_commit
from tf_fsm.workspace.merge import merge_of
from tf_fsm.workspace.model import (
    MERGED_TIP_TRAILER,
    Workspace,
    branch_name,
    ticket_dir_in,
    worktree_path,
    worktrees_dir,
)
from tf_fsm.workspace.place import check_directory, ensure_ignored

#: the reason in the `locked` file git writes first and removes once the checkout is done
_HALF_MADE = "initializing"
#: how long a git still running in a half-made worktree is waited for
_GIT_GRACE_SECONDS = 5.0


@dataclass(frozen=True)
class _Entry:
    """One worktree of git's registry."""

    admin: Path  # <common git dir>/worktrees/<name>
    tree: Path | None  # the directory it registers; None before git wrote its `gitdir` file
    locked: str | None  # the reason in its `locked` file; None when it has none

    @property
    def half_made(self) -> bool:
        return self.locked is not None and self.locked.strip() == _HALF_MADE


def base_branch(root: Path, settings: LoadedSettings) -> str:
    """`workspace.baseBranch` (a local branch), else the branch checked out at the root."""
    git = Git(root)
    configured = settings.settings.workspace.baseBranch
    if configured is not None:
        if git.rev(f"refs/heads/{configured}") is None:
            raise WorkspaceError(
                f"workspace.baseBranch is {configured!r}, but the repository at {root} has no "
                f"local branch {configured!r}: create it, or change workspace.baseBranch"
            )
        return configured
    checked_out = git.head_branch()
    if checked_out is None:
        raise WorkspaceError(
            f"the project root {root} has no branch checked out (a detached HEAD, or a branch "
            "with no commit yet): check out the branch tickets start from, or set "
            "workspace.baseBranch"
        )
    return checked_out


def find(root: Path, settings: LoadedSettings, ticket_id: str) -> Workspace | None:
    """The ticket's workspace when its branch exists (its worktree directory may not)."""
    git = Git(root)
    branch = branch_name(settings, ticket_id)
    if git.rev(f"refs/heads/{branch}") is None:
        return None
    tree = worktree_path(root, settings, ticket_id)
    entry = _ready(git.common_dir(), tree)
    record = read_record(entry.admin) if entry is not None else None
    if record is None:  # never recorded, or lost with the worktree: as a new one would be
        present = present_untracked(tree, agent_entries(settings)) if entry else ()
        record = Record(base_branch(root, settings), present)
    return Workspace(ticket_id, root, tree, branch, record.base, record.copied)


def base_of(root: Path, settings: LoadedSettings, ticket_id: str) -> tuple[Workspace | None, str]:
    """The ticket's workspace, if its branch exists, and the base branch it merges into: the
    one recorded with it, else today's (`base_branch`)."""
    found = find(root, settings, ticket_id)
    return found, found.base_branch if found else base_branch(root, settings)


def ensure(
    root: Path, settings: LoadedSettings, ticket_id: str, base: str
) -> tuple[Workspace, list[str]]:
    """The ticket's workspace, made from `base` if needed, and one-line notes on what was made
    or repaired. Any state a crash inside it leaves is completed by the next call; a worktree
    removed by hand is made again from the ticket's branch, at its tip."""
    git = require_repository(root, "ticket workspaces")
    common = git.common_dir()
    tree = worktree_path(root, settings, ticket_id)
    branch = branch_name(settings, ticket_id)
    check_directory(git, root, worktrees_dir(root, settings))
    mirror = ticket_dir_in(tree, root, knowledge_dir(root, settings) / "tickets" / ticket_id)
    with worktree_registry(common):
        admins = [e.admin for e in _registry(common) if _registers(e, tree)]
        notes = clear_locks(common, admins, root, tree, branch, ticket_id)
        entry = _settled(root, common, tree)
        made = entry is None
        if entry is None:
            notes += ensure_ignored(git, common, root, settings)
            notes += _clear(git, common, tree, removing=False, mirror=mirror)
            notes += _add(git, tree, branch, base)
            entry = _ready(common, tree)
            if entry is None:  # git said it made it: its registry says otherwise
                raise WorkspaceError(f"git worktree add did not register {tree}")
        else:
            notes += _ensure_branch(git, branch, base)
            notes += ensure_ignored(git, common, root, settings)
        remember_worktree(tree, entry.admin, common)
        if not made:
            _check_branch(tree, entry.admin, branch)
    record, copied = agent_files(root, settings, tree, entry.admin, base, made=made)
    if record.base != base:
        notes.append(f"{branch} was made from {record.base}, not {base}: it merges into it")
    return Workspace(ticket_id, root, tree, branch, record.base, record.copied), notes + copied


def intact(common: Path, tree: Path) -> bool:
    """Is the worktree at `tree` whole: registered in git's registry (in the common git
    directory `common`), its checkout done, its `.git` file naming its entry? Read from the
    registry's files, no git process: a run asks before everything it runs there."""
    return _ready(common, tree) is not None


def remove(ws: Workspace, *, delete_branch: bool, force: bool = False) -> list[str]:
    """Remove the ticket's worktree (its uncommitted changes kept under a ref first) and, with
    `delete_branch`, its branch: only when the base branch holds its commits, unless `force`
    (the tip is then kept under `refs/tf/<id>/removed-branch`). Notes on what was done."""
    git = ws.root_git
    own, common = git.dirs()
    tip = git.rev(f"refs/heads/{ws.branch}") if delete_branch else None
    merged = tip is not None and _merged(git, tip, ws.base_branch)
    if tip is not None:
        _check_deletable(ws, git, own, merged=merged, force=force)
    with worktree_registry(common):
        admins = [e.admin for e in _registry(common) if _registers(e, ws.tree)]
        notes = clear_locks(common, admins, ws.root, ws.tree, ws.branch, ws.ticket_id)
        notes += _remove_tree(ws, common)
    if tip is not None:
        if not merged:
            kept = save_ref(ws, "removed-branch", tip)
            notes.append(f"kept the tip of {ws.branch} under {kept}")
        git.run("update-ref", "-m", "tf-fsm: remove", "-d", f"refs/heads/{ws.branch}", tip)
        notes.append(f"deleted the branch {ws.branch} (it was at {tip[:12]})")
    return notes


# -- the branch ------------------------------------------------------------------------


def _add(git: Git, tree: Path, branch: str, base: str) -> list[str]:
    """`git worktree add` at `tree` for the ticket's branch, made from the base branch's tip
    by the same command when there is none yet (git refuses to make a branch that exists);
    else the worktree is made from the branch, at its tip."""
    tip = git.rev(f"refs/heads/{base}")
    if tip is not None:
        args = ("worktree", "add", "--quiet", "-b", branch, str(tree), tip)
        added = git.run(*args, check=False)
        if added.exit_code == 0:
            return [
                f"made the branch {branch} from {base} at {tip[:12]}",
                f"made the worktree {tree} for the branch {branch}",
            ]
        if git.rev(f"refs/heads/{branch}") is None:  # refused for another reason: git's own
            raise GitError(args, git.cwd, added.exit_code, said(added))
    elif git.rev(f"refs/heads/{branch}") is None:
        raise _no_base(git, branch, base)
    git.run("worktree", "add", "--quiet", str(tree), branch)
    tip = git.rev(f"refs/heads/{branch}") or ""
    return [f"made the worktree {tree} from the branch {branch} at {tip[:12]}, its last commit"]


def _ensure_branch(git: Git, branch: str, base: str) -> list[str]:
    if git.rev(f"refs/heads/{branch}") is not None:
        return []  # never reset: it holds the ticket's commits
    tip = git.rev(f"refs/heads/{base}")
    if tip is None:
        raise _no_base(git, branch, base)
    # "" as the old value: create only (update-ref writes no config, as `git branch` may)
    git.run("update-ref", "-m", f"tf-fsm: {branch} from {base}", f"refs/heads/{branch}", tip, "")
    return [f"made the branch {branch} from {base} at {tip[:12]}"]


def _no_base(git: Git, branch: str, base: str) -> WorkspaceError:
    return WorkspaceError(
        f"the base branch {base!r} does not exist in {git.cwd}, so {branch} cannot be made from it"
    )


# -- git's worktree registry ---------------------------------------------------------------


def _registry(common: Path) -> list[_Entry]:
    try:
        admins = sorted(p for p in (common / "worktrees").iterdir() if p.is_dir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    entries = []
    for admin in admins:
        entries.append(_Entry(admin, registered_tree(admin), read_if_present(admin / "locked")))
    return entries


def _registers(entry: _Entry, tree: Path) -> bool:
    return entry.tree is not None and _same(entry.tree, tree)


def _ready(common: Path, tree: Path) -> _Entry | None:
    """The registry's entry of a complete worktree at `tree`: registered, its checkout done
    (not locked "initializing"), its `.git` file pointing back at the entry."""
    target = gitfile_target(tree)
    if target is None:
        return None
    for entry in _registry(common):
        if _registers(entry, tree) and not entry.half_made and _same(entry.admin, target):
            return entry
    return None


def _settled(root: Path, common: Path, tree: Path) -> _Entry | None:
    """`_ready`, asked again once no git is at work on the tree any more (one a killed run
    left may be finishing it right now)."""
    entry = _ready(common, tree)
    if entry is None:
        _no_git_running(root, tree)
        entry = _ready(common, tree)
    return entry


def _check_branch(tree: Path, admin: Path, branch: str) -> None:
    if on_branch(Git(tree), admin, branch):
        return
    if rebase_in_progress(admin):
        return  # the branch's rebase detaches HEAD until it ends (or is aborted)
    raise WorkspaceError(
        f"the worktree {tree} does not have the branch {branch} checked out: check it out "
        f"there (git -C {tree} switch {branch}) and run again"
    )


# -- what a killed git left ----------------------------------------------------------------


def _clear(
    git: Git, common: Path, tree: Path, *, removing: bool, mirror: Path | None = None
) -> list[str]:
    """Undo what a `git worktree add` (or `remove`) cut off left at `tree`, so that it can run
    again, and (given the ticket's `mirror` path) a directory holding nothing but tf_fsm's
    copies of the ticket's files. A directory there that is not such a leftover is never
    touched: refused when making the worktree, noted when removing it."""
    entries = _registry(common)
    ours = [e for e in entries if _registers(e, tree)]
    strays = [e for e in entries if e.tree is None and e.locked is not None and _named(e, tree)]
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
    if not _git_at_work(git.cwd, tree):  # else another `worktree add` may be at work
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
    if any(e.tree is not None and not os.path.lexists(e.tree) for e in _registry(common)):
        # an entry whose directory is gone holds its branch: `worktree add` refuses it
        git.run("worktree", "prune")
    return notes


def _remove_tree(ws: Workspace, common: Path) -> list[str]:
    entry = _settled(ws.root, common, ws.tree)
    if entry is None:
        return _clear(ws.root_git, common, ws.tree, removing=True)
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
    _discard(ws.tree, entry.admin)
    notes = [f"kept the uncommitted changes of {ws.tree} under {kept}"] if kept else []
    return [*notes, f"removed the worktree {ws.tree}"]


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


def trash_of(tree: Path) -> Path:
    """Where a worktree being removed is moved first: beside it, under a name no ticket id can
    have (one starts with a letter, digit or `_`), which listings of the worktrees skip."""
    return tree.with_name(f".removing-{tree.name}")


def _check_deletable(ws: Workspace, git: Git, own: Path, *, merged: bool, force: bool) -> None:
    if on_branch(git, own, ws.branch):
        raise WorkspaceError(f"{ws.branch} is checked out at {ws.root}: it is not deleted")
    if not merged and not force:
        raise WorkspaceError(
            f"the branch {ws.branch} has commits that are not in {ws.base_branch}, so it is "
            "not deleted; `tf-fsm workspaces prune --force` removes it (its tip kept under "
            f"{ws.ref('removed-branch')})"
        )


def _merged(git: Git, tip: str, base: str) -> bool:
    """Does the base branch hold the branch's work: its tip, or a merge of it (a squash merge
    names the tip it merged in its trailer)? The merge queue's answer (merge_of). The commit
    the queue has just made is read from its loose object first: a child of the tip, or one
    whose trailer names it, answers without a git process."""
    base_tip = git.rev(f"refs/heads/{base}")
    if base_tip is None:
        return False
    made = loose_commit(git.common_dir(), base_tip) if base_tip != tip else None
    if made is not None and (
        tip in made.parents or f"{MERGED_TIP_TRAILER}: {tip}" in made.message.splitlines()
    ):
        return True
    return base_tip == tip or merge_of(git, tip, base_tip) is not None


def _git_at_work(root: Path, tree: Path) -> list[int]:
    """git processes that may be making or removing `tree`: in it, or at the root (where
    `git worktree add` runs); those in the other worktrees beside it do not count."""
    elsewhere = set(git_processes_in([tree.parent])) - set(git_processes_in([tree]))
    return [pid for pid in git_processes_in([root, tree]) if pid not in elsewhere]


def _no_git_running(root: Path, tree: Path) -> None:
    """A git a killed tf-fsm started may outlive it for a moment (the checkout `git worktree
    add` runs, or the whole command when tf-fsm died as it started it): it is given a few
    seconds to end before the half-made worktree is touched."""
    deadline = time.monotonic() + _GIT_GRACE_SECONDS
    while running := _git_at_work(root, tree):
        if time.monotonic() < deadline:
            time.sleep(0.05)
            continue
        raise WorkspaceError(
            f"git is still running in {tree} (pid {', '.join(map(str, running))}); "
            "tf-fsm repairs the worktree once it ends: run again"
        )


def _named(entry: _Entry, tree: Path) -> bool:
    """Is `entry` named as git names a worktree at `tree` (its directory's name, a number
    added when taken)?"""
    name = entry.admin.name
    return name == tree.name or (name.startswith(tree.name) and name[len(tree.name) :].isdigit())


def _same(a: Path, b: Path) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)
