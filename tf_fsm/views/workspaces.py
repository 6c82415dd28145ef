"""`tf-fsm workspaces`: each ticket's git branch and worktree (docs/workspaces.md) and what
they hold (`tf-fsm workspaces prune` is tf_fsm.views.workspace_prune).

The listing costs few git processes: one `for-each-ref` for every branch, one `worktree list`,
and per workspace what `find` reads of it, one `rev-list` (ahead/behind its base) and one
`status` in its worktree.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.backends import open_store
from tf_fsm.storage.ticket_id import TICKET_ID_RE
from tf_fsm.workspace.git import Git, paths_of, pathspec_excluding
from tf_fsm.workspace.model import (
    Workspace,
    a_tickets,
    branch_name,
    worktrees_dir,
)

_HEADS = "refs/heads/"


@dataclass(frozen=True)
class Entry:
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
) -> list[Entry]:
    prefix = settings.settings.workspace.branchPrefix
    ids = {name.removeprefix(prefix) for name in heads if name.startswith(prefix)}
    folder = worktrees_dir(root, settings)
    if folder.is_dir():
        ids |= {
            p.name
            for p in folder.iterdir()
            if p.is_dir() and not p.is_symlink() and a_tickets(p.name)
        }
    here = Path(os.path.realpath(folder))
    ids |= {Path(p).name for p in registered if Path(p).parent == here and a_tickets(Path(p).name)}
    entries = []
    for ticket_id in sorted(i for i in ids if i):
        tree, branch = folder / ticket_id, prefix + ticket_id
        known = os.path.realpath(tree) in registered
        entries.append(Entry(ticket_id, tree, branch if branch in heads else None, known))
    return entries


def _row(
    root: Path, settings: LoadedSettings, entry: Entry, heads: dict[str, str]
) -> dict[str, Any]:
    ws, base = entry_workspace(root, settings, entry)
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


def entry_workspace(
    root: Path, settings: LoadedSettings, entry: Entry
) -> tuple[Workspace, str | None]:
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
        "--no-optional-locks",
        "status",
        "--porcelain",
        "-z",
        "--untracked-files=normal",
        "--",
        *pathspec_excluding(excluded(ws)),
    ).stdout
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
