"""The worktree pool as `tf-fsm workspaces` shows it, and its emptying by `prune --pool`
(tf_fsm.workspace.pool; docs/workspaces.md, "The pool")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tf_fsm.settings.load import LoadedSettings
from tf_fsm.views.workspaces import disk_usage, human_size, no_repository
from tf_fsm.workspace.agent_files import read_if_present
from tf_fsm.workspace.pool import entry_of, idle, pool_of


def pool_rows(root: Path, settings: LoadedSettings) -> list[dict[str, Any]] | None:
    """One row per worktree waiting in the pool (its path, size on disk in bytes, and the
    commit its detached HEAD is at); None outside a git repository. No git process."""
    if no_repository(root) is not None:
        return None
    rows = []
    for slot in idle(pool_of(root, settings)):
        admin = entry_of(slot)
        head = (read_if_present(admin / "HEAD") or "").strip() if admin is not None else ""
        rows.append({"path": str(slot), "size": disk_usage(slot), "head": head or None})
    return rows


def pool_line(root: Path, settings: LoadedSettings) -> str | None:
    """The pool in one line for the end of the listing; None outside a git repository."""
    rows = pool_rows(root, settings)
    if rows is None:
        return None
    size = pool_of(root, settings).size
    if size == 0:
        return "pool: off (workspace.poolSize is 0)"
    used = human_size(sum(r["size"] for r in rows))
    return f"pool: {len(rows)} of {size} worktrees waiting for a ticket, {used} on disk"


def empty_pool(root: Path, settings: LoadedSettings, *, dry_run: bool) -> list[str]:
    """Remove every worktree waiting in the pool (each holds nothing of anybody's: what it held
    was kept when it went in); a line per worktree removed (or that would be, `dry_run`)."""
    from tf_fsm.workspace.git import require_repository
    from tf_fsm.workspace.removal import discard_idle

    pool = pool_of(root, settings)
    if dry_run:
        return [f"would remove the pooled worktree {slot} (dry run)" for slot in idle(pool)]
    common = require_repository(root, "the worktree pool").common_dir()
    return discard_idle(pool, common)
