"""`tf-fsm workspaces prune`: removes the branches and worktrees of tickets done with them
(closed or exhausted), or of the tickets named. It never drops anybody's work: a branch with
commits its base lacks and a worktree with uncommitted changes are kept unless --force, and with
--force they stay reachable under refs/tf/<id>/ (tf_fsm.workspace.worktree `remove` keeps
them)."""

from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.backends import open_store
from tf_fsm.views.workspaces import Entry, entry_workspace, no_repository, workspace_rows
from tf_fsm.workspace.model import (
    Workspace,
    branch_name,
    ticket_ref,
    worktree_path,
)

#: what `prune` says it did, per outcome
OUTCOMES = {
    "removed": "removed",
    "worktree_removed": "worktree removed, branch kept",
    "kept": "kept",
    "left_alone": "left alone",
    "failed": "FAILED",
}


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
    root: Path,
    settings: LoadedSettings,
    row: dict[str, Any],
    named: bool,
    force: bool,
    dry_run: bool,
) -> dict[str, Any]:
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
        "ticket": row["ticket"],
        "outcome": plan.outcome,
        "reason": plan.reason,
        "done": done,
        "dryRun": dry_run,
    }


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
        notes.append(
            f"would remove {row['path']} if it is empty or what a killed git left, "
            "else leave it (it is not a worktree)"
        )
    if plan.delete_branch:
        if plan.unmerged:
            kept = ticket_ref(ticket, "removed-branch")
            notes.append(f"would keep the tip of {row['branch']} under {kept}")
        notes.append(f"would delete the branch {row['branch']}")
    return notes


def _carry_out(root: Path, settings: LoadedSettings, row: dict[str, Any], plan: _Plan) -> list[str]:
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
            store.append_event(
                WorkspaceRemoved(
                    ts=timestamp(datetime.now(UTC)),
                    ticket=ws.ticket_id,
                    attempt=None,
                    path=str(ws.tree),
                    branchDeleted=plan.delete_branch,
                )
            )
    return notes


def _row_workspace(root: Path, settings: LoadedSettings, row: dict[str, Any]) -> Workspace:
    entry = Entry(row["ticket"], Path(row["path"]), row["branch"], row["worktree"])
    return entry_workspace(root, settings, entry)[0]
