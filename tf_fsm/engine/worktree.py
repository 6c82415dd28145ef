"""A ticket's run in its own git worktree (docs/workspaces.md): the agents and gate commands
run there, each phase that changed the tree is committed on the ticket's branch (a
checkpoint), a blocked attempt can be rolled back, an interrupted one picks up at its last
checkpoint, and a passed one is merged into the base branch (tf_fsm.engine.merge_step).

Everything git is done by tf_fsm.workspace; this module is the run's side: when each step
happens and what the journal records of it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tf_fsm.core import journal as ev
from tf_fsm.core import workspace_events as wev
from tf_fsm.core.machine import MERGE_PHASE
from tf_fsm.engine import mirror
from tf_fsm.engine.accounting import attempt_events, merge_under_way
from tf_fsm.fs.confine import check_within
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.workspace import checkpoint, worktree
from tf_fsm.workspace import merge as queue
from tf_fsm.workspace.git import rebase_in_progress
from tf_fsm.workspace.model import TICKET_TRAILER, Workspace, ticket_dir_in
from tf_fsm.workspace.recovery import recover

if TYPE_CHECKING:
    from tf_fsm.core.state import RetryState
    from tf_fsm.engine.api import OutcomeStatus, RunContext
    from tf_fsm.executors.base import Invocation
    from tf_fsm.storage.protocol import Store


class TicketWorktree:
    """The run's tree when the ticket has a workspace of its own."""

    def __init__(self, ws: Workspace, settings: LoadedSettings, store_dir: Path) -> None:
        self.ws, self.path = ws, ws.tree
        self.merges = settings.settings.ralph.parallelAutoMerge
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
        extra = [self.store_dir / "chain-context.json", self._in_store(invocation.prompt_file)]
        mirror.fill(self.store_dir, self.mirror, [p for p in extra if p.is_file()], self.path)

    def after_invocation(self, run: RunContext, invocation: Invocation) -> None:
        taken = mirror.collect(self.mirror, self.store_dir, invocation.output.name)
        for name in taken:
            run.store.redact_agent_file(self.store_dir / name)
        if taken:  # the redacted copies back: no secret stays on either side
            mirror.fill(self.store_dir, self.mirror, [self.store_dir / n for n in taken], self.path)

    def _in_store(self, agent_path: Path) -> Path:
        return self.store_dir / agent_path.relative_to(self.mirror)

    # -- phases and attempts ----------------------------------------------------------------

    def after_phase(self, run: RunContext, attempt: int, phase: str) -> None:
        message = f"tf-fsm: {run.ticket_id} attempt {attempt} {phase}\n\n{run.ticket.title}"
        trailers = {TICKET_TRAILER: run.ticket_id, "Tf-Attempt": str(attempt), "Tf-Phase": phase}
        sha = checkpoint.checkpoint(self.ws, message, trailers)
        if sha is not None:
            run.event(wev.CheckpointCommitted, attempt, phase=phase, sha=sha)

    def begin_attempt(self, run: RunContext, state: RetryState | None) -> str | None:
        previous = state.current if state else None
        if self.rollback == "reset" and previous is not None and previous.status == "blocked":
            self._roll_back(run, previous.attemptNumber)
        return checkpoint.head(self.ws)

    def _roll_back(self, run: RunContext, number: int) -> None:
        started = attempt_start(run, number)
        if started is None:
            run.observer.note(
                run.ticket_id,
                f"rollback reset: attempt {number}'s first commit is not in the journal; the "
                "next attempt continues from its tree",
            )
            return
        ref = checkpoint.reset_to(self.ws, started, keep_as=f"attempt-{number}")
        kept = ref or kept_ref(self.ws, number)
        if ref is not None:
            run.event(
                wev.WorkSetAside, number, ref=ref, head=started,
                reason=f"rollback reset: attempt {number + 1} starts from {started[:12]}",
            )  # fmt: skip
        self.kept = kept

    def resume_attempt(self, run: RunContext, attempt: int, *, finished: bool) -> str | None:
        """Edits made since the last checkpoint are a killed phase's half-done work, set aside
        (the phase runs again from the checkpoint); once every phase completed, only the
        merge is left, and such edits are a person's fix for it (a conflict resolved, a gate
        fixed): committed as the attempt's `merge` checkpoint."""
        if finished:
            rebase = _rebase_in(run, self.ws, attempt)
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
        """A merged ticket's worktree and branch go (unless ralph.parallelKeepWorktrees); a
        ticket that closed unmerged, or ran out of retries, keeps its branch but not its
        worktree, so worktrees never pile up; any other keeps both for its next attempt."""
        if status not in ("closed", "exhausted") or (self.keep and status == "closed"):
            return
        delete = status == "closed" and self.merges
        notes = worktree.remove(self.ws, delete_branch=delete)
        run.event(
            wev.WorkspaceRemoved, None, path=str(self.ws.tree), branchDeleted=delete
        )  # fmt: skip
        for note in notes:
            run.observer.note(run.ticket_id, note)


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
        run.root, run.settings, run.ticket_id, explicit=options.worktree,
        parallel=options.parallel, shared_attempt=shared_attempt(run.store),
    )  # fmt: skip
    if not chosen.worktree:
        return None, chosen.note
    _found, base = worktree.base_of(run.root, run.settings, run.ticket_id)
    ws, notes = worktree.ensure(run.root, run.settings, run.ticket_id, base)
    run.event(
        wev.WorkspaceReady, None, branch=ws.branch, base=ws.base_branch, path=str(ws.tree),
        head=checkpoint.head(ws), notes=notes,
    )  # fmt: skip
    for note in notes:
        run.observer.note(run.ticket_id, note)
    return TicketWorktree(ws, run.settings, run.store.dir), chosen.note


def _rebase_in(run: RunContext, ws: Workspace, n: int) -> Literal["none", "ours", "theirs"]:
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
    if _rebase_in(run, ws, n) != "theirs":
        return None
    return (
        f"a rebase is in progress in {ws.tree}: finish it (`git rebase --continue`) or abort "
        f"it (`git rebase --abort`) there, then `tf-fsm run {ws.ticket_id}` merges the ticket"
    )


def recover_merge(run: RunContext, ws: Workspace, n: int) -> None:
    """Undo what a killed merge or rebase of the ticket left (in the merge queue's lock): each
    step said, and the ref any files in the way were kept under journaled."""
    recovered = recover(ws)
    for note in recovered.notes:
        run.observer.note(run.ticket_id, note)
    if recovered.kept is not None:
        why = "what a killed rebase had written, in the way of aborting it"
        run.event(wev.WorkSetAside, n, ref=recovered.kept, head=checkpoint.head(ws), reason=why)
