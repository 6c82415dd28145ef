"""A ticket's git workspace as `tf-fsm status` shows it, read from the journal alone
(docs/workspaces.md, "What status, diagram and --plan show"): no git process."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tf_fsm.core import workspace_events as wev
from tf_fsm.core.journal import Event
from tf_fsm.engine.accounting import attempt_events


def rebased_shas(events: Sequence[Event]) -> dict[str, str]:
    """Each commit the merge queue, or a retry's start on a moved base, rebased (MergeRebased,
    BranchRebased) -> the commit it is now,
    through every later rebase: the sha a checkpoint is shown by, on a branch."""
    became: dict[str, str] = {}
    for event in events:
        if isinstance(event, wev.MergeRebased | wev.BranchRebased):
            became = {old: event.checkpoints.get(new, new) for old, new in became.items()}
            became.update({old: new for old, new in event.checkpoints.items() if old not in became})
    return became


def workspace_of(events: Sequence[Event], attempt: int | None) -> dict[str, Any] | None:
    """The ticket's git workspace as its journal records it (docs/workspaces.md), None when it
    never had one: its branch, base and worktree, the checkpoints of attempt `attempt`, the
    merge commit of that attempt, the refs that keep work set aside. Only the journal (already
    read) and one stat: `status` starts no git process."""
    ready, removed = None, False
    for event in events:  # the last time it was made or found, and whether it went since
        if isinstance(event, wev.WorkspaceReady):
            ready, removed = event, False
        elif isinstance(event, wev.WorkspaceRemoved):
            removed = removed or event.branchDeleted
    if ready is None:
        return None
    mine = attempt_events(events, attempt) if attempt is not None else []
    merges = [e.commit for e in mine if isinstance(e, wev.MergeCompleted)]
    now = rebased_shas(mine)
    return {
        "branch": ready.branch,
        "base": ready.base,
        "path": ready.path,
        "exists": Path(ready.path).is_dir(),
        "branchDeleted": removed,
        "checkpoints": [  # as they are now: the merge queue's rebase made new commits
            {"attempt": e.attempt, "phase": e.phase, "sha": now.get(e.sha, e.sha)}
            for e in mine
            if isinstance(e, wev.CheckpointCommitted)
        ],
        "merged": merges[-1] if merges else None,
        "setAside": list(dict.fromkeys(e.ref for e in events if isinstance(e, wev.WorkSetAside))),
    }


def workspace_line(ticket_id: str, ws: dict[str, Any], attempt: int | None) -> str:
    """`status`'s line on a ticket's workspace, from `workspace_of`."""
    points = ", ".join(f"{c['phase']} {c['sha'][:8]}" for c in ws["checkpoints"]) or "none"
    line = f"{ticket_id}: branch {ws['branch']} (base {ws['base']}) at {ws['path']}"
    if attempt is not None:
        line += f"; checkpoints of attempt {attempt}: {points}"
    if ws["merged"]:
        line += f"; merged into {ws['base']} as {ws['merged'][:8]}"
    if not ws["exists"]:
        line += "; worktree and branch removed" if ws["branchDeleted"] else "; worktree removed"
    if ws["setAside"]:
        line += f"; work set aside under {', '.join(ws['setAside'])}"
    return line
