"""A ticket's run in its own git worktree (docs/workspaces.md): the agents and gate commands
run there, each phase that changed the tree is committed on the ticket's branch (a
checkpoint), a blocked attempt can be rolled back, an interrupted one picks up at its last
checkpoint, and a passed one is merged into the base branch (tf_fsm.engine.merge_step).

Everything git is done by tf_fsm.workspace; this module is the run's side: when each step
happens and what the journal records of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tf_fsm.core import journal as ev
from tf_fsm.core import workspace_events as wev
from tf_fsm.core.machine import MERGE_PHASE
from tf_fsm.core.next_step import held_by, merges_now
from tf_fsm.core.resume import merge_began
from tf_fsm.core.ticket_rules import attempt_events
from tf_fsm.engine import mirror
from tf_fsm.engine.branch_state import fork_point, rebase_in, recover_merge, restarted
from tf_fsm.errors import UsageError, WorkspaceError
from tf_fsm.fs.confine import check_within
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.layout import CHAIN_CONTEXT
from tf_fsm.workspace import checkpoint, worktree
from tf_fsm.workspace import merge as queue
from tf_fsm.workspace.model import (
    TICKET_TRAILER,
    Workspace,
    branch_name,
    ticket_dir_in,
    worktree_path,
)
from tf_fsm.workspace.pool import pool_of
from tf_fsm.workspace.rebased import rebased_commits
from tf_fsm.workspace.removal import mark_removal, unmark_removal

if TYPE_CHECKING:
    from tf_fsm.core.state import RetryState
    from tf_fsm.engine.api import OutcomeStatus, RunContext
    from tf_fsm.executors.base import Invocation
    from tf_fsm.storage.protocol import Store


class TicketWorktree:
    """The run's tree when the ticket has a workspace of its own."""

    #: a passed attempt is merged before it closes: at once, or, with
    #: ralph.parallelAutoMerge off (or `run --hold-merge`), by `tf-fsm merge`
    #: (tf_fsm.core.next_step.merges_now)
    merges = True

    def __init__(
        self, ws: Workspace, settings: LoadedSettings, store_dir: Path, common: Path
    ) -> None:
        self.ws, self.path = ws, ws.tree
        self.common = common  # the repository's git directory: its registry of worktrees
        self.keep = settings.settings.ralph.parallelKeepWorktrees
        self.rollback = settings.settings.workspace.rollback
        self.strategy = settings.settings.workspace.mergeStrategy
        self.store_dir = store_dir
        self.kept: str | None = None  # where a `reset` rollback left a blocked attempt's work
        self.mirror = ticket_dir_in(ws.tree, ws.root, store_dir)
        check_within(self.mirror, ws.tree)

    def agent_path(self, store_path: Path) -> Path:
        return self.mirror / store_path.relative_to(self.store_dir)

    def base_commit(self) -> str | None:
        """Where the ticket's branch left its base branch (after the merge queue's rebase:
        the base branch's tip)."""
        return self.ws.git.out("merge-base", "HEAD", f"refs/heads/{self.ws.base_branch}")

    # -- invocations ------------------------------------------------------------------------

    def before_invocation(self, run: RunContext, invocation: Invocation) -> None:
        inv = invocation
        self._rebuild_if_gone(
            run, inv.attempt, f"{inv.phase} ({inv.role}) of attempt {inv.attempt}"
        )
        extra = [self.store_dir / CHAIN_CONTEXT, self._in_store(invocation.prompt_file)]
        mirror.fill(self.store_dir, self.mirror, [p for p in extra if p.is_file()], self.path)

    def after_invocation(self, run: RunContext, invocation: Invocation) -> None:
        inv = invocation
        self._require_whole(run, inv.attempt, inv.phase, f"{inv.role} ran in {inv.phase}")
        taken = mirror.collect(self.mirror, self.store_dir, invocation.output.name)
        for name in taken:
            run.store.files.take(name)
        if taken:  # the redacted copies back: no secret stays on either side
            mirror.fill(self.store_dir, self.mirror, [self.store_dir / n for n in taken], self.path)

    def before_commands(self, run: RunContext, attempt: int) -> None:
        self._rebuild_if_gone(run, attempt, f"the quality-gate commands of attempt {attempt}")

    def _in_store(self, agent_path: Path) -> Path:
        return self.store_dir / agent_path.relative_to(self.mirror)

    # -- the worktree itself ----------------------------------------------------------------

    def _rebuild_if_gone(self, run: RunContext, attempt: int, before: str) -> None:
        """Nothing runs in a directory that is not the ticket's worktree: one removed by hand
        between two steps is made again from the ticket's branch, at its last checkpoint
        (what was not committed there went with it), noted and journaled (WorkspaceReady)."""
        if worktree.intact(self.common, self.path):
            return
        tip = self._tip()
        lead = (
            f"the worktree {self.path} was gone before {before}: made again from the branch "
            f"{self.ws.branch} at {tip[:12]}, its last checkpoint (what was not committed "
            "there is lost)"
        )
        self.ws = ready_workspace(run, self.ws.base_branch, lead)

    def _require_whole(self, run: RunContext, attempt: int, phase: str, what: str) -> None:
        """A step whose worktree was removed while it ran does not count (an agent would have
        seen no code, a phase's edits are lost): the run stops, and the next one makes the
        worktree again and runs the phase again."""
        if worktree.intact(self.common, self.path):
            return
        tip = self._tip()
        raise WorkspaceError(
            f"the worktree {self.path} is gone: it was removed while {what} (attempt "
            f"{attempt} of {run.ticket_id}), so what was done there does not count. Run "
            f"`tf-fsm run {run.ticket_id}` again: it makes the worktree again from the branch "
            f"{self.ws.branch} at {tip[:12]}, its last checkpoint, and runs {phase} again"
        )

    def _tip(self) -> str:
        """The ticket's branch's tip, what a worktree removed by hand is made again from."""
        tip = self.ws.root_git.rev(f"refs/heads/{self.ws.branch}")
        if tip is None:
            raise WorkspaceError(
                f"the worktree {self.path} and the branch {self.ws.branch} of "
                f"{self.ws.ticket_id} are both gone: tf-fsm does not make them again from "
                f"{self.ws.base_branch}, which would drop the attempt's checkpoints. Restore "
                f"the branch (`git branch {self.ws.branch} <its last checkpoint>`; `tf-fsm "
                f"status {self.ws.ticket_id}` names them) and run again"
            )
        return tip

    # -- phases and attempts ----------------------------------------------------------------

    def after_phase(self, run: RunContext, attempt: int, phase: str) -> None:
        self._require_whole(run, attempt, phase, f"the {phase} phase ran")
        message = f"tf-fsm: {run.ticket_id} attempt {attempt} {phase}\n\n{run.ticket.title}"
        trailers = {TICKET_TRAILER: run.ticket_id, "Tf-Attempt": str(attempt), "Tf-Phase": phase}
        sha = checkpoint.checkpoint(self.ws, message, trailers)
        if sha is not None:
            run.event(wev.CheckpointCommitted, attempt, phase=phase, sha=sha)

    def begin_attempt(self, run: RunContext, state: RetryState | None) -> str | None:
        previous = state.current if state else None
        if (
            self.rollback == "reset"
            and previous is not None
            and previous.status == "blocked"
            and not restarted(run.store.read_events().events, previous.attemptNumber)
        ):
            self._roll_back(run, previous.attemptNumber)
        if previous is not None:
            self._catch_up(run, previous.attemptNumber + 1)
        return checkpoint.head(self.ws)

    def _catch_up(self, run: RunContext, number: int) -> None:
        """A retry starts on the base branch's tip when it moved (what merged meanwhile is
        there for its agents to build on, and its merge has less to rebase); a rebase that
        would conflict is not begun here, and the attempt goes on from its branch as it is
        (the merge queue resolves the conflict)."""
        upstream = fork_point(run.store.read_events().events)
        try:
            rebased = queue.rebase_onto_base(self.ws, upstream)
        except WorkspaceError as exc:  # a person's uncommitted edits: left as they are
            run.observer.note(run.ticket_id, f"attempt {number} starts where it is: {exc}")
            return
        if rebased.conflict:
            shown = ", ".join(rebased.conflict[:5])
            run.observer.note(
                run.ticket_id,
                f"attempt {number} starts from its branch: rebasing it onto "
                f"{self.ws.base_branch} would conflict in {shown} (resolved at the merge)",
            )
        elif rebased.moved:
            became = rebased_commits(self.ws.git, rebased.base, rebased.old_tip, rebased.new_tip)
            run.event(
                wev.BranchRebased,
                None,
                baseSha=rebased.base,
                oldTip=rebased.old_tip,
                newTip=rebased.new_tip,
                checkpoints=became,
            )

    def _roll_back(self, run: RunContext, number: int) -> None:
        started = attempt_start(run, number)
        if started is None:
            run.observer.note(
                run.ticket_id,
                f"rollback reset: attempt {number}'s first commit is not in the journal; the "
                "next attempt continues from its tree",
            )
            return
        keep_as = f"attempt-{number}"
        # Its uncommitted edits first, so that their ref is journaled too: reset_to keeps them
        # again under the same ref (the same changes make the same commit).
        edits = checkpoint.keep_uncommitted(self.ws, f"{keep_as}-uncommitted")
        ref = checkpoint.reset_to(self.ws, started, keep_as=keep_as)
        kept = ref or kept_ref(self.ws, number)
        why = f"rollback reset: attempt {number + 1} starts from {started[:12]}"
        for aside, what in ((ref, "commits"), (edits, "uncommitted edits")):
            if aside is not None:
                reason = f"{why}; attempt {number}'s {what}"
                run.event(wev.WorkSetAside, number, ref=aside, head=started, reason=reason)
        self.kept = kept

    def resume_attempt(self, run: RunContext, attempt: int, *, finished: bool) -> str | None:
        """Edits made since the last checkpoint are a killed phase's half-done work, set aside
        (the phase runs again from the checkpoint); once every phase completed, only the
        merge is left, and such edits are a person's fix for it (a conflict resolved, a gate
        fixed): committed as the attempt's `merge` checkpoint."""
        if finished:
            rebase = rebase_in(run, self.ws, attempt)
            if rebase == "ours":  # tf_fsm's own, cut short: undone before anything is committed
                with queue.merge_lock(self.ws.root):
                    recover_merge(run, self.ws, attempt)
            if rebase != "theirs":  # a person's rebase: the merge step says what to do
                self.after_phase(run, attempt, MERGE_PHASE)
            return checkpoint.head(self.ws)
        ref = checkpoint.set_aside(self.ws, f"attempt-{attempt}-interrupted")
        head = checkpoint.head(self.ws)
        if ref is not None:
            reason = "an interrupted phase's uncommitted edits; the attempt resumes at its "
            reason += f"last checkpoint {head[:12]}"
            run.event(wev.WorkSetAside, attempt, ref=ref, head=head, reason=reason)
            run.observer.note(run.ticket_id, f"set aside {reason.split(';')[0]} at {ref}")
        return head

    def after_outcome(self, run: RunContext, status: OutcomeStatus) -> None:
        """A merged ticket's worktree and branch go (unless ralph.parallelKeepWorktrees),
        also those a run killed after the merge left (`already_closed`: the run was opened on
        them for that alone, `left_tree`); a ticket out of retries keeps its branch but not
        its worktree, so worktrees never pile up; any other (blocked, in error, waiting for
        `tf-fsm merge`) keeps both. A branch holding commits its base lacks is never deleted
        (tf_fsm.workspace.worktree.remove refuses, naming it). A worktree that goes waits in
        the pool for the next ticket while the pool has room (tf_fsm.workspace.pool)."""
        merged = status in ("closed", "already_closed")
        if not (merged or status == "exhausted") or (self.keep and merged):
            return
        pool = pool_of(self.ws.root, run.settings, workers=run.options.workers)
        if merged:  # found again by the loop (tf_fsm.loop.unfinished) if killed before the event
            mark_removal(self.ws.tree, self.ws.root)
        notes = worktree.remove(self.ws, delete_branch=merged, pool=pool)
        run.event(wev.WorkspaceRemoved, None, path=str(self.ws.tree), branchDeleted=merged)
        unmark_removal(self.ws.tree)
        for note in notes:
            run.observer.note(run.ticket_id, note)


def hold_merge(run: RunContext, attempt: int) -> None:
    """Journal that attempt `attempt` passed and its merge waits for `tf-fsm merge`
    (ralph.parallelAutoMerge off): its branch and worktree stay as they are."""
    tree = run.tree
    if not isinstance(tree, TicketWorktree):
        raise TypeError("only a ticket in its own worktree waits for its merge")
    run.event(wev.MergeHeld, attempt, base=tree.ws.base_branch, tip=checkpoint.head(tree.ws))
    run.observer.note(
        run.ticket_id,
        f"passed; not merged ({held_by(run.options.hold_merge)}): {tree.ws.branch} and "
        f"{tree.ws.tree} are kept; `tf-fsm merge {run.ticket_id}` merges and closes it",
    )


def merge_facts(run: RunContext, number: int | None) -> tuple[bool, bool]:
    """(merges now, waits for `tf-fsm merge`) for attempt `number`'s passed gate (None: a new
    attempt): in a workspace one of them (tf_fsm.core.next_step.merges_now); in the project's
    tree neither, it closes as it is."""
    if not run.tree.merges:
        return False, False
    began = number is not None and merge_began(run.store.read_events().events, number)
    options = run.options
    now = merges_now(run.settings, requested=options.merge, began=began, hold=options.hold_merge)
    return now, not now


def left_tree(run: RunContext) -> TicketWorktree:
    """The workspace a run killed after the ticket's merge left, as it is (nothing is made
    or repaired): removed by `after_outcome`. A branch already deleted leaves only the
    directory, if any, to remove."""
    found = worktree.find(run.root, run.settings, run.ticket_id)
    ws = found or Workspace(
        run.ticket_id,
        run.root,
        worktree_path(run.root, run.settings, run.ticket_id),
        branch_name(run.settings, run.ticket_id),
        "",
    )
    return TicketWorktree(ws, run.settings, run.store.files.dir, ws.root_git.common_dir())


def attempt_start(run: RunContext, number: int) -> str | None:
    """The commit attempt `number` started from, as its AttemptStarted recorded it."""
    events = attempt_events(run.store.read_events().events, number)
    starts = [e for e in events if isinstance(e, ev.AttemptStarted)]
    return starts[-1].head if starts else None


def kept_ref(ws: Workspace, number: int) -> str | None:
    """The ref a `reset` rollback keeps attempt `number`'s commits under, if there is one."""
    ref = ws.ref(f"attempt-{number}")
    return ref if ws.git.rev(ref) is not None else None


def shared_attempt(store: Store) -> int | None:
    """The number of the ticket's open attempt (in progress or in error) when it began in the
    project's tree (its AttemptStarted recorded no commit), else None: resumed anywhere else,
    its work would be split between two trees."""
    state = store.load_retry_state()
    cur = state.current if state is not None and state.has_open_attempt else None
    if cur is None:
        return None
    events = attempt_events(store.read_events().events, cur.attemptNumber)
    starts = [e for e in events if isinstance(e, ev.AttemptStarted)]
    return cur.attemptNumber if starts and starts[0].head is None else None


def open_tree(run: RunContext) -> tuple[TicketWorktree | None, str | None]:
    """The ticket's own worktree when it runs in one (made or repaired now, and journaled),
    else None: it runs in the project's tree; and the mode's note, if any, for the caller to
    say once the attempt has begun or resumed (a run's first line says what it does)."""
    from tf_fsm.workspace import mode

    options = run.options
    chosen = mode.choose(
        run.root,
        run.settings,
        run.ticket_id,
        explicit=options.worktree,
        parallel=options.parallel,
        shared_attempt=shared_attempt(run.store),
    )
    if not chosen.worktree and options.merge:  # `tf-fsm merge` never closes it unmerged
        raise UsageError(
            f"{run.ticket_id}: nothing to merge: it has no branch (its attempt waited for its "
            f"merge); `tf-fsm run {run.ticket_id} --retry-reset` starts it again"
        )
    if not chosen.worktree:
        return None, chosen.note
    found, base = worktree.base_of(run.root, run.settings, run.ticket_id)
    ws = ready_workspace(run, base, made=found is None)
    common = ws.root_git.common_dir()
    return TicketWorktree(ws, run.settings, run.store.files.dir, common), chosen.note


def ready_workspace(
    run: RunContext, base: str, lead: str | None = None, *, made: bool = False
) -> Workspace:
    """The ticket's workspace made, found or repaired (worktree.ensure), journaled
    (WorkspaceReady, with `lead` and the notes on what was done; `made`: its branch is new, so
    its head is where the ticket's own commits will begin) and each note said."""
    ws, notes = worktree.ensure(run.root, run.settings, run.ticket_id, base)
    notes = [lead, *notes] if lead else notes
    head = checkpoint.head(ws)
    run.event(
        wev.WorkspaceReady,
        None,
        branch=ws.branch,
        base=ws.base_branch,
        path=str(ws.tree),
        head=head,
        notes=notes,
        fork=head if made else None,
    )
    for note in notes:
        run.observer.note(run.ticket_id, note)
    return ws
