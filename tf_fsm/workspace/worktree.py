"""A ticket's branch and worktree: made from the base branch's tip (or taken from the pool of
finished tickets' worktrees), found again, repaired after a crash at any instant, set down
(docs/workspaces.md). git's registry is read by tf_fsm.workspace.registry; what a kill left
is cleared by tf_fsm.workspace.removal.
"""

from __future__ import annotations

from pathlib import Path

from tf_fsm.errors import GitError, WorkspaceError
from tf_fsm.settings.load import LoadedSettings, knowledge_dir
from tf_fsm.workspace.agent_files import (
    Record,
    agent_entries,
    agent_files,
    present_untracked,
    read_record,
)
from tf_fsm.workspace.checkpoint import clear_locks, on_branch, save_ref
from tf_fsm.workspace.git import (
    Git,
    rebase_in_progress,
    remember_worktree,
    require_repository,
    said,
)
from tf_fsm.workspace.locks import worktree_registry
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
from tf_fsm.workspace.pool import Pool, claimed, finish_claim, pool_of, settle, take
from tf_fsm.workspace.registry import entries, ready, registers, settled
from tf_fsm.workspace.removal import clear, remove_tree


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
    entry = ready(git.common_dir(), tree)
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
    """The ticket's workspace, made from `base` if needed (in a worktree taken from the pool
    when one waits there), and one-line notes on what was made or repaired. Any state a crash
    inside it leaves is completed by the next call; a worktree removed by hand is made again
    from the ticket's branch, at its tip."""
    git = require_repository(root, "ticket workspaces")
    common = git.common_dir()
    tree = worktree_path(root, settings, ticket_id)
    branch = branch_name(settings, ticket_id)
    check_directory(git, root, worktrees_dir(root, settings))
    mirror = ticket_dir_in(tree, root, knowledge_dir(root, settings) / "tickets" / ticket_id)
    pool = pool_of(root, settings)
    with worktree_registry(common):
        notes = _repair(common, root, tree, branch, ticket_id)
        entry = settled(root, common, tree)
        made = entry is None or claimed(entry.admin)
        if entry is None:
            notes += ensure_ignored(git, common, root, settings)
            notes += clear(git, common, tree, removing=False, mirror=mirror)
            notes += _take(pool, tree, branch) or _add(git, tree, branch, base)
            entry = ready(common, tree)
            if entry is None:  # git said it made it: its registry says otherwise
                raise WorkspaceError(f"git worktree add did not register {tree}")
        else:
            notes += ensure_ignored(git, common, root, settings)
        if claimed(entry.admin):
            notes += _check_out(git, pool, tree, entry.admin, branch, base)
        elif not made:
            notes += _ensure_branch(git, branch, base)
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
    return ready(common, tree) is not None


def remove(
    ws: Workspace, *, delete_branch: bool, force: bool = False, pool: Pool | None = None
) -> list[str]:
    """Set the ticket's worktree down (its uncommitted changes kept under a ref first): into
    `pool` when it has room, for the next ticket, else removed; and, with `delete_branch`,
    delete its branch: only when the base branch holds its commits, unless `force` (the tip is
    then kept under `refs/tf/<id>/removed-branch`). Notes on what was done."""
    git = ws.root_git
    own, common = git.dirs()
    tip = git.rev(f"refs/heads/{ws.branch}") if delete_branch else None
    merged = tip is not None and _merged(git, tip, ws.base_branch)
    if tip is not None:
        _check_deletable(ws, git, own, merged=merged, force=force)
    with worktree_registry(common):
        notes = _repair(common, ws.root, ws.tree, ws.branch, ws.ticket_id)
        notes += remove_tree(ws, common, pool)
    if tip is not None:
        if not merged:
            kept = save_ref(ws, "removed-branch", tip)
            notes.append(f"kept the tip of {ws.branch} under {kept}")
        git.run("update-ref", "-m", "tf-fsm: remove", "-d", f"refs/heads/{ws.branch}", tip)
        notes.append(f"deleted the branch {ws.branch} (it was at {tip[:12]})")
    return notes


def _repair(common: Path, root: Path, tree: Path, branch: str, ticket_id: str) -> list[str]:
    """What a killed tf-fsm or git left in the way of making or removing the worktree at
    `tree` (under the registry's lock): a pool move cut short, finished; git's stale locks
    on the worktree's entry and the ticket's refs, removed."""
    notes = settle(common)
    admins = [e.admin for e in entries(common) if registers(e, tree)]
    return notes + clear_locks(common, admins, root, tree, branch, ticket_id)


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


def _take(pool: Pool, tree: Path, branch: str) -> list[str]:
    """A worktree from the pool moved to `tree` for the branch (its checkout is `_check_out`);
    no note when none waits there."""
    admin = take(pool, tree)
    if admin is None:
        return []
    return [f"took a worktree from the pool for {branch}: {tree}"]


def _check_out(git: Git, pool: Pool, tree: Path, admin: Path, branch: str, base: str) -> list[str]:
    """The branch checked out in the worktree taken from the pool, made from the base's tip
    when it does not exist yet, nothing of the previous ticket's files left."""
    tip = git.rev(f"refs/heads/{base}")
    if tip is not None and finish_claim(pool, tree, admin, branch, tip):
        return [f"made the branch {branch} from {base} at {tip[:12]}"]
    if git.rev(f"refs/heads/{branch}") is None:  # refused for want of a base: none to make it
        raise _no_base(git, branch, base)
    finish_claim(pool, tree, admin, branch, None)  # never reset: it holds the ticket's commits
    return [f"checked out the branch {branch} at its tip in the pooled worktree"]


def _check_branch(tree: Path, admin: Path, branch: str) -> None:
    if on_branch(Git(tree), admin, branch):
        return
    if rebase_in_progress(admin):
        return  # the branch's rebase detaches HEAD until it ends (or is aborted)
    raise WorkspaceError(
        f"the worktree {tree} does not have the branch {branch} checked out: check it out "
        f"there (git -C {tree} switch {branch}) and run again"
    )


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
