"""`tf-fsm prompts`: which template each phase and role uses, and a phase prompt rendered
for a ticket's next attempt (as `run --plan` computes it) or for an example ticket; nothing
is run, locked or written."""

from __future__ import annotations

from pathlib import Path

from tf_fsm.core.artifacts import agent_artifact
from tf_fsm.core.escalation import phase_plan, resolve
from tf_fsm.core.machine import PHASES, AttemptFacts
from tf_fsm.core.state import RetryState
from tf_fsm.engine.context import AttemptContext
from tf_fsm.engine.orchestrator import RunOptions, TicketRun
from tf_fsm.engine.phases import PhaseRunner
from tf_fsm.engine.prompts import PromptLibrary, template_for
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.layout import CHAIN_CONTEXT
from tf_fsm.views.plan import next_step


def template_table(root: Path | None) -> list[dict[str, str]]:
    """Which template file each (phase, role) uses, and its frontmatter."""
    from tf_fsm.core.artifacts import RESOLUTION_REVIEW_PHASE, RESOLVE_PHASE, roles
    from tf_fsm.settings.load import REVIEWER_ROLES

    library = PromptLibrary(root)
    rows = []
    # the merge queue's conflict resolution: the resolver (workspace.conflicts.role) and the
    # review phase's reviewers, each with one template
    resolution = [
        (RESOLVE_PHASE, "workspace.conflicts.role"),
        (RESOLUTION_REVIEW_PHASE, "reviewers"),
    ]
    pairs = [(p, r) for p in PHASES for r in roles(p, REVIEWER_ROLES, closer=True, rereview=True)]
    for phase, role in pairs + resolution:
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
    saved = run.store.files.path("prompts")
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
    output = run.store.files.path(agent_artifact(phase, role))
    return run.prompts.render(template_for(phase, role), runner._context(phase, role, output))


def _later_attempt(run: TicketRun, number: int, state: RetryState | None) -> AttemptContext:
    """Attempt `number` of a ticket no attempt would run on (closed, exhausted), as it would
    run were it allowed: its tier's models (never below the tier the ticket's next attempt
    would reach) and, after a blocked attempt, that attempt's failure."""
    from tf_fsm.core.escalation import next_tier
    from tf_fsm.engine.context import journaled_prior_failure

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
        events = run.store.read_events().events
        read, redact = run.store.read_artifact, run.store.redactor
        prior = journaled_prior_failure(state, events, read, fail_on, redact)
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
            chain_context=where / CHAIN_CONTEXT,
            flags=RunOptions().flags(),
            fail_on=list(settings.workflow.failOn),
        ),
    )
