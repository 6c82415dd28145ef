"""Which tree a ticket runs in: its own git worktree, or the project's working tree (shared).

pi-ticketflow's keys choose as they do there: parallel workers use worktrees, one ticket at a
time does when `ralph.serialUseWorktree` is set. `workspace.mode` (worktree, shared) and
`--worktree/--no-worktree` choose explicitly. A ticket that already has a workspace keeps
running in it, so its work is never split between two trees (docs/workspaces.md, "Modes").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tf_fsm.errors import WorkspaceError
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.workspace.git import Git, repository_root
from tf_fsm.workspace.model import branch_name


@dataclass(frozen=True)
class Mode:
    worktree: bool
    #: one line on why the tree is not what the settings would otherwise pick, or None
    note: str | None = None


def choose(
    root: Path,
    settings: LoadedSettings,
    ticket_id: str,
    *,
    explicit: bool | None,
    parallel: bool,
) -> Mode:
    """The tree `ticket_id` runs in. `explicit`: --worktree (True) or --no-worktree (False);
    `parallel`: a worker of a loop that runs several tickets at once."""
    asked, why = _asked(settings, explicit, parallel)
    problem = not_ready(root)
    branch = branch_name(settings, ticket_id)
    has_branch = problem is None and Git(root).rev(f"refs/heads/{branch}") is not None
    if asked is False and has_branch and why != "auto":
        raise WorkspaceError(
            f"{ticket_id} has a workspace (branch {branch}); {why} would run it in the "
            "project's tree and split its work: finish it, or remove it with "
            f"`tf-fsm workspaces prune {ticket_id} --force`"
        )
    if has_branch:
        return Mode(True)  # its work goes on where it is
    handoff = settings.settings.executor.kind == "handoff"
    if asked and why != "auto":
        if handoff:
            raise WorkspaceError(
                f"{why} asks for a worktree, but executor.kind handoff has a person write the "
                "artifacts in the project's tree; use the shared tree for hand-off tickets"
            )
        if problem is not None:
            raise WorkspaceError(f"{why} asks for a worktree, but {problem}")
        return Mode(True)
    if not asked:
        return Mode(False)
    if problem is not None:
        return Mode(False, f"{problem}: tickets run in the project's working tree")
    if handoff:
        return Mode(False, "executor.kind handoff: tickets run in the project's working tree")
    return Mode(True)


def for_loop(
    root: Path, settings: LoadedSettings, *, explicit: bool | None, workers: int
) -> Mode:
    """Whether a loop's tickets run in worktrees (each worker still chooses for its own
    ticket, the same way): the loop then runs untagged tickets side by side."""
    asked, why = _asked(settings, explicit, workers > 1)
    if not asked:
        return Mode(False)
    problem = not_ready(root)
    if problem is not None:
        if why != "auto":
            raise WorkspaceError(f"{why} asks for worktrees, but {problem}")
        return Mode(False, f"{problem}: tickets run in the project's working tree")
    if settings.settings.executor.kind == "handoff":
        return Mode(False, "executor.kind handoff: tickets run in the project's working tree")
    return Mode(True)


def _asked(
    settings: LoadedSettings, explicit: bool | None, parallel: bool
) -> tuple[bool, str]:
    """(worktree wanted, who asked: the flag, the setting, or "auto")."""
    if explicit is not None:
        return explicit, "--worktree" if explicit else "--no-worktree"
    mode = settings.settings.workspace.mode
    if mode != "auto":
        return mode == "worktree", f"workspace.mode {mode}"
    return parallel or settings.settings.ralph.serialUseWorktree, "auto"


def not_ready(root: Path) -> str | None:
    """Why the project cannot have worktrees, or None: it must be the top of a git working
    tree with at least one commit."""
    if not any((d / ".git").exists() for d in (root, *root.resolve().parents)):
        return "not a git repository"  # known without starting git
    top = repository_root(root)
    if top is None:
        return "not a git repository"
    if top.resolve() != root.resolve():
        return f"{root} is inside the git working tree {top}, not at its top"
    if Git(root).rev("HEAD") is None:
        return "the git repository has no commit yet"
    return None
