"""A ticket's workspace as the other modules of tf_fsm.workspace see it, and the names it
gives git: the ticket's branch, its worktree's directory and the refs that keep an attempt's
commits reachable (docs/workspaces.md, "Names")."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tf_fsm.settings.load import LoadedSettings
from tf_fsm.workspace.git import Git

#: where tk keeps its ticket files
TK_DIR = ".tickets"
#: what a checkpoint never commits: tf_fsm's own state and tk's ticket files (the tk files
#: are committed on the base branch with the ticket's merge, from the project root)
BOOKKEEPING: tuple[str, ...] = (".tf", TK_DIR)
#: the trailer every commit tf_fsm makes carries, naming its ticket
TICKET_TRAILER = "Tf-Ticket"
#: the trailer of a merge onto the base branch: the ticket branch's tip it merged
MERGED_TIP_TRAILER = "Tf-Merged-Tip"


@dataclass(frozen=True)
class Workspace:
    """One ticket's branch and worktree."""

    ticket_id: str
    root: Path  # the project root: the repository's main working tree
    tree: Path  # the ticket's worktree, where its agents and gate commands run
    branch: str  # e.g. tf/pt-1
    base_branch: str  # the branch it was made from and merges into
    #: files copied from the project root into the worktree because the branch lacks them
    #: (agent settings, prompt overrides): never committed by a checkpoint
    copied: tuple[str, ...] = ()

    @property
    def git(self) -> Git:
        """git in the ticket's worktree."""
        return Git(self.tree)

    @property
    def root_git(self) -> Git:
        """git at the project root."""
        return Git(self.root)

    def ref(self, name: str) -> str:
        """A ref of this ticket's own under refs/tf/ (e.g. `attempt-2`), which keeps commits
        reachable after the branch moved on without them."""
        return ticket_ref(self.ticket_id, name)


def branch_name(settings: LoadedSettings, ticket_id: str) -> str:
    return settings.settings.workspace.branchPrefix + ticket_id


def worktrees_dir(root: Path, settings: LoadedSettings) -> Path:
    """`ralph.parallelWorktreesDir`, relative to the project root (settings refuse any other)."""
    return root / settings.settings.ralph.parallelWorktreesDir


def a_tickets(name: str) -> bool:
    """Could a directory of this name in the worktrees directory be a ticket's worktree? The
    pool's worktrees (`.pool-<n>`) and a removal's (`.removing-<id>`) start with a dot, which
    no ticket id does."""
    return not name.startswith(".")


def worktree_path(root: Path, settings: LoadedSettings, ticket_id: str) -> Path:
    return worktrees_dir(root, settings) / ticket_id


def ticket_ref(ticket_id: str, name: str) -> str:
    return f"refs/tf/{ticket_id}/{name}"


def ticket_dir_in(tree: Path, root: Path, store_dir: Path) -> Path:
    """Where an agent working in the worktree `tree` finds the ticket's files: the same
    relative path as from the project root (a knowledge directory outside the project: the
    default one's path)."""
    try:
        return tree / store_dir.relative_to(root)
    except ValueError:
        return tree / ".tf" / "knowledge" / "tickets" / store_dir.name
