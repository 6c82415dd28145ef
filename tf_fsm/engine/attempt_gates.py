"""The quality-gate commands of one attempt (docs/gates.md): checked before the attempt begins,
then run by its verify phase with seed 004's inner loop, each run logged and journaled.

`tf_fsm.engine.gates` runs the commands and words the feedback (no ticket, no journal); this module
ties them to a PhaseRunner: its store, its journal and its fixer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tf_fsm.core import journal as ev
from tf_fsm.engine.gates import (
    GateOutcome,
    GateResult,
    check_gates,
    gate_env,
    run_gates,
    sample_feedback,
)
from tf_fsm.errors import PromptTemplateError

if TYPE_CHECKING:
    from tf_fsm.engine.phases import PhaseRunner


def feedback_possible(runner: PhaseRunner) -> bool:
    """Can a failing gate send the fixer back in this attempt? Not when the fixer is off, nor
    when workflow.enableQualityGate is false (gates are reported, never block)."""
    wf = runner.wf
    return bool(wf.qualityGates) and wf.enableFixer and wf.enableQualityGate


def check_before_attempt(runner: PhaseRunner) -> None:
    """Before anything of the attempt runs: every gate can start (else a SettingsError, exit
    2), and the fix template renders with gate feedback too (else a PromptTemplateError)."""
    if "verify" not in runner.attempt.facts.runs or not runner.wf.qualityGates:
        return
    settings = runner.run_.settings
    check_gates(runner.wf.qualityGates, runner.run_.root, settings.path)
    if feedback_possible(runner):
        sample = sample_feedback(runner.store.redactor)
        runner.render("fix", "fixer", "gate-fix-1.md", gate_feedback=sample)


def run_attempt_gates(runner: PhaseRunner, feedback: bool) -> GateOutcome:
    """Seed 004's inner loop. Feedback rounds only when the review counts pass: when they
    block, the attempt is blocked anyway and the gates are run once for the record."""
    run, n = runner.run_, runner.attempt.number

    def record(result: GateResult, round_: int) -> None:
        log = f"gates/attempt-{n}/{result.name}-try-{round_}.log"
        run.store.write_artifact(log, f"# {result.summary}\n{result.output}", sync_dir=False)
        run._event(
            ev.GateEvaluated, n, flush=False, name=result.name, passed=result.passed,
            exitCode=result.exit_code, durationMs=round(result.duration * 1000),
            innerTry=round_, required=result.required, reason=result.summary,
        )  # fmt: skip

    def send_back(message: str, round_: int, failed: list[GateResult]) -> str | None:
        artifact = f"gate-fix-{round_}.md"
        try:  # rendered before GateFeedbackSent: nothing claims feedback that was never sent
            prompt = runner.render("fix", "fixer", artifact, gate_feedback=message)
        except PromptTemplateError as exc:
            return f"verify: the fix prompt with quality-gate feedback cannot be rendered: {exc}"
        run._event(
            ev.GateFeedbackSent, n, innerTry=round_, gates=[r.name for r in failed],
            bytes=len(message.encode("utf-8")),
        )  # fmt: skip
        return runner._invoke("fix", "fixer", artifact, prompt, label=f"fix-fixer-gate-{round_}")

    return run_gates(
        runner.wf.qualityGates, run.root, default_max=runner.wf.qualityGateMaxRetries,
        feedback=feedback and feedback_possible(runner), redact=run.store.redactor,
        env=gate_env(run.ticket_id, n), on_result=record, send_back=send_back,
        can_block=runner.wf.enableQualityGate,
    )  # fmt: skip
