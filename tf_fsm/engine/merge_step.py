"""The merge queue's step for one ticket: its branch merged into the base branch, one ticket at a
time across every process (docs/workspaces.md, "The merge queue").

In turn (under the queue's lock): what a killed merge left is undone; a branch already merged
(a run killed after the merge and before its record) is only recorded; when the base moved
since the branch was made, the branch is rebased onto it and the quality-gate commands run
again on the rebased tree (commands only, no agents); then the merge commit, which also holds
the tk ticket's close. A rebase conflict or a gate failing after the rebase leaves the ticket
unmerged and unclosed with its worktree and branch as they are (failure class
merge_conflict); nothing is resolved by taking one side.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tf_fsm.core import workspace_events as wev
from tf_fsm.engine.attempt_gates import baseline_of, record_gate
from tf_fsm.engine.gates import GateResult, gate_env, run_gates
from tf_fsm.engine.ticket_file import closed_text
from tf_fsm.engine.worktree import TicketWorktree, persons_rebase, recover_merge
from tf_fsm.errors import GitError, WorkspaceError
from tf_fsm.executors.failures import MERGE_CONFLICT, MERGE_REFUSED
from tf_fsm.workspace import merge as queue
from tf_fsm.workspace.agent_files import drop_copies_held_by
from tf_fsm.workspace.checkpoint import head
from tf_fsm.workspace.rebased import rebased_commits
from tf_fsm.workspace.tk_files import set_aside_tk_changes

if TYPE_CHECKING:
    from tf_fsm.engine.api import RunContext
    from tf_fsm.engine.context import AttemptContext
    from tf_fsm.workspace.model import Workspace

#: the tk file's text once the attempt closed it
ClosedText = Callable[[], str]


def merge_ticket(run: RunContext, attempt: AttemptContext, reason: str) -> str | None:
    """None when the ticket's branch is merged (now, or found merged); else the one-line
    reason it is not, journaled as MergeRefused (the attempt then ends in error at merge).
    `reason`: the gate's, for the tk close the merge commit holds."""
    tree = run.tree
    if not isinstance(tree, TicketWorktree):
        raise TypeError("only a ticket in its own worktree merges")
    state = run.store.load_retry_state()
    started = state.current.startedAt if state and state.current else ""
    closed = lambda: closed_text(run, attempt.number, started, reason)  # noqa: E731
    ws, n = tree.ws, attempt.number
    with queue.merge_lock(ws.root):
        if (theirs := persons_rebase(run, ws, n)) is not None:
            return _refuse(run, n, MERGE_REFUSED, [], theirs)
        recover_merge(run, ws, n)
        if (kept := set_aside_tk_changes(ws)) is not None:
            why = "tk file changes made in the worktree (tk's files are kept at the root)"
            run.event(wev.WorkSetAside, n, ref=kept, head=head(ws), reason=why)
            run.observer.note(run.ticket_id, f"set aside {why} at {kept}")
        found = queue.merged_commit(ws)
        if found is not None:
            run.event(wev.MergeCompleted, n, commit=found, base=ws.base_branch, already=True)
            return None
        base_sha = ws.root_git.rev(f"refs/heads/{ws.base_branch}") or "?"
        run.event(
            wev.MergeStarted, n, base=ws.base_branch, baseSha=base_sha, tip=head(ws),
            strategy=tree.strategy,
        )  # fmt: skip
        return _rebase_gate_merge(run, attempt, tree, closed)


def _rebase_gate_merge(
    run: RunContext, attempt: AttemptContext, tree: TicketWorktree, closed_text: ClosedText
) -> str | None:
    ws, n = tree.ws, attempt.number
    try:
        base = ws.root_git.rev(f"refs/heads/{ws.base_branch}") or "HEAD"
        for note in drop_copies_held_by(ws.tree, ws.copied, ws.git, base):
            run.observer.note(run.ticket_id, note)
        rebased = queue.rebase_onto_base(ws)
        if rebased.conflict:
            return _refuse(run, n, MERGE_CONFLICT, rebased.conflict, _conflict(ws, rebased))
        if rebased.moved:
            became = rebased_commits(ws.git, rebased.base, rebased.old_tip, rebased.new_tip)
            run.event(
                wev.MergeRebased, n, baseSha=rebased.base, oldTip=rebased.old_tip,
                newTip=rebased.new_tip, checkpoints=became,
            )  # fmt: skip
        # Also when the attempt resumes here: a person may have changed the branch since.
        if rebased.moved or attempt.resumed_from is not None:
            failing = _gates_again(run, attempt, tree)
            if failing:
                return _refuse(run, n, MERGE_CONFLICT, [], _gates_failed(ws, rebased.base, failing))
        message = f"Merge {run.ticket_id}: {run.ticket.title}"
        merged = queue.merge(
            ws, strategy=tree.strategy, message=message, tk_file=_tk_file(run),
            tk_text=closed_text(),
        )  # fmt: skip
    except (WorkspaceError, GitError) as exc:
        return _refuse(run, n, MERGE_REFUSED, [], f"merge refused: {exc}")
    run.event(
        wev.MergeCompleted, n, commit=merged.commit, base=ws.base_branch, already=merged.already
    )
    return None


def _tk_file(run: RunContext) -> str:
    return run.ticket.path.relative_to(run.root).as_posix()


def _gates_again(run: RunContext, attempt: AttemptContext, tree: TicketWorktree) -> list[str]:
    """The required gate commands on the rebased tree, once each (no fixer: no agent runs in
    the queue); the names of those that block."""
    wf, n = run.settings.workflow, attempt.number
    if not wf.qualityGates:
        return []

    def record(result: GateResult, round_: int) -> None:
        log = f"gates/attempt-{n}/merge-{result.name}.log"
        record_gate(run, n, result, log, reason=f"after the rebase: {result.summary}")

    outcome = run_gates(
        wf.qualityGates, tree.path, default_max=0, feedback=False, redact=run.store.redactor,
        env=gate_env(run.ticket_id, n), on_result=record, send_back=lambda *a: None,
        can_block=wf.enableQualityGate, baseline=baseline_of(run),
    )  # fmt: skip
    return [outcome.blocking.name] if outcome.blocking is not None else []


def _refuse(run: RunContext, n: int, failure_class: str, files: list[str], reason: str) -> str:
    run.event(wev.MergeRefused, n, failureClass=failure_class, files=files, reason=reason)
    return reason


def _conflict(ws: Workspace, rebased: queue.Rebased) -> str:
    shown = ", ".join(rebased.conflict[:10]) + (" ..." if len(rebased.conflict) > 10 else "")
    return (
        f"merge conflict: rebasing {ws.branch} onto {ws.base_branch} ({rebased.base[:12]}) "
        f"conflicts in {shown}; not merged, not closed. Resolve it in {ws.tree} (`git rebase "
        f"{ws.base_branch}`, fix the files, `git rebase --continue`), then `tf-fsm run "
        f"{ws.ticket_id}` merges it (the gate commands run again)"
    )


def _gates_failed(ws: Workspace, base: str, failing: list[str]) -> str:
    return (
        f"merge refused: after rebasing {ws.branch} onto {ws.base_branch} ({base[:12]}), gate "
        f"{', '.join(failing)} fails; not merged, not closed. Fix it in {ws.tree} (the fix "
        f"is committed on {ws.branch}), then `tf-fsm run {ws.ticket_id}` merges it"
    )
