"""`tf-fsm run --plan`: what a run would do, computed without running, locking or writing
anything (`tf-fsm prompts` renders its prompts: tf_fsm.views.prompt_examples)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from tf_fsm.core.escalation import detect_same_failure
from tf_fsm.core.journal import RetryStateReset, timestamp
from tf_fsm.engine.accounting import BudgetCheck, ticket_usage
from tf_fsm.engine.context import AttemptContext
from tf_fsm.engine.orchestrator import TicketRun
from tf_fsm.engine.phases import PhaseRunner
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.layout import RETRY_STATE
from tf_fsm.views.plan_phases import phases_of

if TYPE_CHECKING:
    from tf_fsm.workspace.mode import Repository

#: the plan's `action` for each decision (a repaired tk close is reported as already closed)
ACTIONS = {
    "already_closed": "already_closed",
    "close_tk": "already_closed",
    "remove_workspace": "remove_workspace",
    "awaiting_merge": "awaiting_merge",
    "resume": "resume",
    "exhausted": "exhausted",
    "new_attempt": "new_attempt",
}


class Step(NamedTuple):
    action: str
    attempt: AttemptContext | None  # the attempt it would run
    why: str
    budget: BudgetCheck | None = None  # checked when a new attempt would start


class Reset(NamedTuple):
    """What `run --retry-reset` would do first: `report` for the plan, and the journal's
    `RetryStateReset` it would write (the budget counts from it); no marker when there is no
    retry-state.json to move aside."""

    report: dict[str, Any]
    marker: RetryStateReset | None


def next_step(run: TicketRun, reset: Reset | None = None) -> Step:
    """What `run` would do next (tf_fsm.core.next_step decides it, as for `run` itself),
    read-only; with `reset`, as the ticket would be after `--retry-reset`."""
    events = run.store.read_events().events
    state = None  # after a reset, as `run` would meet it: the file (even a corrupt one) is gone
    if reset is not None and reset.marker is not None:
        events = [*events, reset.marker]
    else:
        state = run.store.load_retry_state()
    step, budget = run.decide(state, events)
    cur = state.current if state else None
    if step.action == "resume" and cur is not None and step.resume is not None:
        point = step.resume
        attempt = run.resumed_attempt(cur.attemptNumber, cur.trigger, cur.tier, point)
        where = f"resumes at {point.where} ({point.reason})"
        return Step("resume", attempt, f"attempt {cur.attemptNumber} is {cur.status}: {where}")
    if step.action == "new_attempt":
        attempt = run.new_attempt_context(state, step.trigger or "initial")
        return Step("new_attempt", attempt, step.reason, budget.check)
    return Step(ACTIONS[step.action], None, step.reason, budget.check)


def _plan_reset(run: TicketRun) -> Reset:
    """`--retry-reset` in a plan: which backup `run --retry-reset` would move retry-state.json
    to (its name carries the time of the run), and the reset it would journal."""
    from tf_fsm.engine.reset import has_retry_state

    if not has_retry_state(run.store):
        return Reset({"backup": None, "why": f"no {RETRY_STATE}: nothing to move aside"}, None)
    now = run.now()
    backup = run.store.retry_backup_name(now)
    marker = RetryStateReset(ts=timestamp(now), ticket=run.ticket_id, backup=backup)
    why = f"{RETRY_STATE} would be moved aside to {backup} (named for the run's time)"
    return Reset({"backup": backup, "why": why}, marker)


def plan(run: TicketRun) -> dict[str, Any]:
    """What `run` would do. With `--retry-reset`, as it would be after the reset (the backup
    is named, nothing is moved)."""
    reset = _plan_reset(run) if run.options.retry_reset else None
    action, attempt, why, check = next_step(run, reset)
    out: dict[str, Any] = {"ticket": run.ticket_id, "action": action, "why": why}
    if reset is not None:
        out["retryReset"] = reset.report
    reset_away = reset is not None and reset.marker is not None
    state = None if reset_away else run.store.load_retry_state()
    repeat = detect_same_failure(state, run.settings)
    if repeat is not None:  # what the short-circuit decided after the last attempt
        out["sameFailure"] = {
            "attempts": [repeat.previous, repeat.attempt],
            "signature": repeat.signature,
            "action": repeat.action,
            "reason": repeat.reason,
        }
    if (budget := _budget(run, check, reset_away)) is not None:
        out["budget"] = budget
    if attempt is None:
        return out
    runner = PhaseRunner(run, attempt)
    phases = phases_of(run, runner, attempt)
    out.update(
        attempt=attempt.number,
        trigger=attempt.trigger,
        tier=attempt.resolution.tier,
        escalatedRoles=attempt.resolution.escalated_roles,
        priorFailure=attempt.prior_failure is not None,
        tree=tree_plan(run),
        phases=phases,
    )
    if any(p["phase"] == "verify" and p["runs"] for p in phases):
        out.update(gate_plan(runner))
    return out


def tree_plan(run: TicketRun) -> dict[str, Any]:
    """Where the attempt would run (`tree_for`), with the run's own flags (after
    `--retry-reset` no attempt is open)."""
    from tf_fsm.engine.worktree import shared_attempt

    options = run.options
    begun = None if options.retry_reset else shared_attempt(run.store)
    return tree_for(
        run.root,
        run.settings,
        run.ticket_id,
        explicit=options.worktree,
        parallel=options.parallel,
        shared_attempt=begun,
    )


def tree_for(
    root: Path,
    settings: LoadedSettings,
    ticket_id: str,
    *,
    explicit: bool | None,
    parallel: bool,
    shared_attempt: int | None,
    repo: Repository | None = None,
) -> dict[str, Any]:
    """Where a run of `ticket_id` would run: the ticket's own worktree or the project's tree,
    chosen as `run` chooses (tf_fsm.workspace.mode.choose, whose arguments these are), and
    nothing made. `why`: what chose it;
    `note`: the line the run would say about it; `refused`: why `run` would stop with exit 2
    instead (e.g. --worktree outside a git repository). `repo`: the root as already read, for
    a caller asking about many tickets."""
    from tf_fsm.errors import WorkspaceError
    from tf_fsm.workspace import mode, worktree
    from tf_fsm.workspace.model import branch_name, worktree_path

    repo = repo or mode.Repository(root, settings)
    branch = branch_name(settings, ticket_id)
    out: dict[str, Any] = {"worktree": False, "why": None, "note": None, "refused": None}
    try:
        chosen = mode.choose(
            root,
            settings,
            ticket_id,
            explicit=explicit,
            parallel=parallel,
            shared_attempt=shared_attempt,
            repo=repo,
        )
        exists = chosen.worktree and repo.has_branch(branch)
        base = None
        if exists:  # as `run` names it: its recorded base, else today's
            base = worktree.base_of(root, settings, ticket_id)[1]
        elif chosen.worktree:
            base = repo.base
    except WorkspaceError as exc:
        return {**out, "refused": exc.message, "summary": f"refused: {exc.message} (run exits 2)"}
    out.update(why=chosen.why, note=chosen.note)
    if not chosen.worktree:
        return {**out, "summary": f"the project's working tree ({chosen.why})"}
    path = worktree_path(root, settings, ticket_id)
    shown = path.relative_to(root) if path.is_relative_to(root) else path
    return {
        **out,
        "worktree": True,
        "path": str(path),
        "branch": branch,
        "base": base,
        "exists": exists,
        "uncommitted": len(chosen.uncommitted),
        "summary": f"the ticket's worktree {shown} (branch {branch} from {base})",
    }


def _budget(run: TicketRun, check: BudgetCheck | None, reset_away: bool) -> dict[str, Any] | None:
    """The ticket's budget (None when none is set): spent, and what the next attempt may cost."""
    budget = run.settings.workflow.escalation.maxCostUsd
    if budget is None:
        return None
    if check is None:  # no attempt would start: nothing to forecast
        usage = None if reset_away else ticket_usage(run.store.read_events().events)
        check = BudgetCheck(usage.cost_usd if usage else 0.0, budget, 0.0, None)
    need = check.need
    return {
        "maxCostUsd": budget,
        "spentUsd": round(check.spent, 6),
        # the most the next attempt may cost, from the executor's prices; null: unknown
        "nextAttemptUpToUsd": round(need, 6) if need else None,
    }


def gate_plan(runner: PhaseRunner) -> dict[str, Any]:
    """The quality-gate commands the attempt's verify phase runs (docs/gates.md), in order, as
    they would start: argv, working directory, whether a failure blocks, how many times the
    fixer may be sent back for it, and why it cannot start (`run` then exits 2). They run
    with workflow.enableQualityGate false too, reported only. Empty when none are set."""
    from tf_fsm.engine.attempt_gates import feedback_possible
    from tf_fsm.engine.gates import argv_of, cwd_of, max_retries, start_problem
    from tf_fsm.settings.gate_reports import whole_gate_warning

    wf, root = runner.wf, runner.run_.root
    if not wf.qualityGates:
        return {}
    feedback = feedback_possible(runner.wf)
    gates = [
        {
            "name": gate.name,
            "argv": argv_of(gate),
            "cwd": str(cwd_of(gate, root)),
            "required": gate.required,
            "blocks": gate.required and wf.enableQualityGate,
            # only a failing required gate sends the fixer back
            "feedbackRounds": (
                max_retries(gate, wf.qualityGateMaxRetries) if feedback and gate.required else 0
            ),
            "timeoutSeconds": gate.timeoutSeconds,
            "cannotStart": start_problem(gate, root),
            # its failure is never judged pre-existing: no report (docs/gates.md)
            "baselineWarning": whole_gate_warning(wf, index),
        }
        for index, gate in enumerate(wf.qualityGates)
    ]
    return {"qualityGates": gates}
