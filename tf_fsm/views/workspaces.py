"""`tf-fsm workspaces`: each ticket's git branch and worktree (docs/workspaces.md) and what
they hold, and `tf-fsm workspaces prune`, which removes those of tickets done with them.

The listing costs few git processes: one `for-each-ref` for every branch, one `worktree list`,
and per workspace what `find` reads of it, one `rev-list` (ahead/behind its base) and one
`status` in its worktree. Prune never drops anybody's work: a branch with commits its base
lacks and a worktree with uncommitted changes are kept unless --force, and with --force they
stay reachable under refs/tf/<id>/ (tf_fsm.workspace.worktree `remove` keeps them).
"""

from __future__ import annotations

import os
import stat
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.backends import open_store
from tf_fsm.storage.ticket_id import TICKET_ID_RE
from tf_fsm.workspace.git import Git, paths_of, pathspec_excluding
from tf_fsm.workspace.model import (
    Workspace,
    branch_name,
    ticket_ref,
    worktree_path,
    worktrees_dir,
)

_HEADS = "refs/heads/"
#: what `prune` says it did, per outcome
OUTCOMES = {
    "removed": "removed",
    "worktree_removed": "worktree removed, branch kept",
    "kept": "kept",
    "left_alone": "left alone",
    "failed": "FAILED",
}


@dataclass(frozen=True)
class _Entry:
    """One ticket's workspace as git and the disk have it."""

    ticket_id: str
    tree: Path
    branch: str | None  # None: there is no such branch
    registered: bool  # git's worktree list has the tree


# -- the listing -----------------------------------------------------------------------------


def no_repository(root: Path) -> str | None:
    """Why no ticket of the project at `root` can have a workspace (it is not the top of a git
    working tree), or None."""
    from tf_fsm.workspace.git import repository_root

    top = repository_root(root)
    if top is None:
        return f"{root} is not in a git repository"
    if top.resolve() != root.resolve():
        return f"{root} is inside the git working tree {top}, not at its top"
    return None


def workspace_rows(root: Path, settings: LoadedSettings) -> list[dict[str, Any]] | None:
    """One row per ticket workspace (a branch `workspace.branchPrefix<id>`, a directory under
    the worktrees directory, or both), by ticket id; None when the project is not the top of
    a git working tree (`no_repository`)."""
    if no_repository(root) is not None:
        return None
    git = Git(root)
    heads = _heads(git)
    registered = _registered(git)
    return [_row(root, settings, e, heads) for e in _entries(root, settings, heads, registered)]


def _heads(git: Git) -> dict[str, str]:
    """Every local branch -> its tip, in one git process."""
    out = git.out("for-each-ref", "--format=%(refname)%00%(objectname)", _HEADS)
    pairs = (line.split("\0") for line in out.splitlines())
    return {ref.removeprefix(_HEADS): sha for ref, sha in pairs}


def _registered(git: Git) -> set[str]:
    """The real paths of the repository's worktrees (`git worktree list`, one process)."""
    out = git.run("worktree", "list", "--porcelain", "-z").stdout
    return {os.path.realpath(f[9:]) for f in paths_of(out) if f.startswith("worktree ")}


def _entries(
    root: Path, settings: LoadedSettings, heads: dict[str, str], registered: set[str]
) -> list[_Entry]:
    prefix = settings.settings.workspace.branchPrefix
    ids = {name.removeprefix(prefix) for name in heads if name.startswith(prefix)}
    folder = worktrees_dir(root, settings)
    if folder.is_dir():
        ids |= {p.name for p in folder.iterdir() if p.is_dir() and not p.is_symlink()}
    ids |= {Path(p).name for p in registered if Path(p).parent == Path(os.path.realpath(folder))}
    entries = []
    for ticket_id in sorted(i for i in ids if i):
        tree, branch = folder / ticket_id, prefix + ticket_id
        known = os.path.realpath(tree) in registered
        entries.append(_Entry(ticket_id, tree, branch if branch in heads else None, known))
    return entries


def _row(
    root: Path, settings: LoadedSettings, entry: _Entry, heads: dict[str, str]
) -> dict[str, Any]:
    ws, base = _workspace(root, settings, entry)
    ahead, behind = _ahead_behind(ws.root_git, heads, entry.branch, base)
    changes = _changes(ws) if entry.registered and entry.tree.is_dir() else None
    state, locked, prunable = _ticket_state(root, settings, entry.ticket_id)
    return {
        "ticket": entry.ticket_id,
        "branch": entry.branch,
        "base": base,
        "path": str(entry.tree),
        "worktree": entry.registered and entry.tree.is_dir(),
        "ahead": ahead,
        "behind": behind,
        "dirty": None if changes is None else bool(changes),
        "changes": changes,
        "state": state,
        "lockedBy": locked,
        "prunable": prunable and not locked,
        "size": disk_usage(entry.tree),
    }


def _workspace(root: Path, settings: LoadedSettings, entry: _Entry) -> tuple[Workspace, str | None]:
    """The entry as a Workspace (what `find` reads: its base, the agent files copied into it)
    and its base branch; None for a directory without a branch, or a base that cannot be told
    (no record, and the root on a detached HEAD)."""
    from tf_fsm.errors import WorkspaceError
    from tf_fsm.workspace.worktree import find

    bare = Workspace(entry.ticket_id, root, entry.tree, branch_name(settings, entry.ticket_id), "")
    if entry.branch is None or not TICKET_ID_RE.fullmatch(entry.ticket_id):
        return bare, None
    try:
        found = find(root, settings, entry.ticket_id)
    except WorkspaceError:
        return bare, None
    return (found, found.base_branch) if found is not None else (bare, None)


def _ahead_behind(
    git: Git, heads: dict[str, str], branch: str | None, base: str | None
) -> tuple[int | None, int | None]:
    """Commits of the branch its base lacks, and of the base the branch lacks."""
    if branch is None or base is None or base not in heads:
        return None, None
    out = git.out("rev-list", "--left-right", "--count", f"{heads[base]}...{heads[branch]}")
    behind, ahead = (int(n) for n in out.split())
    return ahead, behind


def _changes(ws: Workspace) -> int:
    """How many paths of the worktree have uncommitted changes (untracked files too), tf_fsm's
    own and ignored files left out; optional locks off, so a run at work there never meets
    this command's index lock."""
    from tf_fsm.workspace.checkpoint import excluded

    out = ws.git.run(
        "--no-optional-locks", "status", "--porcelain", "-z", "--untracked-files=normal",
        "--", *pathspec_excluding(excluded(ws)),
    ).stdout  # fmt: skip
    items, count, skip = paths_of(out), 0, False
    for item in items:
        if skip:  # the old name of a rename or copy
            skip = False
            continue
        count += 1
        skip = item[:1] in ("R", "C")
    return count


def _ticket_state(root: Path, settings: LoadedSettings, ticket_id: str) -> tuple[str, int, bool]:
    """(the ticket's state in words, the pid holding its lock or 0, whether no attempt will run
    on it any more: closed, exhausted, never run, or its ticket file gone)."""
    from tf_fsm.errors import CorruptStateError
    from tf_fsm.tk.tickets import ticket_path
    from tf_fsm.views.status import DONE_WITH, state_words, ticket_view

    if not TICKET_ID_RE.fullmatch(ticket_id):
        return "not a ticket id", 0, False
    store = open_store(root, settings, ticket_id)
    locked = store.lock_holder() or 0
    try:
        view = ticket_view(root, settings, ticket_id, store)
        words = state_words(view.state, view.status, view.failure_class, view.skip)
    except CorruptStateError:
        return "corrupt (see tf-fsm status)", locked, False
    if not ticket_path(root, ticket_id).is_file():
        return f"{words}, no ticket file", locked, True
    return words, locked, words in (*DONE_WITH, "no ticket state")


def disk_usage(path: Path) -> int:
    """The bytes `path` takes on disk (allocated blocks), symlinks not followed, a file with
    several hard links counted once; 0 when it does not exist."""
    total, stack, seen = 0, [path], set[tuple[int, int]]()
    while stack:
        current = stack.pop()
        try:
            info = current.lstat()
            if stat.S_ISDIR(info.st_mode):
                stack.extend(current.iterdir())
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if info.st_nlink < 2 or (info.st_dev, info.st_ino) not in seen:
            seen.add((info.st_dev, info.st_ino))
            total += getattr(info, "st_blocks", 0) * 512 or info.st_size
    return total


def human_size(size: int) -> str:
    """Bytes in binary units, as `du -h` shows them."""
    value, units = float(size), ["B", "KiB", "MiB", "GiB", "TiB"]
    while value >= 1024 and len(units) > 1:
        value, units = value / 1024, units[1:]
    return f"{size} B" if units[0] == "B" else f"{value:.1f} {units[0]}"


# -- prune -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Plan:
    """What prune does to one workspace."""

    outcome: str  # a key of OUTCOMES
    reason: str
    remove_tree: bool = False
    delete_branch: bool = False
    force: bool = False
    unmerged: bool = False  # the branch holds commits its base lacks (kept under a ref)


def prune(
    root: Path, settings: LoadedSettings, names: list[str], *, force: bool, dry_run: bool
) -> list[dict[str, Any]] | None:
    """Remove the workspaces of closed and abandoned tickets, or of the tickets `names`; one
    result per workspace considered, None outside a git repository. A named ticket without a
    workspace is refused (exit 2), one a running tf-fsm holds too (exit 75), before anything
    is removed."""
    from tf_fsm.errors import WorkspaceError

    listed = workspace_rows(root, settings)
    if listed is None and not names:
        return None
    rows = {r["ticket"]: r for r in listed or []}
    missing = [n for n in names if n not in rows]
    if missing:
        where = f"; {no_repository(root)}" if listed is None else ""
        raise WorkspaceError(
            f"{', '.join(missing)}: no workspace (no branch "
            f"{branch_name(settings, missing[0])}, no directory "
            f"{worktree_path(root, settings, missing[0])}){where}; `tf-fsm workspaces` lists them"
        )
    for name in names:
        if rows[name]["lockedBy"]:
            with open_store(root, settings, name).lock(note="tf-fsm workspaces prune"):
                pass  # raises TicketLockedError, naming the holder, unless it just ended
    chosen = [rows[n] for n in dict.fromkeys(names)] if names else list(rows.values())
    return [_prune_one(root, settings, row, bool(names), force, dry_run) for row in chosen]


def _prune_one(
    root: Path, settings: LoadedSettings, row: dict[str, Any], named: bool, force: bool,
    dry_run: bool,
) -> dict[str, Any]:  # fmt: skip
    from tf_fsm.errors import GitError, TicketLockedError, WorkspaceError

    plan = _plan(root, settings, row, named, force)
    done: list[str] = []
    if plan.remove_tree or plan.delete_branch:
        try:
            done = _would(row, plan) if dry_run else _carry_out(root, settings, row, plan)
        except TicketLockedError as exc:  # a run took the ticket meanwhile
            plan = _Plan("left_alone", exc.message)
        except (WorkspaceError, GitError) as exc:
            plan = _Plan("failed", exc.message)
    return {
        "ticket": row["ticket"], "outcome": plan.outcome, "reason": plan.reason, "done": done,
        "dryRun": dry_run,
    }  # fmt: skip


def _plan(
    root: Path, settings: LoadedSettings, row: dict[str, Any], named: bool, force: bool
) -> _Plan:
    ticket, state, branch = row["ticket"], row["state"], row["branch"]
    if row["lockedBy"]:
        return _Plan("left_alone", f"{state}; locked by pid {row['lockedBy']} (a tf-fsm run)")
    if not row["prunable"]:
        if not (named and force):
            how = f"`tf-fsm workspaces prune {ticket} --force` removes it"
            return _Plan("left_alone", f"{state}: its work may go on; {how}")
        state += ", named with --force"
    if row["dirty"] and not force:
        kept = ticket_ref(ticket, "removed-uncommitted")
        why = f"{state}; the worktree has uncommitted changes ({row['changes']} paths): commit "
        return _Plan("kept", f"{why}them, or --force removes it (they are kept under {kept})")
    if branch is None:
        return _Plan("removed", f"{state}; no branch", remove_tree=True, force=force)
    if not _unmerged(root, settings, row):
        return _Plan("removed", state, remove_tree=True, delete_branch=True, force=force)
    if force:
        return _Plan("removed", f"{state}; --force", True, True, force=True, unmerged=True)
    commits = "commits" if row["ahead"] != 1 else "commit"
    why = (
        f"{state}; {branch} has {row['ahead'] if row['ahead'] is not None else 'its'} {commits} "
        f"not in {row['base'] or 'its base branch'}: merge them, or --force deletes the branch "
        f"(its tip kept under {ticket_ref(ticket, 'removed-branch')})"
    )
    if os.path.lexists(row["path"]):
        return _Plan("worktree_removed", why, remove_tree=True)
    return _Plan("kept", why)


def _unmerged(root: Path, settings: LoadedSettings, row: dict[str, Any]) -> bool:
    """Does the branch hold commits its base branch does not (merged, squashed or rebased
    in counts as held: the merge names the tip it took)? True when that cannot be told."""
    from tf_fsm.errors import WorkspaceError
    from tf_fsm.workspace.merge import merged_commit

    if row["ahead"] is None:
        return True
    if row["ahead"] == 0:
        return False
    try:
        return merged_commit(_row_workspace(root, settings, row)) is None
    except WorkspaceError:
        return True


def _would(row: dict[str, Any], plan: _Plan) -> list[str]:
    """`--dry-run`: what `_carry_out` would do, in its words."""
    ticket, notes = row["ticket"], []
    if row["worktree"]:
        if row["dirty"]:
            kept = ticket_ref(ticket, "removed-uncommitted")
            notes.append(f"would keep the uncommitted changes of {row['path']} under {kept}")
        notes.append(f"would remove the worktree {row['path']}")
    elif os.path.lexists(row["path"]):
        notes.append(f"would remove {row['path']} if it is empty or what a killed git left, "
                     "else leave it (it is not a worktree)")  # fmt: skip
    if plan.delete_branch:
        if plan.unmerged:
            kept = ticket_ref(ticket, "removed-branch")
            notes.append(f"would keep the tip of {row['branch']} under {kept}")
        notes.append(f"would delete the branch {row['branch']}")
    return notes


def _carry_out(
    root: Path, settings: LoadedSettings, row: dict[str, Any], plan: _Plan
) -> list[str]:
    """Remove the workspace under the ticket's lock (no run may start in it meanwhile), and
    journal it as a run does (WorkspaceRemoved); notes on what was done."""
    from datetime import UTC, datetime

    from tf_fsm.core.journal import timestamp
    from tf_fsm.core.workspace_events import WorkspaceRemoved
    from tf_fsm.engine.reset import has_records
    from tf_fsm.workspace.worktree import remove

    store = open_store(root, settings, row["ticket"])
    held: AbstractContextManager[None] = (
        store.lock(note="tf-fsm workspaces prune") if has_records(store) else nullcontext()
    )
    with held:
        ws = _row_workspace(root, settings, row)
        notes = remove(ws, delete_branch=plan.delete_branch, force=plan.force)
        if store.journal_size() is not None:
            store.append_event(WorkspaceRemoved(
                ts=timestamp(datetime.now(UTC)), ticket=ws.ticket_id, attempt=None,
                path=str(ws.tree), branchDeleted=plan.delete_branch,
            ))  # fmt: skip
    return notes


def _row_workspace(root: Path, settings: LoadedSettings, row: dict[str, Any]) -> Workspace:
    entry = _Entry(row["ticket"], Path(row["path"]), row["branch"], row["worktree"])
    return _workspace(root, settings, entry)[0]
