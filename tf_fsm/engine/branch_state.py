"""What the journal and the worktree say of a ticket's branch at its merge: where the ticket's
own commits begin (the rebase's upstream), whether an attempt's branch was started again
from the base's tip, a rebase in progress and whose it is, and undoing what a killed merge,
rebase or conflict resolution left (docs/workspaces.md, "The merge queue", "Recovery")."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from tf_fsm.core import journal as ev
from tf_fsm.core import workspace_events as wev
from tf_fsm.core.conflicts import unfinished_resolution
from tf_fsm.core.ticket_rules import merge_under_way
from tf_fsm.workspace import checkpoint, conflicts
from tf_fsm.workspace.git import rebase_in_progress
from tf_fsm.workspace.model import Workspace
from tf_fsm.workspace.recovery import recover

if TYPE_CHECKING:
    from tf_fsm.engine.api import RunContext


def fork_point(events: list[ev.Event]) -> str | None:
    """Where the ticket's own commits begin, as the journal recorded it: the base commit its
    branch was made from, or last rebased onto by the merge queue; None when not recorded."""
    for event in reversed(events):
        if isinstance(event, wev.MergeRebased | wev.BranchRebased):
            return event.baseSha
        if isinstance(event, wev.WorkspaceReady | wev.WorkSetAside) and event.fork is not None:
            return event.fork
    return None


def restarted(events: list[ev.Event], number: int) -> bool:
    """Did attempt `number` end with its branch started again from the base branch's tip (a
    merge conflict with workspace.conflicts.mode rerun)? Then there is nothing to roll back."""
    return any(
        isinstance(e, wev.WorkSetAside) and e.attempt == number and e.fork is not None
        for e in events
    )


def rebase_in(run: RunContext, ws: Workspace, n: int) -> Literal["none", "ours", "theirs"]:
    """Is a rebase in progress in the ticket's worktree, and whose: tf_fsm's own (the merge
    queue's, killed mid-way: the journal's last merge event began it) or a person's,
    resolving a conflict there."""
    if not ws.tree.is_dir():
        return "none"
    own = ws.git.git_dir()
    if not rebase_in_progress(own):
        return "none"
    return "ours" if merge_under_way(run.store.read_events().events, n) else "theirs"


def persons_rebase(run: RunContext, ws: Workspace, n: int) -> str | None:
    """Why the merge must wait when a person's rebase is in progress in the ticket's
    worktree (tf_fsm's own, killed mid-way, is undone by `recover`); None when there is none."""
    if rebase_in(run, ws, n) != "theirs":
        return None
    return (
        f"a rebase is in progress in {ws.tree}: finish it (`git rebase --continue`) or abort "
        f"it (`git rebase --abort`) there, then `tf-fsm run {ws.ticket_id}` merges the ticket"
    )


def recover_merge(run: RunContext, ws: Workspace, n: int) -> None:
    """Undo what a killed merge or rebase of the ticket left (in the merge queue's lock): each
    step said, and the ref any files in the way were kept under journaled. What a resolution
    the kill cut short had made is kept under a ref first."""
    _end_killed_resolution(run, ws, n)
    recovered = recover(ws)
    for note in recovered.notes:
        run.observer.note(run.ticket_id, note)
    if recovered.kept is not None:
        why = "what a killed rebase had written, in the way of aborting it"
        run.event(wev.WorkSetAside, n, ref=recovered.kept, head=checkpoint.head(ws), reason=why)


def _end_killed_resolution(run: RunContext, ws: Workspace, n: int) -> None:
    """A resolution journaled as started and never as finished was cut short by a kill: what
    its resolver had made (its rebase, in progress or completed) is kept under
    `refs/tf/<id>/resolution-<k>-interrupted` and the rebase aborted; the merge then does the
    same resolution again, under its number (a kill is not a resolution that failed)."""
    last = unfinished_resolution(run.store.read_events().events)
    if last is None or not ws.tree.is_dir():
        return
    if not rebase_in_progress(ws.git.git_dir()) and checkpoint.head(ws) == last.oldTip:
        return  # nothing of it is left: its rebase was undone already
    # A rebase it completed is undone too: its gates and review never passed, and the same
    # resolution, run again, is checked in full before anything merges.
    ref = conflicts.set_aside(ws, f"resolution-{last.number}-interrupted", last.oldTip)
    if ref is not None:
        why = f"resolution {last.number} of the conflict, cut short by a kill; it runs again"
        run.event(wev.WorkSetAside, n, ref=ref, head=last.oldTip, reason=why)
