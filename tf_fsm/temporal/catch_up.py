"""The dispatcher's clone after its tickets merged on the shared remote: its checked-out
branch fast-forwarded to the remote's when it can be (as `git pull --ff-only`), so that it
holds the merges and their tk closes as a local run leaves them. Never more than a
fast-forward: a branch with commits of its own, or changes a fast-forward would touch, is
left as it is, and the line says so."""

from __future__ import annotations

from pathlib import Path

from tf_fsm.temporal.fence import REMOTE
from tf_fsm.workspace.git import Git, said


def catch_up(root: Path) -> str | None:
    """Fast-forward the clone's checked-out branch to the remote's; the line to say, or None
    when nothing moved (no branch, or already there)."""
    git = Git(root)
    branch = git.head_branch()
    if branch is None:
        return None
    tracking = f"refs/remotes/{REMOTE}/{branch}"
    fetched = git.run("fetch", "--quiet", REMOTE, f"+refs/heads/{branch}:{tracking}", check=False)
    if fetched.exit_code != 0:
        return f"{branch} not brought up to date: fetching it failed: {said(fetched)}"
    remote, local = git.rev(tracking), git.rev(f"refs/heads/{branch}")
    if remote is None or remote == local:
        return None
    if local is not None and not git.is_ancestor(local, remote):
        return f"{branch} has commits the remote's lacks: `git pull` brings the merges"
    moved = git.run("merge", "--ff-only", "--quiet", tracking, check=False)
    if moved.exit_code != 0:
        return f"{branch} not fast-forwarded ({said(moved)}): `git pull` brings the merges"
    return f"{branch} fast-forwarded to the remote's {remote[:8]}: the merges are here"
