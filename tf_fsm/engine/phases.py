"""What each phase does: `PhaseRunner` runs one phase's agent invocations and the reports
tf_fsm writes itself. Which phases an attempt runs is `escalation.phase_plan` (pure)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tf_fsm._json_input import load_json
from tf_fsm.core import gate
from tf_fsm.core import journal as ev
from tf_fsm.core.artifacts import (
    PHASE_ARTIFACT,
    SINGLE_ROLE,
    agent_artifact,
    invocations,
    roles,
)
from tf_fsm.core.detection import blocking_counts, parse_review
from tf_fsm.core.reports import (
    merge_reviews,
    render_close_summary,
    render_post_fix_verification,
    zero_counts,
)
from tf_fsm.core.state import SEVERITIES
from tf_fsm.engine import resolution
from tf_fsm.engine.attempt_gates import check_before_attempt, run_attempt_gates
from tf_fsm.engine.context import AttemptContext, prompt_context, ticket_view
from tf_fsm.engine.gates import gate_rows
from tf_fsm.engine.invocation import invoke, prepared
from tf_fsm.engine.prompts import template_for
from tf_fsm.errors import CorruptStateError
from tf_fsm.fs.atomic import json_text
from tf_fsm.storage.layout import CHAIN_CONTEXT
from tf_fsm.storage.protocol import Store

if TYPE_CHECKING:
    from tf_fsm.engine.api import RunContext


def _sha256(store: Store, artifact: str) -> str:
    """The sha256 of an artifact the phase must have left (a missing one is a bug here)."""
    seen = store.seen(artifact)
    if seen is None:
        raise FileNotFoundError(f"{artifact} of {store.ticket_id} is missing")
    return seen.sha256


class PhaseRunner:
    """Runs the phases of one attempt; returns a one-line failure or None from `run`."""

    def __init__(self, run: RunContext, attempt: AttemptContext, retry_count: int = 0) -> None:
        """`retry_count`: the ticket's blocked attempts before this one (the close summary's)."""
        self.run_, self.attempt, self.retry_count = run, attempt, retry_count
        self.store = run.store
        self.wf = run.settings.workflow
        self.fail_on = list(self.wf.failOn)
        self.pre_counts: dict[str, int] = self._counts_from("review.md")
        self.post_counts: dict[str, int] = dict(self.pre_counts)
        self.gate_reason = ""
        self.gate_rows: list[dict[str, Any]] = []
        self.waiting: str | None = None
        self._phases = {
            "research": self._research,
            "implement": self._implement,
            "review": self._review,
            "fix": self._fix,
            "verify": self._verify,
            "close": self._close,
        }

    def restore_gate(self) -> None:
        """A run resumed at close takes the gate decided by this attempt's verify phase."""
        raw = self.store.read_artifact("post-fix-verification.json")
        try:
            data = load_json(raw) if raw else {}
        except ValueError as exc:  # it says it holds a verdict, but the verdict cannot be read
            path = self.store.files.path("post-fix-verification.json")
            raise CorruptStateError(path, f"not valid JSON: {exc}") from None
        if "verification_passed" not in data:
            return  # the resume already moved back to verify (TicketRun._resume)
        self.attempt.facts.gate_passed = bool(data["verification_passed"])
        self.post_counts = summary_counts(data.get("post_fix_counts", {}))
        self.gate_reason = str(data.get("reason", ""))
        # the rows the close summary and the failure signature are made of, as verify left them
        self.gate_rows = [dict(row) for row in data.get("gates", []) if isinstance(row, dict)]

    def run(self, phase: str) -> str | None:
        self.run_.event(
            ev.PhaseStarted, self.attempt.number, flush=False, phase=phase, roles=self._roles(phase)
        )
        self.store.take_written()  # what was written before the phase is not the phase's
        failure = self._phases[phase]()
        if failure is None:
            # The tree the phase left is committed before its completion is journaled: a
            # resume after a crash in between runs the phase again on top of that commit.
            self.run_.tree.after_phase(self.run_, self.attempt.number, phase)
            artifact = PHASE_ARTIFACT[phase]
            # none of them was fsynced: a resume after a crash checks every one
            files = {**self.store.take_written(), **self._outputs(phase)}
            sha = files.get(artifact) or _sha256(self.store, artifact)
            self.run_.event(
                ev.PhaseCompleted,
                self.attempt.number,
                # close is followed at once by the attempt's ending: one fsync for both
                flush=phase != "close",
                phase=phase,
                artifact=artifact,
                sha256=sha,
                files=files,
            )
        return failure

    # -- helpers ----------------------------------------------------------------------------

    def _outputs(self, phase: str) -> dict[str, str]:
        """The artifacts this phase's agents wrote, as their InvocationFinished recorded them
        (an agent's other files, its scratch state, are not the phase's result)."""
        outputs: dict[str, str] = {}
        for event in reversed(self.store.read_events().events):
            if isinstance(event, ev.PhaseStarted) and event.phase == phase:
                break
            if isinstance(event, ev.InvocationFinished) and event.ok and event.sha256:
                outputs.setdefault(event.artifact, event.sha256)  # the last try's
        return outputs

    def _roles(self, phase: str) -> list[str]:
        return roles(
            phase, self.wf.enableReviewers, self.wf.enableCloser, rereview=self.wf.rereviews
        )

    def _counts_from(self, name: str) -> dict[str, int]:
        text = self.store.read_artifact(name)
        return parse_review(text).counts if text else zero_counts()

    def _invoke(
        self,
        phase: str,
        role: str,
        artifact: str,
        prompt: str | None = None,
        label: str | None = None,
    ) -> str | None:
        """Run one agent invocation (tf_fsm.engine.invocation); `prompt` is given when it
        carries gate feedback, else it was rendered when the attempt began, or is now."""
        if prompt is None:
            prompt = self.attempt.prompts.get((phase, role, artifact))
        if prompt is None:
            prompt = self.render(phase, role, artifact)
        run, label = self.run_, label or f"{phase}-{role}"
        call = prepared(run, self.attempt, phase, role, artifact, prompt, label)
        return invoke(run, self.attempt, call, self._waiting)

    def _waiting(self, what: str) -> None:
        self.waiting = what

    def _context(
        self, phase: str, role: str, output: Path, gate_feedback: str | None = None
    ) -> dict[str, Any]:
        run = self.run_
        return prompt_context(
            self.attempt,
            phase,
            self.attempt.resolution.roles[role],
            ticket=ticket_view(run.ticket),
            artifact_dir=run.tree.agent_path(self.store.files.dir),
            output=run.tree.agent_path(output),
            chain_context=run.tree.agent_path(self.store.files.unchecked(CHAIN_CONTEXT)),
            flags=run.options.flags(),
            fail_on=self.fail_on,
            gate_feedback=gate_feedback,
        )

    def invocations(self) -> list[tuple[str, str, str]]:
        """(phase, role, artifact) of every agent invocation this attempt may make."""
        wf = self.wf
        return invocations(
            self.attempt.facts.runs, wf.enableReviewers, wf.enableCloser, rereview=wf.rereviews
        )

    def render(self, phase: str, role: str, artifact: str, gate_feedback: str | None = None) -> str:
        # The paths are only text in the prompt: the invocation checks those it hands on.
        context = self._context(phase, role, self.store.files.unchecked(artifact), gate_feedback)
        return self.run_.prompts.render(template_for(phase, role), context)

    def check_templates(self) -> None:
        """Render every template this attempt will use, so a template that uses a variable the
        orchestrator does not provide fails before the first phase, not in the middle (the fix
        template with a sample gate feedback too). The prompts are kept for the phases (without
        gate feedback they are the same text). Then check that every quality gate can start."""
        for phase, role, artifact in self.invocations():
            self.attempt.prompts[phase, role, artifact] = self.render(phase, role, artifact)
        resolution.check_templates(self.run_, self.attempt)
        check_before_attempt(self.run_, self.attempt, self.render)

    def _reviewers(
        self, phase: str, merged_name: str, title: str
    ) -> tuple[str | None, dict[str, int]]:
        texts: dict[str, str] = {}
        for role in self._roles(phase):
            name = agent_artifact(phase, role)
            failure = self._invoke(phase, role, name)
            if failure:
                return failure, {}
            texts[role] = self.store.read_artifact(name) or ""
        merged = merge_reviews(self.run_.ticket_id, texts, title)
        self.store.write_artifact(merged_name, merged.text)
        return None, merged.counts

    # -- the phases -------------------------------------------------------------------------

    def _research(self) -> str | None:
        return self._invoke("research", *SINGLE_ROLE["research"])

    def _implement(self) -> str | None:
        return self._invoke("implement", *SINGLE_ROLE["implement"])

    def _review(self) -> str | None:
        failure, counts = self._reviewers("review", "review.md", "Review")
        if failure:
            return failure
        self.pre_counts = self.post_counts = counts
        facts = self.attempt.facts
        if self.wf.enableFixer and not blocking_counts(counts, self.fail_on):
            facts.runs = facts.runs - {"fix"}
            self.attempt.plan["fix"] = (False, "review.md has no failOn findings")
            self.run_.write_chain_context(self.attempt)  # a resume must see the same plan
        return None

    def _fix(self) -> str | None:
        return self._invoke("fix", *SINGLE_ROLE["fix"])

    def _verify(self) -> str | None:
        mode: str = self.wf.postFixVerification
        fix_ran = "fix" in self.attempt.facts.runs
        if not fix_ran:
            mode, post = "no-fix", dict(self.pre_counts)
        elif mode == "rereview":
            failure, post = self._reviewers("verify", "post-fix-review.md", "Post-Fix Review")
            if failure:
                return failure
        else:
            fixed = self._counts_from("fixes.md")
            post = {s: max(0, self.pre_counts.get(s, 0) - fixed.get(s, 0)) for s in SEVERITIES}
        self.post_counts = post
        decision = gate.decide(post, self.fail_on, enabled=self.wf.enableQualityGate)
        passed, reason = not decision.blocked, decision.reason
        self.run_.event(
            ev.GateEvaluated,
            self.attempt.number,
            flush=False,  # durable with the phase's completion; a crash re-runs the verify
            name="review-counts",
            passed=passed,
            counts=post,
            failOn=self.fail_on,
            source="post-fix-verification",
            reason=reason,
        )
        gates = (
            run_attempt_gates(self.run_, self.attempt, passed, self.render, self._invoke)
            if self.wf.qualityGates
            else None
        )
        if gates is not None and gates.failure:
            return gates.failure
        if gates is not None and gates.blocking is not None:  # never with the gate disabled
            blocker = gates.blocking
            why = gate.command_failed(blocker.name, blocker.summary, gates.retries[blocker.name])
            decision = gate.with_command(decision, why)
            passed, reason = False, decision.reason
        self.attempt.facts.gate_passed = passed
        self.gate_reason = reason
        self.gate_rows = gate_rows(gates, self.store.redactor) if gates else []
        md, data = render_post_fix_verification(
            self.run_.ticket_id,
            mode=mode,
            pre=self.pre_counts,
            post=post,
            fail_on=self.fail_on,
            passed=passed,
            reason=reason,
            gates=self.gate_rows,
        )
        self.store.write_artifact("post-fix-verification.md", md)
        self.store.write_artifact("post-fix-verification.json", json_text(data))
        return None

    def _close(self) -> str | None:
        if self.wf.enableCloser:
            failure = self._invoke("close", *SINGLE_ROLE["close"])
            if failure:
                return failure
        closed = self.attempt.facts.gate_passed is True
        retry_count = self.retry_count
        res = self.attempt.resolution
        escalated = {r: res.roles[r].model for r in res.escalated_roles}
        after = retry_count if closed else retry_count + 1
        summary = render_close_summary(
            self.run_.ticket_id,
            closed=closed,
            attempt=self.attempt.number,
            trigger=self.attempt.trigger,
            counts=self.post_counts,
            fail_on=self.fail_on,
            escalated=escalated,
            reason=self.gate_reason,
            retry_count=0 if closed else after,
            max_retries=self.run_.settings.max_retries,
            gates=self.gate_rows,
        )
        self.store.write_artifact("close-summary.md", summary)
        return None


def summary_counts(data: dict[str, Any]) -> dict[str, int]:
    return {s: int(data.get(s, 0)) for s in SEVERITIES}
