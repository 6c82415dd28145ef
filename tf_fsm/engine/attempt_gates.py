"""The quality-gate commands of one attempt (docs/gates.md): checked before the attempt begins,
then run by its verify phase with the gate's inner loop, each run logged and journaled.

`tf_fsm.engine.gates` runs the commands and words the feedback (no ticket, no journal); this
module ties them to a run: its store, its journal, and its fixer (through the `render` and
`invoke` of the attempt's phases).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from tf_fsm.core import journal as ev
from tf_fsm.engine.gates import (
    GateOutcome,
    GateResult,
    check_gates,
    gate_baseline,
    gate_env,
    run_gates,
    sample_feedback,
)
from tf_fsm.errors import PromptTemplateError

if TYPE_CHECKING:
    from tf_fsm.engine.api import RunContext
    from tf_fsm.engine.context import AttemptContext
    from tf_fsm.settings.schema import QualityGate, Workflow
    from tf_fsm.workspace.baseline import Lookup
    from tf_fsm.workspace.judgement import BaseResult

#: renders one prompt: (phase, role, artifact, gate feedback) -> its text
Render = Callable[..., str]
#: runs one agent invocation: (phase, role, artifact, prompt, label) -> a failure or None
Invoke = Callable[..., "str | None"]


def feedback_possible(wf: Workflow) -> bool:
    """Can a failing gate send the fixer back in this attempt? Not when the fixer is off, nor
    when workflow.enableQualityGate is false (gates are reported, never block)."""
    return bool(wf.qualityGates) and wf.enableFixer and wf.enableQualityGate


def check_before_attempt(run: RunContext, attempt: AttemptContext, render: Render) -> None:
    """Before anything of the attempt runs: every gate can start (else a SettingsError, exit
    2), and the fix template renders with gate feedback too (else a PromptTemplateError)."""
    wf = run.settings.workflow
    if "verify" not in attempt.facts.runs or not wf.qualityGates:
        return
    check_gates(wf.qualityGates, run.tree.path, run.settings.path)
    if feedback_possible(wf):
        sample = sample_feedback(run.store.redactor)
        render("fix", "fixer", "gate-fix-1.md", gate_feedback=sample)


def run_attempt_gates(
    run: RunContext, attempt: AttemptContext, feedback: bool, render: Render, invoke: Invoke
) -> GateOutcome:
    """The gates' inner loop. Feedback rounds only when the review counts pass: when they
    block, the attempt is blocked anyway and the gates are run once for the record."""
    wf, n = run.settings.workflow, attempt.number

    def record(result: GateResult, round_: int) -> None:
        log = f"gates/attempt-{n}/{result.name}-try-{round_}.log"
        record_gate(run, n, result, log, innerTry=round_, reason=result.summary)

    def send_back(message: str, round_: int, failed: list[GateResult]) -> str | None:
        artifact = f"gate-fix-{round_}.md"
        try:  # rendered before GateFeedbackSent: nothing claims feedback that was never sent
            prompt = render("fix", "fixer", artifact, gate_feedback=message)
        except PromptTemplateError as exc:
            return f"verify: the fix prompt with quality-gate feedback cannot be rendered: {exc}"
        run.event(
            ev.GateFeedbackSent,
            n,
            innerTry=round_,
            gates=[r.name for r in failed],
            bytes=len(message.encode("utf-8")),
        )
        failure = invoke("fix", "fixer", artifact, prompt, label=f"fix-fixer-gate-{round_}")
        if failure is None:  # the gates run again, in the ticket's tree
            run.tree.before_commands(run, n)
        return failure

    run.tree.before_commands(run, n)
    return run_gates(
        wf.qualityGates,
        run.tree.path,
        default_max=wf.qualityGateMaxRetries,
        feedback=feedback and feedback_possible(wf),
        redact=run.store.redactor,
        env=gate_env(run.ticket_id, n),
        on_result=record,
        send_back=send_back,
        can_block=wf.enableQualityGate,
        baseline=baseline_of(run),
    )


def record_gate(run: RunContext, n: int, result: GateResult, log: str, **fields: object) -> None:
    """One gate command's run on attempt `n`: its output in the artifact `log`, its result
    journaled (`GateEvaluated`, with `fields`: the inner try, the reason)."""
    run.store.write_artifact(log, f"# {result.summary}\n{result.output}")
    if result.preexisting:
        fields["preexisting"] = True
    run.event(
        ev.GateEvaluated,
        n,
        flush=False,
        name=result.name,
        passed=result.passed,
        exitCode=result.exit_code,
        durationMs=round(result.duration * 1000),
        required=result.required,
        **fields,
    )


def baseline_of(run: RunContext) -> Lookup:
    """What a failing required gate is judged against: its result on the ticket's base
    commit, computed when first needed and cached by the commit (docs/gates.md); none
    outside git, where a failing required gate blocks as it always did. The base commit is
    only looked for then too: gates that pass cost no git process."""
    found: list[Lookup | None] = []

    def of(gate: QualityGate) -> BaseResult | None:
        if not found:
            sha = run.tree.base_commit()
            note = lambda text: run.observer.note(run.ticket_id, text)  # noqa: E731
            gates = run.settings.workflow.qualityGates
            found.append(None if sha is None else gate_baseline(run.root, sha, gates, note))
        return found[0](gate) if found[0] is not None else None

    return of
