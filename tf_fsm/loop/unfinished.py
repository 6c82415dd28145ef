"""Tickets the loop must finish although tk calls them closed.

In a workspace, the merge commit that puts a ticket on the base branch also closes its tk
file, and the run records the merge just after (docs/workspaces.md). A run killed in between
leaves a ticket tk calls closed with its attempt still open, and its worktree, which is only
removed after the record. `tk ready` never lists it again, so the loop looks for it among
the worktrees and runs it once more: the merge is found, recorded, and the worktree removed.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tf_fsm.errors import InvalidTicketIdError, TfFsmError
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.store import TicketStore
from tf_fsm.tk import tickets
from tf_fsm.workspace.model import worktrees_dir


def unfinished_merges(
    root: Path, settings: LoadedSettings, stores: Callable[[str], TicketStore]
) -> list[str]:
    """The tickets with a worktree, an open attempt and a closed tk file, by id."""
    try:
        names = sorted(p.name for p in worktrees_dir(root, settings).iterdir() if p.is_dir())
    except OSError:
        return []  # no worktrees at all
    found = []
    for name in names:
        try:
            store = stores(name)
            state = store.load_retry_state()
            closed = tickets.read(root, name).status == "closed"
        except (InvalidTicketIdError, TfFsmError):
            continue  # not a ticket's worktree, or its files say why elsewhere (`status`)
        if closed and state is not None and state.has_open_attempt:
            found.append(name)
    return found
