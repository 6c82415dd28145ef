"""`tf-fsm run --plan` and `tf-fsm prompts`: what a run would do, computed without running,
locking or writing anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from tf_fsm.core.artifacts import agent_artifact
from tf_fsm.core.escalation import (
    NO_ATTEMPT_ALLOWED,
    detect_same_failure,
    phase_plan,
    resolve,
    should_retry,
    stopped,
)
from tf_fsm.core.journal import JournalRead, RetryStateReset, timestamp
from tf_fsm.core.machine import PHASES, AttemptFacts
from tf_fsm.core.state import RetryState
from tf_fsm.engine.accounting import BudgetCheck, budget_check, ticket_usage
from tf_fsm.engine.context import AttemptContext
from tf_fsm.engine.orchestrator import RunOptions, TicketRun
from tf_fsm.engine.phases import PhaseRunner
from tf_fsm.engine.prompts import PromptLibrary, template_for
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.store import TicketStore


class Step(NamedTuple):
    action: str
    attempt: AttemptContext | None  # the attempt it would run
    why: str
    budget: BudgetCheck | None = None  # checked when a new attempt would start


def next_step(run: TicketRun) -> Step:
    """What `run` would do next. Mirrors TicketRun._drive, read-only."""
    state = run.store.load_retry_state()
    cur = state.current if state else None
    if state is not None and cur is not None and cur.status == "closed":
        if run.ticket.status == "closed":
            return Step("already_closed", None, "the ticket is already closed")
        if not run.closed_in_tk(cur.attemptNumber, cur.startedAt):
            why = "retry-state.json records the close; run would only close the tk ticket"
            return Step("already_closed", None, why)
    if state is not None and cur is not None and state.has_open_attempt:
        attempt = run.attempt_from_context(cur.attemptNumber, cur.trigger, cur.tier)
        point = run.resume_target(cur.attemptNumber, run.store.read_events().events)
        attempt.facts.resume_phase = point.phase
        attempt.finished = point.finished and point.phase == "close"
        where = f"resumes at {point.phase} ({point.reason})"
        why = f"attempt {cur.attemptNumber} is {cur.status}: {where}"
        return Step("resume", attempt, why)
    if stopped(state) and state is not None:
        from tf_fsm.engine.same_failure import stop_reason

        return Step("exhausted", None, stop_reason(state, run.ticket_id))
    if state is None and run.settings.max_retries == 0:
        return Step("exhausted", None, NO_ATTEMPT_ALLOWED)
    if state is not None and not should_retry(state, run.settings):
        return Step("exhausted", None, f"max retries ({run.settings.max_retries}) exceeded")
    check = budget_check(run, state)  # what run checks before a new attempt, as it does
    if check is not None and check.refusal is not None:
        return Step("exhausted", None, check.refusal, check)
    trigger = run.next_trigger(state)
    why = "first attempt" if trigger == "initial" else f"retry after a blocked attempt ({trigger})"
    return Step("new_attempt", run.new_attempt_context(state, trigger), why, check)


class _AfterReset(TicketStore):
    """The ticket's files as `run --retry-reset` leaves them, read-only: no retry state, and a
    RetryStateReset at the end of the journal (the budget counts from it)."""

    def __init__(self, store: TicketStore, backup: str, ts: str) -> None:
        super().__init__(store.knowledge_dir, store.ticket_id, store.redactor)
        self.reset_event = RetryStateReset(ts=ts, ticket=store.ticket_id, backup=backup)

    def load_retry_state(self) -> RetryState | None:
        return None

    def read_events(self) -> JournalRead:
        read = super().read_events()
        return JournalRead([*read.events, self.reset_event], read.torn_tail)


def _plan_reset(run: TicketRun) -> dict[str, Any]:
    """`--retry-reset` in a plan: which backup `run --retry-reset` would move retry-state.json
    to (its name carries the time of the run), and the run seen as it would be after it."""
    path = run.store.retry_state_path
    if not path.is_file():
        return {"backup": None, "why": "no retry-state.json: nothing to move aside"}
    now = run.now()
    backup = run.store.retry_backup_path(now).name
    run.store = _AfterReset(run.store, backup, timestamp(now))
    why = f"retry-state.json would be moved aside to {backup} (named for the run's time)"
    return {"backup": backup, "why": why}


def plan(run: TicketRun) -> dict[str, Any]:
    """What `run` would do. With `--retry-reset`, as it would be after the reset (the backup
    is named, nothing is moved): `run` here is only for planning, its store is replaced."""
    reset = _plan_reset(run) if run.options.retry_reset else None
    action, attempt, why, check = next_step(run)
    out: dict[str, Any] = {"ticket": run.ticket_id, "action": action, "why": why}
    if reset is not None:
        out["retryReset"] = reset
    repeat = detect_same_failure(run.store.load_retry_state(), run.settings)
    if repeat is not None:  # what the short-circuit decided after the last attempt
        out["sameFailure"] = {
            "attempts": [repeat.previous, repeat.attempt],
            "signature": repeat.signature,
            "action": repeat.action,
            "reason": repeat.reason,
        }
    budget = run.settings.workflow.escalation.maxCostUsd
    if budget is not None:
        if check is None:  # no attempt would start: nothing to forecast
            usage = ticket_usage(run.store.read_events().events)
            check = BudgetCheck(usage.cost_usd if usage else 0.0, budget, 0.0, None)
        need = check.need
        out["budget"] = {
            "maxCostUsd": budget,
            "spentUsd": round(check.spent, 6),
            # the most the next attempt may cost, from the executor's prices; null: unknown
            "nextAttemptUpToUsd": round(need, 6) if need else None,
        }
    if attempt is None:
        return out
    runner = PhaseRunner(run, attempt)
    planned = {(p, r): a for p, r, a in runner.invocations()}
    phases = []
    start = PHASES.index(attempt.facts.resume_phase) if attempt.facts.resume_phase else 0
    for phase in PHASES[start:]:
        runs, reason = attempt.plan[phase]
        if phase == "fix" and runs:
            reason += " (decided after review)"
        calls = []
        for role in runner._roles(phase) if runs else []:
            chosen = attempt.resolution.roles[role]
            name = template_for(phase, role)
            template = run.prompts.find(name)
            output = run.store.dir / planned[(phase, role)]
            prompt = run.prompts.render(name, runner._context(phase, role, output))
            calls.append(
                {
                    "role": role,
                    "model": chosen.model,
                    "thinking": chosen.thinking,
                    "source": chosen.source,
                    "escalated": chosen.escalated,
                    "template": str(template.path),
                    "templateOrigin": template.origin,
                    "promptBytes": len(prompt.encode("utf-8")),
                    "output": planned[(phase, role)],
                }
            )
        phases.append({"phase": phase, "runs": runs, "reason": reason, "invocations": calls})
    out.update(
        attempt=attempt.number,
        trigger=attempt.trigger,
        tier=attempt.resolution.tier,
        escalatedRoles=attempt.resolution.escalated_roles,
        priorFailure=attempt.prior_failure is not None,
        phases=phases,
    )
    if any(p["phase"] == "verify" and p["runs"] for p in phases):
        out.update(gate_plan(runner))
    return out


def gate_plan(runner: PhaseRunner) -> dict[str, Any]:
    """The quality-gate commands the attempt's verify phase runs (docs/gates.md), in order, as
    they would start: argv, working directory, whether a failure blocks, how many times the
    fixer may be sent back for it, and why it cannot start (`run` then exits 2). They run
    with workflow.enableQualityGate false too, reported only. Empty when none are set."""
    from tf_fsm.engine.attempt_gates import feedback_possible
    from tf_fsm.engine.gates import argv_of, cwd_of, max_retries, start_problem

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
        }
        for gate in wf.qualityGates
    ]
    return {"qualityGates": gates}


def template_table(root: Path | None) -> list[dict[str, str]]:
    """Which template file each (phase, role) uses, and its frontmatter."""
    from tf_fsm.core.artifacts import roles
    from tf_fsm.settings.load import REVIEWER_ROLES

    library = PromptLibrary(root)
    rows = []
    for phase in PHASES:
        for role in roles(phase, REVIEWER_ROLES, closer=True):
            template = library.find(template_for(phase, role))
            rows.append(
                {
                    "phase": phase,
                    "role": role,
                    "template": template.name,
                    "origin": template.origin,
                    "path": str(template.path),
                    "model": template.meta.get("model", ""),
                    "thinking": template.meta.get("thinking", ""),
                }
            )
    return rows


EXAMPLE_TICKET = {
    "id": "EXAMPLE-1",
    "title": "An example ticket",
    "body": "The description of the ticket, as written in .tickets/<id>.md.",
}


def render_example(
    root: Path | None, phase: str, role: str | None, attempt: int | None, ticket_id: str | None
) -> str:
    """One phase prompt (`prompts show`). With a ticket: its real next attempt, as `run --plan`
    computes it, or attempt `attempt` of it when none would run (closed, exhausted). Without
    one: an example ticket on attempt `attempt` (default 1)."""
    from tf_fsm.core.artifacts import SINGLE_ROLE
    from tf_fsm.settings.load import load_settings, settings_from_dict

    role = role or ("reviewer-general" if phase in ("review", "verify") else SINGLE_ROLE[phase][0])
    settings: LoadedSettings = load_settings(root) if root is not None else settings_from_dict({})
    if ticket_id is not None:
        if root is None:
            from tf_fsm.errors import ProjectNotFoundError

            raise ProjectNotFoundError(Path.cwd())
        return _render_for_ticket(root, settings, phase, role, attempt, ticket_id)
    return _render_example(root, settings, phase, role, attempt or 1)


def _render_for_ticket(
    root: Path, settings: LoadedSettings, phase: str, role: str, attempt: int | None, ticket_id: str
) -> str:
    from tf_fsm.engine.orchestrator import QuietObserver
    from tf_fsm.errors import UsageError
    from tf_fsm.executors import make_executor

    run = TicketRun(
        root, ticket_id, RunOptions(), settings, make_executor(settings, root), QuietObserver()
    )
    step = next_step(run)
    saved = run.store.dir / "prompts"
    if step.attempt is not None:
        context_ = step.attempt
        if attempt is not None and attempt != context_.number:
            raise UsageError(
                f"--attempt {attempt} --ticket {ticket_id}: the ticket's next attempt is "
                f"{context_.number} ({step.why}); drop --attempt to render it, or drop "
                "--ticket to render an example ticket on any attempt"
            )
    else:
        state = run.store.load_retry_state()
        ran = state.current.attemptNumber if state is not None and state.current else 0
        if attempt is None:
            raise UsageError(
                f"{ticket_id}: no attempt would run ({step.action.replace('_', ' ')}: "
                f"{step.why}), so there is no next prompt; --attempt N renders attempt N "
                f"with this ticket, and the prompts of the attempts that ran are in {saved}"
            )
        if attempt <= ran:
            raise UsageError(
                f"--attempt {attempt}: {ticket_id}'s attempt {attempt} already ran; the "
                f"prompts it received are in {saved / f'attempt-{attempt}'}; a later attempt "
                f"({ran + 1} or more) renders as it would run"
            )
        context_ = _later_attempt(run, attempt, state)
    runner = PhaseRunner(run, context_)
    output = run.store.dir / agent_artifact(phase, role)
    return run.prompts.render(template_for(phase, role), runner._context(phase, role, output))


def _later_attempt(run: TicketRun, number: int, state: RetryState | None) -> AttemptContext:
    """Attempt `number` of a ticket no attempt would run on (closed, exhausted), as it would
    run were it allowed: its tier's models (never below the tier the ticket's next attempt
    would reach) and, after a blocked attempt, that attempt's failure."""
    from tf_fsm.core.escalation import next_tier
    from tf_fsm.engine.context import prior_failure

    trigger = "initial" if number == 1 else "quality_gate"
    tier = next_tier(state, run.settings) if state is not None else None
    frontmatter = run.prompts.frontmatter()
    resolution = resolve(number, run.settings, frontmatter=frontmatter, tier=tier)
    plan_ = phase_plan(number, run.settings, run.options.research, resolution)
    facts = AttemptFacts(
        run.ticket_id, attempt=number, runs=frozenset(p for p, (on, _) in plan_.items() if on)
    )
    fail_on = list(run.settings.workflow.failOn)
    prior = None
    if state is not None and number > 1:
        prior = prior_failure(state, run.store.read_artifact, fail_on, run.store.redactor)
    return AttemptContext(number, trigger, resolution, plan_, facts, prior)


def _render_example(
    root: Path | None, settings: LoadedSettings, phase: str, role: str, attempt: int
) -> str:
    from tf_fsm.core.state import SEVERITIES
    from tf_fsm.engine.context import prompt_context
    from tf_fsm.engine.prompts import fence_untrusted

    library = PromptLibrary(root)
    resolution = resolve(attempt, settings, frontmatter=library.frontmatter())
    plan_ = phase_plan(attempt, settings, None, resolution)
    facts = AttemptFacts(EXAMPLE_TICKET["id"], attempt=attempt)
    prior = None
    if attempt > 1:
        prior = {
            "attempt": attempt - 1,
            "kind": "quality_gate",
            "reason": "post-fix counts Major: 1 (failOn: Critical, Major)",
            "counts": dict.fromkeys(SEVERITIES, 0) | {"Major": 1},
            "fenced": fence_untrusted("- [Major] `src/example.py:1` - an example finding", str),
        }
    example = AttemptContext(
        attempt, "initial" if attempt == 1 else "quality_gate", resolution, plan_, facts, prior
    )
    where = Path("<artifact dir>")
    return library.render(
        template_for(phase, role),
        prompt_context(
            example,
            phase,
            resolution.roles[role],
            ticket=EXAMPLE_TICKET,
            artifact_dir=where,
            output=where / agent_artifact(phase, role),
            chain_context=where / "chain-context.json",
            flags=RunOptions().flags(),
            fail_on=list(settings.workflow.failOn),
        ),
    )
