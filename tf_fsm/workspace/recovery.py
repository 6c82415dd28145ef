"""What a killed merge or rebase left, undone by the next ticket to take the merge queue
(docs/workspaces.md, "Recovery").

Under the queue's lock no other merge is under way, so every merge note found then is a
killed merge's, whichever ticket's: each is undone where it was begun, so that one ticket's
killed merge never blocks another's.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tf_fsm.workspace.agent_files import read_if_present
from tf_fsm.workspace.checkpoint import clear_locks
from tf_fsm.workspace.git import Git
from tf_fsm.workspace.merge_note import (
    note_path,
    noted_tickets,
    read_note,
    temp_tree,
)
from tf_fsm.workspace.model import MERGED_TIP_TRAILER, TK_DIR, Workspace
from tf_fsm.workspace.rebase import (
    abort_rebase,
    discard_worktree,
    reattach_branch,
    sweep_temp_files,
    undo_merge,
)


@dataclass(frozen=True)
class Recovered:
    """What `recover` did: one-line notes, and the ref it kept files under (None: none)."""

    notes: list[str]
    kept: str | None = None


def recover(ws: Workspace) -> Recovered:
    """Undo what a killed merge or rebase left, and say what was done: git's stale lock files,
    a rebase in progress in the ticket's worktree (aborted: the branch is back at its tip
    from before; files in the way kept under a ref), the temporary worktrees of merges, and
    merges begun in the base branch's checkout, this ticket's or another's (undone when the
    index holds nothing but that merge; anything else is left as it is, with a note). Called
    in the merge queue (`merge_lock`)."""
    tree = ws.tree.is_dir()
    own, common = (ws.git if tree else ws.root_git).dirs()
    base = [f"refs/heads/{ws.base_branch}"]
    # the common directory holds the locks of the base branch's checkout at the root
    dirs = [common, own] if tree else [common]
    notes = clear_locks(common, dirs, ws.root, ws.tree, ws.branch, ws.ticket_id, base)
    kept = None
    if tree:
        aborted, kept = abort_rebase(ws, own)
        notes += aborted + reattach_branch(ws)
    for ticket_id in sorted({*noted_tickets(ws.root), ws.ticket_id}):
        notes += _discard_temp_tree(ws.root_git, common, ws.root, ticket_id)
        if ticket_id != ws.ticket_id:
            notes += _recover_noted(ws.root, common, ticket_id)
    return Recovered(notes + _recover_merge(ws, common), kept)


def _discard_temp_tree(git: Git, common: Path, root: Path, ticket_id: str) -> list[str]:
    tmp = temp_tree(root, ticket_id)
    if not discard_worktree(git, common, tmp, root):
        return []
    return [f"removed {tmp}, the temporary worktree of a merge, left by a killed process"]


def _recover_noted(root: Path, common: Path, ticket_id: str) -> list[str]:
    """Another ticket's merge, killed: undone by what its note says."""
    sweep_temp_files([note_path(root, ticket_id)])
    note = read_note(root, ticket_id)
    if note is None:
        return []
    notes = _undo(root, common, ticket_id, note["tip"], note)
    return [f"{ticket_id}: {line}" for line in notes]


def _recover_merge(ws: Workspace, common: Path) -> list[str]:
    """The merge of this ticket begun in a checkout (the one its note names, else the root)
    and not finished: undone (rebase.undo_merge), or left with a note when it is not ours."""
    sweep_temp_files([note_path(ws.root, ws.ticket_id)])
    note = read_note(ws.root, ws.ticket_id)
    if note is not None:
        return _undo(ws.root, common, ws.ticket_id, note["tip"], note)
    merge_head = (read_if_present(common / "MERGE_HEAD") or "").strip()
    if not merge_head and not (common / "SQUASH_MSG").exists():
        return []
    tip = ws.root_git.rev(f"refs/heads/{ws.branch}") or ""
    squash = read_if_present(common / "SQUASH_MSG") or ""
    ours = f"{MERGED_TIP_TRAILER}: {tip}" in squash or merge_head == tip
    if ours:
        return _undo(ws.root, common, ws.ticket_id, tip, None)
    if not merge_head:
        return []  # a squash of somebody else's, or its leftover message: not ours to judge
    return [
        f"left the unfinished merge in {ws.root} as it is: it is not tf-fsm's merge "
        f"of {ws.branch} ({tip[:12]})"
    ]


def _undo(
    root: Path, common: Path, ticket_id: str, tip: str, note: dict[str, str] | None
) -> list[str]:
    """Undo the merge of `tip` at the checkout the note names (the root without a note)."""
    checkout = Path(note["checkout"]) if note else root
    if not checkout.is_dir():
        note_path(root, ticket_id).unlink(missing_ok=True)
        return [f"{checkout}, where a merge of {ticket_id} was under way, does not exist"]
    git = Git(checkout)
    own = common if checkout.resolve() == root.resolve() else git.git_dir()
    notes = undo_merge(git, own, tip, [note["tkFile"]] if note else [TK_DIR])
    if note:
        sweep_temp_files([own / "SQUASH_MSG", checkout / note["tkFile"]])
    note_path(root, ticket_id).unlink(missing_ok=True)
    return notes
