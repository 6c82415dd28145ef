"""What an attempt runs with, before it runs (read-only; `run --plan` shows the same): a new
attempt's models, tier, phase plan and prior-failure summary, or an open attempt's as it
started, restored from its chain context for a resume."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tf_fsm.core.escalation import next_tier, phase_plan, resolve, retries_left
from tf_fsm.core.machine import AttemptFacts
from tf_fsm.core.resume import ResumePoint
from tf_fsm.core.state import RetryState
from tf_fsm.engine import context
from tf_fsm.engine.context import AttemptContext, journaled_prior_failure
from tf_fsm.engine.worktree import merge_facts
from tf_fsm.storage.layout import CHAIN_CONTEXT

if TYPE_CHECKING:
    from tf_fsm.engine.api import RunContext


def new_attempt(run: RunContext, state: RetryState | None, trigger: str) -> AttemptContext:
    """What the next new attempt would run with."""
    number = state.next_attempt_number if state else 1
    tier = next_tier(state, run.settings)  # the curve's, or above it after a same failure
    resolution = resolve(number, run.settings, frontmatter=run.prompts.frontmatter(), tier=tier)
    plan = phase_plan(number, run.settings, run.options.research, resolution)
    facts = AttemptFacts(
        run.ticket_id,
        attempt=number,
        # the machine's `start`/`retry` guard checks it again (the next step allowed it)
        retries_left=retries_left(state, run.settings),
        runs=frozenset(p for p, (runs, _) in plan.items() if runs),
    )
    facts.merges, facts.held = merge_facts(run, None)
    prior = (
        journaled_prior_failure(
            state,
            run.store.read_events().events,
            run.store.read_artifact,
            list(run.settings.workflow.failOn),
            run.store.redactor,
        )
        if state
        else None
    )
    if prior is not None and run.tree.kept:
        prior["kept"] = run.tree.kept  # where a `reset` rollback kept its commits
    return AttemptContext(number, trigger, resolution, plan, facts, prior)


def resumed_attempt(
    run: RunContext, number: int, trigger: str, tier: int | None, point: ResumePoint
) -> AttemptContext:
    """The open attempt `number` as it resumes at `point`."""
    attempt = attempt_from_context(run, number, trigger, tier)
    attempt.facts.resume_phase = point.phase
    attempt.finished = point.finished and point.phase == "close"
    attempt.ending = point.ending if attempt.finished else None
    return attempt


def attempt_from_context(
    run: RunContext, number: int, trigger: str, tier: int | None = None
) -> AttemptContext:
    """The resumed attempt runs with the models, tier and plan it started with."""
    resolution = resolve(number, run.settings, frontmatter=run.prompts.frontmatter(), tier=tier)
    plan = phase_plan(number, run.settings, run.options.research, resolution)
    runs = frozenset(p for p, (r, _) in plan.items() if r)
    facts = AttemptFacts(run.ticket_id, attempt=number, runs=runs)
    facts.merges, facts.held = merge_facts(run, number)
    fresh = AttemptContext(number, trigger, resolution, plan, facts)
    path = run.store.files.path(CHAIN_CONTEXT)
    return context.restore(context.load_saved(path), fresh, path, run.store.redactor)
