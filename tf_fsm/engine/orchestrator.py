"""One ticket, attempt by attempt, phase by phase: the one place that wires the others.

The machine decides which moves are legal, the escalation policies decide the models,
detection and the gate decide blocked or closed. This module begins, resumes and chains the
attempts (one attempt's phases run in tf_fsm.engine.attempt), persists each
step (retry-state at every attempt boundary, the journal at every step; a phase's events cost
one fsync, see TicketStore.batch) and reports progress.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tf_fsm.core import journal as ev
from tf_fsm.core.next_step import Step, next_step
from tf_fsm.core.resume import ResumePoint
from tf_fsm.core.state import (
    RetryState,
    new_state,
    reopen_attempt,
    start_attempt,
)
from tf_fsm.core.ticket import decision_facts
from tf_fsm.core.ticket_rules import chains_attempts, goes_straight_on
from tf_fsm.engine import attempt_setup, context, same_failure
from tf_fsm.engine.accounting import BudgetProbe, refused_by_budget
from tf_fsm.engine.api import MergeRefusal, RunTree
from tf_fsm.engine.api import Observer as Observer
from tf_fsm.engine.api import Outcome as Outcome
from tf_fsm.engine.api import OutcomeStatus as OutcomeStatus
from tf_fsm.engine.api import QuietObserver as QuietObserver
from tf_fsm.engine.api import RunOptions as RunOptions
from tf_fsm.engine.attempt import run_attempt
from tf_fsm.engine.context import AttemptContext
from tf_fsm.engine.phases import PhaseRunner
from tf_fsm.engine.prompts import PromptLibrary
from tf_fsm.engine.reset import rebuilt, repair_and_reset
from tf_fsm.engine.ticket_file import close_ticket, shown_path
from tf_fsm.engine.tree import SharedTree
from tf_fsm.engine.worktree import hold_merge, left_tree, open_tree
from tf_fsm.errors import UsageError
from tf_fsm.executors import Executor, make_executor
from tf_fsm.fs.atomic import sync_filesystems
from tf_fsm.fs.confine import check_within
from tf_fsm.process.strays import describe, end_finished
from tf_fsm.settings.load import LoadedSettings, load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.storage.layout import CHAIN_CONTEXT
from tf_fsm.tk import tickets

#: a rerun's outcome after it removed the workspace a run killed after its merge left
LEFT_REMOVED = "merged and closed; the worktree and branch a killed run left are removed"


def utc_now() -> datetime:
    return datetime.now(UTC)


class TicketRun:
    """One ticket's run: the `RunContext` (tf_fsm.engine.api) its attempts are carried out
    with. The clock (`now`) and the pause between an agent's restarts (`sleep`) are passed in,
    so tests never wait."""

    def __init__(
        self,
        root: Path,
        ticket_id: str,
        options: RunOptions,
        settings: LoadedSettings,
        executor: Executor,
        observer: Observer,
        now: Callable[[], datetime] = utc_now,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.root, self.options, self.settings = root, options, settings
        self.store = open_store(root, settings, ticket_id)  # validates the id
        self.ticket_id = ticket_id
        self.ticket = tickets.read(root, ticket_id)
        self.executor, self.observer = executor, observer
        self.now, self.sleep = now, sleep
        self.prompts = PromptLibrary(root)
        self.tree: RunTree = SharedTree(root)  # the ticket's worktree once it has one
        self.phases_run: list[tuple[int, str]] = []  # (attempt, phase), for `--phases N`

    # -- persistence helpers --------------------------------------------------------------

    def event(
        self, cls: type[ev.Event], attempt: int | None, flush: bool = True, **fields: Any
    ) -> None:
        """Journal an event. Written at once; `flush=False` leaves its fsync to the next flushed
        event, so a phase's events cost one fsync, not four. Only events a resume does not
        depend on (PhaseStarted, InvocationFinished, ...) go unflushed."""
        event = cls(ts=ev.timestamp(self.now()), ticket=self.ticket_id, attempt=attempt, **fields)
        self.store.append_event(event, durable=flush)

    def save(self, state: RetryState) -> RetryState:
        self.store.save_retry_state(state)
        return state

    def outcome(
        self, state: RetryState | None, status: OutcomeStatus, runs: int, reason: str
    ) -> Outcome:
        cur = state.current if state else None
        return Outcome(
            self.ticket_id,
            status,
            cur.attemptNumber if cur else 0,
            runs,
            state.retryCount if state else 0,
            self.settings.max_retries,
            reason,
        )

    # -- the run --------------------------------------------------------------------------

    def run(self) -> Outcome:
        self.executor.check()
        # Where the run writes, checked before it writes anything (tf_fsm.fs.confine).
        check_within(self.ticket.path, self.root)
        self.store.files.check_paths()
        # The batch ends (everything written made durable, the tk file's directory too) before
        # the lock is released, also on Ctrl-C mid-phase. What the agents left running ends
        # with the run.
        try:
            lock = self.store.lock(self.options.holder, loop=self.options.loop)
            with lock, self.store.batch(self._sync_tk_dir):
                outcome = self._locked_run()
                self.tree.after_outcome(self, outcome.status)
                return outcome
        finally:
            if ended := end_finished():
                left = f"ended what the agents left running: {describe(ended)}"
                self.observer.note(self.ticket_id, left)

    def _sync_tk_dir(self) -> None:
        """At each durable point of the run's batch: the tk file's directory with the store's
        records (one syncfs when they share a file system)."""
        sync_filesystems([self.ticket.path.parent])

    def _locked_run(self) -> Outcome:
        # The views a crash left rebuilt, then --retry-reset: as `tf-fsm reset` does them.
        reset_at = self.now() if self.options.retry_reset else None
        done, events = repair_and_reset(self.store, reset_at)
        if done.repaired:
            self.observer.note(self.ticket_id, rebuilt(done))
        if done.backup is not None:
            self.observer.note(self.ticket_id, f"retry state moved aside to {done.backup}")
        # Read again under the lock: another runner may have closed it meanwhile.
        self.ticket = tickets.read(self.root, self.ticket_id)
        return self._drive(self.store.load_retry_state(), events)

    def decide(self, state: RetryState | None, events: list[ev.Event]) -> tuple[Step, BudgetProbe]:
        """What runs next, as this run sees it (`run --plan` asks the same), and the budget's
        check when the decision asked for it (tf_fsm.core.next_step decides; the facts are
        the read model's, tf_fsm.core.ticket)."""
        budget = BudgetProbe(self, state, events)
        facts = decision_facts(
            self.store,
            self.settings,
            state,
            tk_file=lambda: self.ticket,
            journal=lambda: events,
            budget_refusal=budget,
            retry_trigger=self.options.retry_trigger,
            merge_requested=self.options.merge,
            hold_merge=self.options.hold_merge,
        )
        return next_step(facts), budget

    def _drive(self, state: RetryState | None, events: list[ev.Event]) -> Outcome:
        step, budget = self.decide(state, events)
        if step.refusal == "budget" and budget.check is not None:
            return refused_by_budget(self, state, budget.check)
        if step.action == "nothing_to_merge":
            raise UsageError(f"{self.ticket_id}: {step.reason}")
        if step.action in ("already_closed", "exhausted", "awaiting_merge"):
            return self.outcome(state, step.action, 0, step.reason)
        if step.action == "close_tk" and state is not None and state.current is not None:
            cur = state.current
            self.close_tk(cur.attemptNumber, cur.startedAt, cur.reason or "")
            closed = step.reason  # and a merged workspace left behind, if any, goes too
            step, budget = self.decide(state, events)
            if step.action != "remove_workspace":
                return self.outcome(state, "already_closed", 0, closed)
        if step.action == "remove_workspace":
            self.tree = left_tree(self)  # removed by after_outcome, as after a merge
            return self.outcome(state, "already_closed", 0, LEFT_REMOVED)
        tree, note = open_tree(self)  # an attempt runs: in the ticket's tree
        self.tree = tree or self.tree
        if step.action == "resume" and state is not None and step.resume is not None:
            attempt, state = self._resume(state, events, step.resume)
        else:
            attempt, state = self._begin(state, step.trigger or "initial")
        if note is not None:  # after what the run does, which `watch` reports from its first
            self.observer.note(self.ticket_id, note)
        return self._chain(attempt, state)

    def _chain(self, attempt: AttemptContext, state: RetryState) -> Outcome:
        """Attempts one after another, while each blocked one is followed at once by the next
        (escalation on, no --once): as far as the decision of what runs next allows."""
        runs = 1
        while True:
            state, status, reason = run_attempt(self, attempt, state)
            if status in ("closed", "error", "waiting", "awaiting_merge", "paused"):
                return self.outcome(state, status, runs, reason)
            events = self.store.read_events().events
            step, budget = self.decide(state, events)
            if step.refusal == "same_failure":
                same_failure.stop(self, state)  # the tk note; nowhere to go
                return self.outcome(state, "exhausted", runs, step.reason)
            if step.refusal in ("retries_exhausted", "no_attempt_allowed"):
                self._exhausted(state)
                return self.outcome(state, "exhausted", runs, reason)
            chains = chains_attempts(self.settings, self.options.once)
            if chains and step.refusal == "budget" and budget.check is not None:
                refused = refused_by_budget(self, state, budget.check)
                return dataclasses.replace(refused, attempts_run=runs)
            if not goes_straight_on(self.settings, self.options.once, step):
                return self.outcome(state, "blocked", runs, reason)
            attempt, state = self._begin(state, step.trigger or "quality_gate")
            runs += 1

    def _exhausted(self, state: RetryState) -> None:
        cur = state.current
        number = cur.attemptNumber if cur else None
        self.event(
            ev.RetriesExhausted,
            number,
            retryCount=state.retryCount,
            maxRetries=self.settings.max_retries,
        )
        summary = shown_path(self, self.store.files.path("close-summary.md"))
        note = (
            f"tf-fsm: blocked after {state.retryCount} attempts (max retries "
            f"{self.settings.max_retries}); see {summary}"
        )
        self.edit_ticket(lambda text: tickets.with_note(text, note, self.now()))

    def edit_ticket(self, change: Callable[[str], str]) -> None:
        from tf_fsm.storage.store import atomic_write_text

        path = self.ticket.path
        # The journal is on disk before the tk file says anything it implies. The file is the
        # user's text: its data is fsynced before the rename (never torn or empty after a
        # power cut), its directory entry with the run's durable point.
        self.store.sync_journal()
        # bytes, not read_text: its universal newlines would rewrite every CRLF and lone CR
        text = change(path.read_bytes().decode("utf-8"))
        atomic_write_text(path, text, within=self.root, sync_dir=False)

    # -- attempt boundaries -------------------------------------------------------------------

    def new_attempt_context(self, state: RetryState | None, trigger: str) -> AttemptContext:
        """What the next new attempt would run with (read-only; `run --plan` shows it)."""
        return attempt_setup.new_attempt(self, state, trigger)

    def _begin(self, state: RetryState | None, trigger: str) -> tuple[AttemptContext, RetryState]:
        head = self.tree.begin_attempt(self, state)  # a rollback happens here
        state = state or new_state(self.ticket_id, self.now())
        attempt = self.new_attempt_context(state, trigger)
        number, resolution, plan = attempt.number, attempt.resolution, attempt.plan
        prior = attempt.prior_failure
        PhaseRunner(self, attempt).check_templates()  # before anything is written
        # The context first: a journal that holds the attempt's start (the state's image) holds
        # what it started with, prior-failure summary included, whatever a crash cuts off.
        # The views are written at the block's end, after one fsync for their first images.
        with self.store.deferred_views():
            self.write_chain_context(attempt)
            state = self.save(
                start_attempt(
                    state,
                    trigger=trigger,
                    escalation=resolution.escalation_record(),
                    fail_on=list(self.settings.workflow.failOn),
                    now=self.now(),
                    tier=resolution.tier,
                )
            )
            # Unflushed: durable with the views' first images or the first phase's events (a
            # crash before is resumed from retry-state.json, which journals the start again).
            self._journal_start(attempt, head, flush=False)
            escalated = {r: resolution.roles[r].model for r in resolution.escalated_roles}
            if escalated:
                reason = "; ".join(resolution.roles[r].reason for r in escalated)
                self.event(
                    ev.EscalationApplied,
                    number,
                    flush=False,
                    roles=escalated,
                    tier=resolution.tier,
                    reason=reason,
                )
            if number > 1 and not plan["research"][0] and self.options.research is not False:
                self.event(
                    ev.ResearchSkippedOnRetry,
                    number,
                    flush=False,
                    attemptCount=number - 1,
                    lastFailureKind=prior["kind"] if prior else "unknown",
                )
        self._mark_in_progress()
        return attempt, state

    def _mark_in_progress(self) -> None:
        if self.ticket.status == "open":
            self.edit_ticket(lambda text: tickets.with_field(text, "status", "in_progress"))
            self.ticket = tickets.read(self.root, self.ticket_id)

    def close_tk(self, number: int, started: str, reason: str) -> None:
        close_ticket(self, number, started, reason)

    def merge(self, attempt: AttemptContext, reason: str) -> MergeRefusal | None:
        from tf_fsm.engine.merge_step import merge_ticket

        return merge_ticket(self, attempt, reason)

    def hold_merge(self, attempt: AttemptContext) -> None:
        hold_merge(self, attempt.number)

    def _journal_start(self, attempt: AttemptContext, head: str | None, flush: bool = True) -> None:
        """`head`: the commit the attempt started from (None in a tree without commits)."""
        res = attempt.resolution
        self.event(
            ev.AttemptStarted,
            attempt.number,
            flush=flush,
            trigger=attempt.trigger,
            escalation=res.escalation_record().to_json_dict(),
            models={r: {"model": x.model, "source": x.source} for r, x in res.roles.items()},
            **({"head": head} if head else {}),
        )

    def write_chain_context(self, attempt: AttemptContext) -> None:
        artifacts = self.store.files.dir
        data = context.to_json(attempt, self.ticket_id, self.options.flags(), artifacts)
        self.store.save_view(CHAIN_CONTEXT, data)

    def _resume(
        self, state: RetryState, events: list[ev.Event], point: ResumePoint
    ) -> tuple[AttemptContext, RetryState]:
        cur = state.current
        if cur is None:
            raise ValueError("nothing to resume")
        attempt = self.resumed_attempt(cur.attemptNumber, cur.trigger, cur.tier, point)
        attempt.resumed_from = cur.status
        # the commit it resumes from: where it started, when it was never journaled as started
        head = self.tree.resume_attempt(self, cur.attemptNumber, finished=point.finished)
        state = self.save(reopen_attempt(state, self.now()))
        started = any(
            isinstance(e, ev.AttemptStarted) and e.attempt == cur.attemptNumber for e in events
        )
        if not started:  # killed between saving the attempt and journaling it
            self._journal_start(attempt, head)
        # The attempt may have died before these were written; they are cheap to write again.
        self.write_chain_context(attempt)
        self._mark_in_progress()
        phase = point.phase
        self.event(ev.AttemptResumed, cur.attemptNumber, phase=phase, reason=point.reason)
        self.observer.note(
            self.ticket_id, f"resuming attempt {cur.attemptNumber} at {point.where}: {point.reason}"
        )
        return attempt, state

    def resumed_attempt(
        self, number: int, trigger: str, tier: int | None, point: ResumePoint
    ) -> AttemptContext:
        """The open attempt `number` as it resumes at `point` (read-only; `run --plan` shows
        it)."""
        return attempt_setup.resumed_attempt(self, number, trigger, tier, point)


def run_ticket(
    root: Path,
    ticket_id: str,
    options: RunOptions | None = None,
    *,
    settings: LoadedSettings | None = None,
    executor: Executor | None = None,
    observer: Observer | None = None,
    now: Callable[[], datetime] = utc_now,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    settings = settings or load_settings(root, record=True)
    executor = executor or make_executor(settings, root)
    run = TicketRun(
        root,
        ticket_id,
        options or RunOptions(),
        settings,
        executor,
        observer or QuietObserver(),
        now,
        sleep,
    )
    return run.run()
