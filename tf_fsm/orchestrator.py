"""One ticket, attempt by attempt, phase by phase: the one place that wires the others.

The machine decides which moves are legal, the escalation policies decide the models,
detection and the gate decide blocked or closed; this module runs the agents, persists each
step (retry-state at every boundary, the journal at every step) and reports progress.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol

from tf_fsm import journal as ev
from tf_fsm import tickets
from tf_fsm.config import LoadedSettings, load_settings
from tf_fsm.errors import TfFsmError
from tf_fsm.escalation import Resolution, resolve, should_retry
from tf_fsm.executors import Executor, make_executor
from tf_fsm.machine import (
    BLOCKED,
    INITIAL,
    PHASES,
    AttemptFacts,
    TicketModel,
    lifecycle,
    phase_of,
    state_of_attempt,
)
from tf_fsm.phases import PhaseRunner, phase_plan
from tf_fsm.state import (
    RetryState,
    finish_attempt,
    new_state,
    reopen_attempt,
    start_attempt,
    update_current,
)
from tf_fsm.store import TicketStore

OutcomeStatus = Literal["closed", "blocked", "exhausted", "error", "already_closed"]


@dataclass(frozen=True)
class RunOptions:
    once: bool = False
    retry_reset: bool = False
    research: bool | None = None  # --with-research / --no-research; None = settings decide
    auto: bool = False
    create_followups: bool = False
    simplify_tickets: bool = False
    final_review_loop: bool = False
    retry_trigger: str = "manual_retry"  # how a retry this caller starts is recorded

    def flags(self) -> dict[str, Any]:
        return {
            "research": self.research,
            "auto": self.auto,
            "createFollowups": self.create_followups,
            "simplifyTickets": self.simplify_tickets,
            "finalReviewLoop": self.final_review_loop,
            "once": self.once,
        }


@dataclass(frozen=True)
class Outcome:
    ticket_id: str
    status: OutcomeStatus
    attempt: int
    attempts_run: int
    retry_count: int
    max_retries: int
    reason: str


class Observer(Protocol):
    def phase_started(
        self, ticket: str, attempt: int, phase: str, role: str, model: str
    ) -> None: ...
    def phase_finished(
        self, ticket: str, attempt: int, phase: str, role: str, ok: bool
    ) -> None: ...
    def note(self, ticket: str, text: str) -> None: ...


class QuietObserver:
    def phase_started(self, ticket: str, attempt: int, phase: str, role: str, model: str) -> None:
        pass

    def phase_finished(self, ticket: str, attempt: int, phase: str, role: str, ok: bool) -> None:
        pass

    def note(self, ticket: str, text: str) -> None:
        pass


def utc_now() -> datetime:
    return datetime.now(UTC)


def knowledge_dir(root: Path, settings: LoadedSettings) -> Path:
    configured = Path(settings.workflow.knowledgeDir)
    return configured if configured.is_absolute() else root / configured


@dataclass
class _Attempt:
    """What one attempt runs with; persisted in chain-context.json so a resume keeps it."""

    number: int
    trigger: str
    resolution: Resolution
    plan: dict[str, tuple[bool, str]]
    facts: AttemptFacts
    extra: dict[str, Any] = field(default_factory=dict)


class TicketRun:
    def __init__(
        self,
        root: Path,
        ticket_id: str,
        options: RunOptions,
        settings: LoadedSettings,
        executor: Executor,
        observer: Observer,
        now: Callable[[], datetime] = utc_now,
    ) -> None:
        self.root, self.options, self.settings = root, options, settings
        self.store = TicketStore(knowledge_dir(root, settings), ticket_id)  # validates the id
        self.ticket_id = ticket_id
        self.ticket = tickets.read(root, ticket_id)
        self.executor, self.observer, self.now = executor, observer, now

    # -- persistence helpers --------------------------------------------------------------

    def _event(self, cls: type[ev.Event], attempt: int | None, **fields: Any) -> None:
        self.store.append_event(
            cls(ts=ev.timestamp(self.now()), ticket=self.ticket_id, attempt=attempt, **fields)
        )

    def _save(self, state: RetryState) -> RetryState:
        self.store.save_retry_state(state)
        return state

    def _outcome(self, state: RetryState, status: OutcomeStatus, runs: int, reason: str) -> Outcome:
        cur = state.current
        return Outcome(
            self.ticket_id,
            status,
            cur.attemptNumber if cur else 0,
            runs,
            state.retryCount,
            self.settings.max_retries,
            reason,
        )

    # -- the run --------------------------------------------------------------------------

    def run(self) -> Outcome:
        self.executor.check()
        with self.store.lock():
            if self.options.retry_reset:
                backup = self.store.reset_retry_state(self.now())
                if backup is not None:
                    self.observer.note(self.ticket_id, f"retry state moved aside to {backup.name}")
            return self._drive(self.store.load_retry_state())

    def _drive(self, state: RetryState | None) -> Outcome:
        cur = state.current if state else None
        if (
            state is not None
            and cur is not None
            and cur.status == "closed"
            and self.ticket.status == "closed"
        ):
            return self._outcome(state, "already_closed", 0, "ticket is already closed")
        if state is not None and state.has_open_attempt:
            attempt, state = self._resume(state)
        else:
            if state is not None and not should_retry(state, self.settings):
                reason = (
                    f"max retries ({self.settings.max_retries}) exceeded: blocked after "
                    f"{state.retryCount} attempts; "
                    f"`tf-fsm run {self.ticket_id} --retry-reset` starts over"
                )
                return self._outcome(state, "exhausted", 0, reason)
            first = cur is None or cur.status == "closed"
            trigger = "initial" if first else self.options.retry_trigger
            attempt, state = self._begin(state, trigger)
        runs = 1
        while True:
            state, status, reason = self._run_attempt(attempt, state)
            if status in ("closed", "error"):
                return self._outcome(state, status, runs, reason)
            if not should_retry(state, self.settings):
                self._exhausted(state)
                return self._outcome(state, "exhausted", runs, reason)
            if not self.settings.workflow.escalation.enabled or self.options.once:
                return self._outcome(state, "blocked", runs, reason)
            attempt, state = self._begin(state, "quality_gate")
            runs += 1

    def _exhausted(self, state: RetryState) -> None:
        cur = state.current
        number = cur.attemptNumber if cur else None
        self._event(
            ev.RetriesExhausted,
            number,
            retryCount=state.retryCount,
            maxRetries=self.settings.max_retries,
        )
        note = (
            f"tf-fsm: blocked after {state.retryCount} attempts (max retries "
            f"{self.settings.max_retries}); see {self.store.dir / 'close-summary.md'}"
        )
        self._edit_ticket(lambda text: tickets.with_note(text, note, self.now()))

    def _edit_ticket(self, change: Callable[[str], str]) -> None:
        from tf_fsm.store import atomic_write_text

        path = self.ticket.path
        atomic_write_text(path, change(path.read_text(encoding="utf-8")))

    # -- attempt boundaries -------------------------------------------------------------------

    def _begin(self, state: RetryState | None, trigger: str) -> tuple[_Attempt, RetryState]:
        state = state or new_state(self.ticket_id, self.now())
        number = state.next_attempt_number
        resolution = resolve(number, self.settings)
        plan = phase_plan(number, self.settings, self.options.research, resolution)
        state = start_attempt(
            state,
            trigger=trigger,
            escalation=resolution.escalation_record(),
            fail_on=list(self.settings.workflow.failOn),
            now=self.now(),
        )
        state = self._save(state)
        facts = AttemptFacts(
            self.ticket_id,
            attempt=number,
            retries_left=1,  # checked by should_retry just before; the guard re-checks it
            runs=frozenset(p for p, (runs, _) in plan.items() if runs),
        )
        attempt = _Attempt(number, trigger, resolution, plan, facts)
        self._event(
            ev.AttemptStarted,
            number,
            trigger=trigger,
            escalation=resolution.escalation_record().to_json_dict(),
        )
        escalated = {r: resolution.roles[r].model for r in resolution.escalated_roles}
        if escalated:
            reason = "; ".join(resolution.roles[r].reason for r in escalated)
            self._event(
                ev.EscalationApplied, number, roles=escalated, tier=resolution.tier, reason=reason
            )
        if number > 1 and not plan["research"][0] and self.options.research is not False:
            self._event(
                ev.ResearchSkippedOnRetry,
                number,
                attemptCount=number - 1,
                lastFailureKind="quality_gate",
            )
        self._write_chain_context(attempt)
        if self.ticket.status == "open":
            self._edit_ticket(lambda text: tickets.with_field(text, "status", "in_progress"))
        return attempt, state

    def _write_chain_context(self, attempt: _Attempt) -> None:
        res = attempt.resolution
        context = {
            "ticketId": self.ticket_id,
            "attempt": attempt.number,
            "trigger": attempt.trigger,
            "tier": res.tier,
            "models": {
                role: {
                    "model": r.model,
                    "thinking": r.thinking,
                    "baseModel": r.base_model,
                    "escalated": r.escalated,
                    "reason": r.reason,
                }
                for role, r in res.roles.items()
            },
            "escalatedRoles": res.escalated_roles,
            "phases": {p: {"runs": runs, "reason": why} for p, (runs, why) in attempt.plan.items()},
            "flags": self.options.flags(),
            "artifactDir": str(self.store.dir),
        }
        self.store.write_artifact("chain-context.json", json.dumps(context, indent=2) + "\n")

    def _resume(self, state: RetryState) -> tuple[_Attempt, RetryState]:
        cur = state.current
        if cur is None:
            raise ValueError("nothing to resume")
        phase = cur.phase if cur.phase in PHASES else PHASES[0]
        if phase == "close" and "verification_passed" not in (
            self.store.read_artifact("post-fix-verification.json") or ""
        ):
            phase = "verify"  # close needs this attempt's gate decision; decide it again
        attempt = self._attempt_from_context(cur.attemptNumber, cur.trigger)
        attempt.facts.resume_phase = phase
        attempt.extra["resumed_from"] = cur.status
        state = self._save(reopen_attempt(state, self.now()))
        self._event(ev.AttemptResumed, cur.attemptNumber, phase=phase)
        self.observer.note(self.ticket_id, f"resuming attempt {cur.attemptNumber} at {phase}")
        return attempt, state

    def _attempt_from_context(self, number: int, trigger: str) -> _Attempt:
        """The resumed attempt runs with the models and plan it started with."""
        resolution = resolve(number, self.settings)
        plan = phase_plan(number, self.settings, self.options.research, resolution)
        raw = self.store.read_artifact("chain-context.json")
        if raw:
            try:
                saved = json.loads(raw)
            except json.JSONDecodeError:
                saved = {}
            if saved.get("attempt") == number:
                for role, info in saved.get("models", {}).items():
                    if role in resolution.roles:
                        base = resolution.roles[role]
                        resolution.roles[role] = type(base)(
                            role,
                            info["model"],
                            info.get("thinking"),
                            info.get("baseModel", base.base_model),
                            bool(info.get("escalated")),
                            info.get("reason", base.reason),
                        )
                plan = {
                    p: (bool(v["runs"]), str(v["reason"]))
                    for p, v in saved.get("phases", {}).items()
                } or plan
        facts = AttemptFacts(
            self.ticket_id, attempt=number, runs=frozenset(p for p, (r, _) in plan.items() if r)
        )
        return _Attempt(number, trigger, resolution, plan, facts)

    # -- one attempt ------------------------------------------------------------------------

    def _run_attempt(
        self, attempt: _Attempt, state: RetryState
    ) -> tuple[RetryState, OutcomeStatus, str]:
        cur = state.current
        if cur is None:
            raise ValueError("no attempt to run")
        machine = lifecycle()
        if "resumed_from" in attempt.extra:
            start_state = state_of_attempt(
                attempt.extra["resumed_from"], attempt.facts.resume_phase
            )
        else:
            previous = state.attempts[-2] if len(state.attempts) > 1 else None
            start_state = (
                BLOCKED if previous is not None and previous.status == "blocked" else INITIAL
            )
        model = TicketModel(attempt.facts, start_state)
        machine.attach(model)
        try:
            if start_state == INITIAL:
                machine.fire(model, "start")
            elif start_state == BLOCKED:
                machine.fire(model, "retry")
            elif start_state == "error":
                machine.fire(model, "resume")
            runner = PhaseRunner(self, attempt)
            if phase_of(start_state) == "close" or attempt.facts.resume_phase == "close":
                runner.restore_gate()
            while (phase := phase_of(model.state)) is not None:
                state = self._save(update_current(state, phase=phase))
                if phase not in attempt.facts.runs:
                    self._event(
                        ev.PhaseSkipped, attempt.number, phase=phase, reason=attempt.plan[phase][1]
                    )
                    machine.fire(model, "skip")
                    continue
                failure = runner.run(phase)
                if failure is not None:
                    machine.fire(model, "fail")
                    state = self._save(
                        finish_attempt(
                            state,
                            status="error",
                            counts=None,
                            max_retries=self.settings.max_retries,
                            now=self.now(),
                            reason=failure,
                        )
                    )
                    self._event(
                        ev.AttemptFinished,
                        attempt.number,
                        status="error",
                        counts=None,
                        reason=failure,
                    )
                    return state, "error", failure
                machine.fire(model, "complete")
            return self._finish(attempt, state, runner)
        finally:
            machine.detach(model)

    def _finish(
        self, attempt: _Attempt, state: RetryState, runner: PhaseRunner
    ) -> tuple[RetryState, OutcomeStatus, str]:
        closed = attempt.facts.gate_passed is True
        status: Literal["closed", "blocked"] = "closed" if closed else "blocked"
        before = state.retryCount
        state = self._save(
            finish_attempt(
                state,
                status=status,
                counts=runner.post_counts,
                max_retries=self.settings.max_retries,
                now=self.now(),
                reason=runner.gate_reason,
            )
        )
        if closed:
            self._event(ev.TicketClosed, attempt.number, retryCountBefore=before)
        else:
            self._event(
                ev.TicketBlocked,
                attempt.number,
                reason=runner.gate_reason,
                retryCount=state.retryCount,
                maxRetries=self.settings.max_retries,
            )
        self._event(
            ev.AttemptFinished,
            attempt.number,
            status=status,
            counts=runner.post_counts,
            reason=runner.gate_reason,
        )
        return state, status, runner.gate_reason


def run_ticket(
    root: Path,
    ticket_id: str,
    options: RunOptions | None = None,
    *,
    settings: LoadedSettings | None = None,
    executor: Executor | None = None,
    observer: Observer | None = None,
    now: Callable[[], datetime] = utc_now,
) -> Outcome:
    settings = settings or load_settings(root)
    executor = executor or make_executor(settings, root)
    run = TicketRun(
        root,
        ticket_id,
        options or RunOptions(),
        settings,
        executor,
        observer or QuietObserver(),
        now,
    )
    return run.run()


class RetriesExhaustedError(TfFsmError):
    """Raised by callers that want an exception rather than an Outcome."""

    def __init__(self, outcome: Outcome) -> None:
        self.outcome = outcome
        super().__init__()

    @property
    def message(self) -> str:
        return f"{self.outcome.ticket_id}: {self.outcome.reason}"
