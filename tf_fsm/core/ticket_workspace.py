"""A ticket's git workspace as its journal records it (docs/workspaces.md, "What status,
diagram and --plan show"): no git process, and the one look at the disk (does the worktree
still exist) comes in as a callback."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from tf_fsm.core import workspace_events as wev
from tf_fsm.core.journal import Event
from tf_fsm.core.ticket_rules import attempt_events


def rebased_shas(events: Sequence[Event]) -> dict[str, str]:
    """Each commit the merge queue, or a retry's start on a moved base, rebased (MergeRebased,
    BranchRebased) -> the commit it is now, through every later rebase: the sha a checkpoint
    is shown by, on a branch."""
    became: dict[str, str] = {}
    for event in events:
        if isinstance(event, wev.MergeRebased | wev.BranchRebased):
            became = {old: event.checkpoints.get(new, new) for old, new in became.items()}
            became.update({old: new for old, new in event.checkpoints.items() if old not in became})
    return became


def workspace_of(
    events: Sequence[Event], attempt: int | None, exists: Callable[[str], bool]
) -> dict[str, Any] | None:
    """The ticket's git workspace as its journal records it, None when it never had one: its
    branch, base and worktree (`exists`: is that directory there), the checkpoints of attempt
    `attempt`, the merge commit of that attempt, the refs that keep work set aside."""
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
        "exists": exists(ready.path),
        "branchDeleted": removed,
        "checkpoints": [  # as they are now: the merge queue's rebase made new commits
            {"attempt": e.attempt, "phase": e.phase, "sha": now.get(e.sha, e.sha)}
            for e in mine
            if isinstance(e, wev.CheckpointCommitted)
        ],
        "merged": merges[-1] if merges else None,
        "setAside": list(dict.fromkeys(e.ref for e in events if isinstance(e, wev.WorkSetAside))),
    }
