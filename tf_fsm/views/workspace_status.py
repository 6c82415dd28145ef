"""A ticket's git workspace as `tf-fsm status` shows it, read from the journal alone
(docs/workspaces.md, "What status, diagram and --plan show"): no git process."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tf_fsm.core.journal import Event
from tf_fsm.core.ticket_workspace import workspace_of as core_workspace_of


def workspace_of(events: Sequence[Event], attempt: int | None) -> dict[str, Any] | None:
    """`tf_fsm.core.ticket_workspace.workspace_of`, with the one stat it asks for."""
    return core_workspace_of(events, attempt, lambda path: Path(path).is_dir())


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
