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

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING

from tf_fsm.core import workspace_events as wev
from tf_fsm.core.conflicts import unfinished_resolution
from tf_fsm.engine import resolution
from tf_fsm.engine.api import MergeRefusal
from tf_fsm.engine.attempt_gates import baseline_of, record_gate
from tf_fsm.engine.branch_state import fork_point, persons_rebase, recover_merge
from tf_fsm.engine.gates import GateResult, gate_env, run_gates
from tf_fsm.engine.ticket_file import closed_text
from tf_fsm.engine.worktree import TicketWorktree
from tf_fsm.errors import GitError, TfFsmError, WorkspaceError
from tf_fsm.executors.failures import MERGE_CONFLICT, MERGE_REFUSED
from tf_fsm.workspace import merge as queue
from tf_fsm.workspace.agent_files import drop_copies_held_by
from tf_fsm.workspace.checkpoint import head, reset_to
from tf_fsm.workspace.rebased import rebased_commits
from tf_fsm.workspace.tk_files import set_aside_tk_changes

if TYPE_CHECKING:
    from tf_fsm.engine.api import RunContext
    from tf_fsm.engine.context import AttemptContext
    from tf_fsm.workspace.model import Workspace

#: the tk file's text once the attempt closed it
ClosedText = Callable[[], str]


def merge_ticket(run: RunContext, attempt: AttemptContext, reason: str) -> MergeRefusal | None:
    """None when the ticket's branch is merged (now, or found merged); else why it is not,
    journaled as MergeRefused (the attempt then ends in error at merge, or blocked for a
    rerun). `reason`: the gate's, for the tk close the merge commit holds."""
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
            wev.MergeStarted,
            n,
            base=ws.base_branch,
            baseSha=base_sha,
            tip=head(ws),
            strategy=tree.strategy,
        )
        return _rebase_gate_merge(run, attempt, tree, closed)


def _rebase_gate_merge(
    run: RunContext, attempt: AttemptContext, tree: TicketWorktree, closed_text: ClosedText
) -> MergeRefusal | None:
    ws, n = tree.ws, attempt.number
    res: resolution.Resolution | None = None
    try:
        base = ws.root_git.rev(f"refs/heads/{ws.base_branch}") or "HEAD"
        for note in drop_copies_held_by(ws.tree, ws.copied, ws.git, base):
            run.observer.note(run.ticket_id, note)
        upstream = fork_point(run.store.read_events().events)
        refused = resolution.refusal(run)
        rebased = queue.rebase_onto_base(ws, upstream, stop=refused is None)
        if rebased.stopped is not None:
            fork = upstream or ws.git.out("merge-base", rebased.old_tip, rebased.base)
            res = resolution.start(run, attempt, rebased, rebased.stopped, fork)
            done = resolution.resolve(run, attempt, tree, res, rebased.stopped)
            if isinstance(done, str):
                return _conflicted(run, attempt, tree, res, rebased, done)
            rebased = done
        elif rebased.conflict:
            why = f"No agent resolves it: {refused}." if refused else None
            return _unresolved(run, attempt, tree, rebased, why)
        if rebased.moved and res is None:
            _rebased(run, ws, n, rebased)
        # Also when the attempt resumes here: a person may have changed the branch since.
        if rebased.moved or attempt.resumed_from is not None:
            failing = _gates_again(run, attempt, tree)
            if failing and res is not None:
                failed = f"gate {', '.join(failing)} fails on the resolved tree"
                return _conflicted(run, attempt, tree, res, rebased, failed)
            if failing:
                return _refuse(run, n, MERGE_CONFLICT, [], _gates_failed(ws, rebased.base, failing))
        if res is not None:
            if (blocked := resolution.review(run, attempt, tree, res)) is not None:
                return _conflicted(run, attempt, tree, res, rebased, blocked)
            resolution.passed(run, attempt, res, rebased.new_tip)
            _rebased(run, ws, n, rebased)
        message = f"Merge {run.ticket_id}: {run.ticket.title}"
        merged = queue.merge(
            ws,
            strategy=tree.strategy,
            message=message,
            tk_file=_tk_file(run),
            tk_text=closed_text(),
        )
    except (WorkspaceError, GitError) as exc:
        if res is not None and _under_way(run, res):
            resolution.give_up(run, attempt, tree, res, f"git failed: {exc}")
        return _refuse(run, n, MERGE_REFUSED, [], f"merge refused: {exc}")
    except TfFsmError as exc:  # e.g. a prompt template refused: its exit code, rebase undone
        if res is not None and _under_way(run, res):
            resolution.give_up(run, attempt, tree, res, str(exc))
        raise
    run.event(
        wev.MergeCompleted, n, commit=merged.commit, base=ws.base_branch, already=merged.already
    )
    return None


def _rebased(run: RunContext, ws: Workspace, n: int, rebased: queue.Rebased) -> None:
    """Journal the rebase, with the commit each checkpoint became (so the shas shown are on
    the branch, and then on the base branch)."""
    became = rebased_commits(ws.git, rebased.base, rebased.old_tip, rebased.new_tip)
    run.event(
        wev.MergeRebased,
        n,
        baseSha=rebased.base,
        oldTip=rebased.old_tip,
        newTip=rebased.new_tip,
        checkpoints=became,
    )


def _conflicted(
    run: RunContext,
    attempt: AttemptContext,
    tree: TicketWorktree,
    res: resolution.Resolution,
    rebased: queue.Rebased,
    why: str,
) -> MergeRefusal:
    """A resolution that failed: given up (its work kept under a ref), then the conflict is
    left for a person, or the attempt is run again (`_unresolved`)."""
    failed = resolution.give_up(run, attempt, tree, res, why)
    conflicted = dataclasses.replace(rebased, conflict=list(res.files))
    return _unresolved(run, attempt, tree, conflicted, failed)


def _unresolved(
    run: RunContext,
    attempt: AttemptContext,
    tree: TicketWorktree,
    rebased: queue.Rebased,
    agent: str | None,
) -> MergeRefusal:
    """A conflict no agent resolved (`agent`: why, a sentence). With workspace.conflicts.mode
    rerun (and a human mode aside) the ticket's branch starts again from the base's tip, its
    work kept under `refs/tf/<id>/attempt-<n>`, and the attempt ends blocked; else the
    ticket waits for a person."""
    ws, n = tree.ws, attempt.number
    if run.settings.settings.workspace.conflicts.mode != "rerun":
        return _refuse(run, n, MERGE_CONFLICT, rebased.conflict, _conflict(ws, rebased, agent))
    ref = reset_to(ws, rebased.base, keep_as=f"attempt-{n}", bookkeeping=True)
    again = (
        f"merge conflict: rebasing {ws.branch} onto {ws.base_branch} ({rebased.base[:12]}) "
        f"conflicts in {_shown(rebased.conflict)}. {agent + ' ' if agent else ''}The ticket "
        f"runs again from {ws.base_branch}'s tip (workspace.conflicts.mode rerun)"
        + (f"; this attempt's work is kept at {ref}" if ref else "")
    )
    if ref is not None:
        run.event(
            wev.WorkSetAside,
            n,
            ref=ref,
            head=rebased.base,
            fork=rebased.base,
            reason=f"workspace.conflicts.mode rerun: the next attempt starts from "
            f"{rebased.base[:12]}",
        )
    refused = _refuse(run, n, MERGE_CONFLICT, rebased.conflict, again)
    return dataclasses.replace(refused, rerun=True)


def _under_way(run: RunContext, res: resolution.Resolution) -> bool:
    """Is `res` still to be ended (its end not journaled yet)?"""
    unfinished = unfinished_resolution(run.store.read_events().events)
    return unfinished is not None and unfinished.number == res.number


def _tk_file(run: RunContext) -> str:
    return run.ticket.path.relative_to(run.root).as_posix()


def _gates_again(run: RunContext, attempt: AttemptContext, tree: TicketWorktree) -> list[str]:
    """The required gate commands on the rebased tree, once each (no feedback round: the
    fixer is not sent back in the queue); the names of those that block."""
    wf, n = run.settings.workflow, attempt.number
    if not wf.qualityGates:
        return []

    def record(result: GateResult, round_: int) -> None:
        log = f"gates/attempt-{n}/merge-{result.name}.log"
        record_gate(run, n, result, log, reason=f"after the rebase: {result.summary}")

    outcome = run_gates(
        wf.qualityGates,
        tree.path,
        default_max=0,
        feedback=False,
        redact=run.store.redactor,
        env=gate_env(run.ticket_id, n),
        on_result=record,
        send_back=lambda *a: None,
        can_block=wf.enableQualityGate,
        baseline=baseline_of(run),
    )
    return [outcome.blocking.name] if outcome.blocking is not None else []


def _refuse(
    run: RunContext, n: int, failure_class: str, files: list[str], reason: str
) -> MergeRefusal:
    run.event(wev.MergeRefused, n, failureClass=failure_class, files=files, reason=reason)
    return MergeRefusal(reason)


def _conflict(ws: Workspace, rebased: queue.Rebased, agent: str | None) -> str:
    """The reason of a conflict left for a person: what conflicts, why no agent resolved it
    or how its resolution failed (`agent`, a sentence), and what to do."""
    return (
        f"merge conflict: rebasing {ws.branch} onto {ws.base_branch} ({rebased.base[:12]}) "
        f"conflicts in {_shown(rebased.conflict)}; not merged, not closed. "
        f"{agent + ' ' if agent else ''}Resolve it in {ws.tree} (`git rebase "
        f"{ws.base_branch}`, fix the files, `git rebase --continue`), then `tf-fsm run "
        f"{ws.ticket_id}` merges it (the gate commands run again)"
    )


def _shown(paths: list[str]) -> str:
    return ", ".join(paths[:10]) + (" ..." if len(paths) > 10 else "")


def _gates_failed(ws: Workspace, base: str, failing: list[str]) -> str:
    return (
        f"merge refused: after rebasing {ws.branch} onto {ws.base_branch} ({base[:12]}), gate "
        f"{', '.join(failing)} fails; not merged, not closed. Fix it in {ws.tree} (the fix "
        f"is committed on {ws.branch}), then `tf-fsm run {ws.ticket_id}` merges it"
    )
