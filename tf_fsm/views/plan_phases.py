"""The phases `run --plan` lists for the attempt it would run (tf_fsm.views.plan): from where
the attempt starts, whether each phase runs and why, and its agent invocations with their
models, templates and prompt sizes; when an agent runs only sometimes (the verify reviewers,
after a fix), and what is left of an attempt whose phases all completed (its merge)."""

from __future__ import annotations

from typing import Any

from tf_fsm.core.machine import MERGE_PHASE, PHASES
from tf_fsm.engine.context import AttemptContext
from tf_fsm.engine.orchestrator import TicketRun
from tf_fsm.engine.phases import PhaseRunner
from tf_fsm.engine.prompts import template_for
from tf_fsm.settings.load import LoadedSettings


def phases_of(run: TicketRun, runner: PhaseRunner, attempt: AttemptContext) -> list[dict[str, Any]]:
    """The attempt's phases from where it starts: whether each runs, why, and its invocations
    with their models, templates and prompt sizes."""
    if attempt.finished:  # every phase completed: none runs again, no agent
        return [_ending(attempt)]
    planned = {(p, r): a for p, r, a in runner.invocations()}
    phases = []
    start = PHASES.index(attempt.facts.resume_phase) if attempt.facts.resume_phase else 0
    for phase in PHASES[start:]:
        runs, reason = attempt.plan[phase]
        when = None  # when the phase's agents run, if only sometimes
        if phase == "fix" and runs:
            reason += " (decided after review)"
        if phase == "verify":
            reason, when = _verify_agents(run.settings, attempt, reason)
        calls = []
        for role in runner._roles(phase) if runs and (phase != "verify" or when) else []:
            chosen = attempt.resolution.roles[role]
            name = template_for(phase, role)
            template = run.prompts.find(name)
            output = run.store.files.path(planned[(phase, role)])
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
                    **({"when": when} if when else {}),
                }
            )
        phases.append({"phase": phase, "runs": runs, "reason": reason, "invocations": calls})
    return phases


def _verify_agents(
    settings: LoadedSettings, attempt: AttemptContext, reason: str
) -> tuple[str, str | None]:
    """verify's reason, saying whether its reviewers run, and when (None: they do not): they
    re-review only after a fix, with workflow.postFixVerification "rereview"."""
    if not attempt.plan["fix"][0]:
        why = "without a fix the post-fix counts are review.md's"
        return f"{reason}; no reviewer runs: {why}", None
    if not settings.workflow.rereviews:
        why = "the post-fix counts are review.md's minus fixes.md's (postFixVerification: fixes)"
        return f"{reason}; no reviewer runs: {why}", None
    when = "only after a fix"
    why = "(workflow.postFixVerification: rereview); without one the counts are review.md's"
    return f"{reason}; its reviewers re-review {when} {why}", when


def _ending(attempt: AttemptContext) -> dict[str, Any]:
    """The one step left of a finished attempt: its merge, or recording its ending."""
    if attempt.ending == MERGE_PHASE:
        why = (
            "the merge queue: the branch rebased when its base moved, the required gate "
            "commands run again, then the merge; no phase runs again (a conflict goes to an "
            "agent's resolution, workspace.conflicts)"
        )
        return {"phase": MERGE_PHASE, "runs": True, "reason": why, "invocations": []}
    why = "completed: the attempt's ending is recorded (a passed one merges); no phase runs"
    return {"phase": "close", "runs": False, "reason": why, "invocations": []}
