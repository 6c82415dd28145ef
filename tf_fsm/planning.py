"""`tf-fsm run --plan` and `tf-fsm prompts`: what a run would do, computed without running,
locking or writing anything."""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from tf_fsm.context import AttemptContext
from tf_fsm.escalation import detect_same_failure, phase_plan, resolve, should_retry, stopped
from tf_fsm.executors.accounting import BudgetCheck, budget_check, ticket_usage
from tf_fsm.machine import PHASES, AttemptFacts
from tf_fsm.orchestrator import RunOptions, TicketRun
from tf_fsm.phases import PhaseRunner
from tf_fsm.prompts import PromptLibrary, template_for


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
        if not run._closed_in_tk(cur.attemptNumber, cur.startedAt):
            why = "retry-state.json records the close; run would only close the tk ticket"
            return Step("already_closed", None, why)
    if state is not None and cur is not None and state.has_open_attempt:
        attempt = run._attempt_from_context(cur.attemptNumber, cur.trigger, cur.tier)
        point = run.resume_target(cur.attemptNumber, run.store.read_events().events)
        attempt.facts.resume_phase = point.phase
        attempt.finished = point.finished and point.phase == "close"
        where = f"resumes at {point.phase} ({point.reason})"
        why = f"attempt {cur.attemptNumber} is {cur.status}: {where}"
        return Step("resume", attempt, why)
    if stopped(state) and state is not None:
        from tf_fsm.same_failure import stop_reason

        return Step("exhausted", None, stop_reason(state, run.ticket_id))
    if state is None and run.settings.max_retries == 0:
        return Step("exhausted", None, "workflow.escalation.maxRetries is 0: no attempt may run")
    if state is not None and not should_retry(state, run.settings):
        return Step("exhausted", None, f"max retries ({run.settings.max_retries}) exceeded")
    check = budget_check(run, state)  # what run checks before a new attempt, as it does
    if check is not None and check.refusal is not None:
        return Step("exhausted", None, check.refusal, check)
    trigger = run.next_trigger(state)
    why = "first attempt" if trigger == "initial" else f"retry after a blocked attempt ({trigger})"
    return Step("new_attempt", run.new_attempt_context(state, trigger), why, check)


def plan(run: TicketRun) -> dict[str, Any]:
    action, attempt, why, check = next_step(run)
    out: dict[str, Any] = {"ticket": run.ticket_id, "action": action, "why": why}
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
    return out


def template_table(root: Path | None) -> list[dict[str, str]]:
    """Which template file each (phase, role) uses, and its frontmatter."""
    from tf_fsm.config import REVIEWER_ROLES
    from tf_fsm.phases import SINGLE_ROLE

    library = PromptLibrary(root)
    rows = []
    for phase in PHASES:
        roles = list(REVIEWER_ROLES) if phase in ("review", "verify") else [SINGLE_ROLE[phase][0]]
        for role in roles:
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
    root: Path | None, phase: str, role: str | None, attempt: int, ticket_id: str | None
) -> str:
    """One phase prompt: with a real ticket's context (`--ticket`) or an example one."""
    from tf_fsm.config import LoadedSettings, load_settings, settings_from_dict
    from tf_fsm.context import prompt_context
    from tf_fsm.phases import SINGLE_ROLE
    from tf_fsm.state import SEVERITIES

    role = role or ("reviewer-general" if phase in ("review", "verify") else SINGLE_ROLE[phase][0])
    settings: LoadedSettings = load_settings(root) if root is not None else settings_from_dict({})
    if ticket_id is not None:
        if root is None:
            raise ValueError("--ticket needs a project")
        from tf_fsm.executors import make_executor
        from tf_fsm.orchestrator import QuietObserver

        run = TicketRun(
            root, ticket_id, RunOptions(), settings, make_executor(settings, root), QuietObserver()
        )
        context_ = next_step(run).attempt
        if context_ is not None:
            runner = PhaseRunner(run, context_)
            artifacts = {(p, r): a for p, r, a in runner.invocations()}
            output = run.store.dir / artifacts.get((phase, role), f"{phase}.md")
            return run.prompts.render(
                template_for(phase, role), runner._context(phase, role, output)
            )
    library = PromptLibrary(root)
    resolution = resolve(attempt, settings, frontmatter=library.frontmatter())
    plan_ = phase_plan(attempt, settings, None, resolution)
    facts = AttemptFacts("EXAMPLE-1", attempt=attempt)
    prior = None
    if attempt > 1:
        from tf_fsm.prompts import fence_untrusted

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
            output=where / f"{phase}.md",
            chain_context=where / "chain-context.json",
            flags=RunOptions().flags(),
            fail_on=list(settings.workflow.failOn),
        ),
    )
