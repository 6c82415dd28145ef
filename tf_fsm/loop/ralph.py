"""Ralph: the backlog loop. Picks the next ready tk ticket, runs its lifecycle in a worker
process (one attempt, as `tf-fsm run ID --once`; its work order: tf_fsm.loop.work), and goes on
until nothing is ready, the iteration budget is spent, or Ctrl-C.

Every ticket runs in its own process (forked from a server with tf_fsm already imported:
ralph_worker.WorkerProcess) so the per-ticket OS lock (store.lock) is the one guard against a
double run, whoever else is running tickets. The loop itself holds no state that a
crash could lose: what a ticket has done is in its retry-state.json, so a restarted loop
carries on where the killed one stopped (an attempt left in_progress is resumed).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from tf_fsm.core.escalation import resolve
from tf_fsm.core.machine import ERROR
from tf_fsm.errors import CorruptStateError, InvalidTicketIdError, TicketError
from tf_fsm.fs.atomic import append_durably, make_dirs
from tf_fsm.loop.overlap import KeptApart
from tf_fsm.loop.progress_file import RunResult
from tf_fsm.loop.records import LoopOptions, LoopResult, Plan, Skip
from tf_fsm.loop.unfinished import FINISHING, error_policy, loop_view, unfinished_merges
from tf_fsm.loop.view import Reporter, planned_trees
from tf_fsm.loop.worker import (
    LOCKED,
    Entry,
    WorkerProcess,
    locked_reason,
    open_attempt,
    outcome_file,
    stop_server,
    sweep_outcome_files,
    wait_for_orphaned_workers,
    worker_outcome,
)
from tf_fsm.process.strays import end_orphans, process_mark
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.backends import ticket_stores
from tf_fsm.tk import selection, tickets
from tf_fsm.tk.backlog import misfiled

RALPH_DIR = Path(".tf/ralph")


@dataclass
class _Worker:
    plan: Plan
    proc: WorkerProcess
    started: float
    phase: str | None = None
    signalled: int = 0  # how many of the loop's interrupts it has been passed


class Loop:
    def __init__(
        self,
        root: Path,
        settings: LoadedSettings,
        options: LoopOptions,
        reporter: Reporter,
        *,
        worker: Entry,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root, self.settings, self.options, self.reporter = root, settings, options, reporter
        self.worker = worker  # what runs a ticket in a worker (the CLI's `tf-fsm run`)
        self.store = ticket_stores(root, settings)
        self.ralph = settings.settings.ralph
        self.now = now
        self.running: dict[str, _Worker] = {}
        self.runs: dict[str, int] = {}  # runs of each ticket in this loop, to requeue retries
        self.resumed: set[str] = set()  # error attempts resumed in this loop (once each)
        #: tickets this loop does not run again, and why: a worker failed outright (bad input,
        #: a crash), or a hand-off attempt waits for its artifact
        self.no_rerun: dict[str, str] = {}
        self.result = LoopResult("drained", 0)
        self.stopping = 0  # SIGINTs received
        self._said: dict[str, str] = {}
        self._scan_cache = tickets.ScanCache()
        #: this loop, named for good: its workers note it with their ticket's lock
        self.mark = process_mark()
        #: each ticket in a worktree of its own: untagged tickets may run side by side, unless
        #: their branches are known to change the same files (`apart`)
        self.worktrees = False
        self.apart: KeptApart | None = None
        #: tickets tk calls closed whose attempt is still open: merged by a run killed before
        #: it recorded the merge (the merge commit closes the tk ticket); run first, once
        self.unfinished: list[str] = []

    # -- choosing ---------------------------------------------------------------------------

    def candidates(self, backlog: tickets.Backlog) -> list[tickets.TkRecord]:
        """Tickets to consider, best first: tk ready's order, except that a ticket already run
        in this loop goes behind the ones not yet run (a blocked ticket is retried later, not
        at once). A run killed mid-close needs no special case: tf_fsm closes the tk ticket
        only after retry-state.json records the close, and repairs the tk file on the next
        run of the ticket."""
        lines = selection.ready(backlog, self.options.assignee, self.options.tag)
        order = {line.record.id: i for i, line in enumerate(lines)}
        ready = sorted(
            (ln.record for ln in lines), key=lambda r: (self.runs.get(r.id, 0), order[r.id])
        )
        unfinished = [backlog.records[t] for t in self.unfinished if t in backlog.records]
        return [r for r in unfinished + ready if r.id not in self.running]

    def assess(self, rec: tickets.TkRecord) -> Plan | Skip:
        """Run it, or why not; reads only this ticket's files. Its read model (the decision of
        what runs next, tf_fsm.core.next_step) as the loop's worker (tf_fsm.loop.work) meets it,
        the ticket file parsed first as `run` does, and the loop's own policy on top."""
        if rec.id in self.no_rerun:
            return Skip(self.no_rerun[rec.id])
        if (why := misfiled(rec)) is not None:
            return Skip(why)
        try:
            store = self.store(rec.id)
            view = loop_view(self.root, self.settings, store, tickets.read(self.root, rec.id))
        except InvalidTicketIdError as exc:
            return Skip(str(exc))
        except CorruptStateError as exc:
            return Skip(f"corrupt {exc.path.name}: {exc.problem}")
        except TicketError as exc:
            return Skip(f"malformed ticket file: {exc}")
        if view.skip_reason is not None:
            return Skip(view.skip_reason)
        step, from_error = view.step, view.step.action == "resume" and view.state == ERROR
        if from_error and (why := error_policy(view, self.options.resume_errors, self.resumed)):
            return Skip(why)
        if view.lock_holder is not None:
            return Skip(locked_reason(store, view.lock_holder))
        number = step.attempt or 1
        # no new attempt when it only finishes what it began: that is its trigger
        trigger = step.action if step.action in FINISHING else step.trigger
        resolution = resolve(number, self.settings)
        escalated = {r: resolution.roles[r].model for r in resolution.escalated_roles}
        comps = selection.components(rec, self.ralph.componentTagPrefix)
        return Plan(rec.id, rec.title, number, str(trigger), escalated, comps, from_error)

    def skip(self, ticket: str, reason: str) -> None:
        self.result.skipped[ticket] = reason
        if self._said.get(ticket) != reason:  # once per ticket (and again if the reason changes)
            self._said[ticket] = reason
            self.reporter.skipped(ticket, reason)

    def plan_all(self) -> tuple[list[Plan], dict[str, str]]:
        """--dry-run: what would start now, in order, ignoring worker slots and components."""
        backlog = self.scan()
        plans: list[Plan] = []
        skipped: dict[str, str] = {}
        for rec in self.candidates(backlog):
            decision = self.assess(rec)
            if isinstance(decision, Skip):
                skipped[rec.id] = decision.reason
            else:
                plans.append(decision)
        return plans, skipped

    def scan(self) -> tickets.Backlog:
        backlog = tickets.scan(tickets.tickets_dir(self.root), self._scan_cache)
        for problem in backlog.problems:
            key = f"{problem.path}"
            if self._said.get(key) != problem.problem:
                self._said[key] = problem.problem
                self.reporter.note(f"warning: {problem}")
        return backlog

    # -- the loop -----------------------------------------------------------------------------

    def run(self) -> LoopResult:
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGINT, signal.SIGTERM)
        }
        self.reporter.begin(self.options.workers, self.options.max_iterations)
        self._clear_up_after_killed_runs()
        try:
            while True:
                if not self.stopping:
                    self._fill()
                if not self.running:
                    break
                self._wait()
        finally:
            stop_server()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if self.stopping:
            self.result.reason = "interrupted"
        elif self.result.iterations >= self.options.max_iterations and self.plan_all()[0]:
            self.result.reason = "max_iterations"  # stopped with work left, not drained
        elif (
            not self.result.iterations
            and self.result.skipped
            and all(reason.startswith(LOCKED) for reason in self.result.skipped.values())
        ):
            self.result.reason = "locked"  # it did nothing: not a drain
        self.reporter.end(self.result)
        return self.result

    def _clear_up_after_killed_runs(self) -> None:
        """What a killed loop or run left: outcome files nobody will read, processes its agents
        started, and workers still stopping (they end with their loop: waited for a while)."""
        if stale := sweep_outcome_files(self.root / RALPH_DIR / "logs"):
            self.reporter.note(
                f"removed {len(stale)} outcome file(s) of a loop that was killed before reading "
                f"them: {', '.join(stale)}"
            )
        if ended := end_orphans():
            self.reporter.note(ended)
        self.unfinished = unfinished_merges(self.root, self.settings, self.store)
        for ticket in self.unfinished:
            self.reporter.note(f"{ticket}: merged by a run that was killed before recording it")
        wait_for_orphaned_workers(
            self.store,
            self.reporter.note,
            self.options.poll_seconds,
            lambda: self.stopping,
        )

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        # Only counted here; _wait passes it on (a handler that printed could interrupt a
        # print in progress, and one that signalled could miss a worker being started).
        self.stopping += 1

    def _pass_on_interrupts(self) -> None:
        if not self.stopping or all(w.signalled >= self.stopping for w in self.running.values()):
            return
        # The first Ctrl-C lets running tickets stop cleanly; the second does not wait.
        sig = signal.SIGINT if self.stopping == 1 else signal.SIGKILL
        for worker in self.running.values():
            if worker.signalled < self.stopping:
                worker.signalled = self.stopping
                with contextlib.suppress(ProcessLookupError):
                    os.kill(worker.proc.pid, sig)
        self.reporter.interrupted(len(self.running), self.stopping)

    def _budget_left(self) -> bool:
        return self.result.iterations < self.options.max_iterations

    def _fill(self) -> None:
        if len(self.running) >= self.options.workers or not self._budget_left():
            return
        # In worktrees tickets cannot step on each other's files: component tags only keep
        # tickets of one component apart (fewer merge conflicts), untagged ones run freely.
        allow = self.ralph.parallelAllowUntagged or self.worktrees
        if self.apart is not None and self.running:
            self.apart.refresh()
        for rec in self.candidates(self.scan()):
            if len(self.running) >= self.options.workers or not self._budget_left():
                return
            if self.stopping:
                return
            busy = [w.plan.components for w in self.running.values()]
            mine = selection.components(rec, self.ralph.componentTagPrefix)
            if mine and not selection.may_run_beside(mine, busy, allow):
                # It could not start now whatever its files say, so they are not read: once
                # the running tickets hold every component, this pass would otherwise read
                # every ready ticket's files (seconds on a 100k backlog). It is assessed, and
                # a skip reported, in a pass where it could start.
                continue
            decision = self.assess(rec)
            if isinstance(decision, Skip):
                self.skip(rec.id, decision.reason)
                continue
            self.result.skipped.pop(rec.id, None)
            if not selection.may_run_beside(decision.components, busy, allow):
                if not decision.components and not allow:
                    return  # an untagged ticket waits for the tree; nothing jumps ahead of it
                continue
            if self.apart is not None and (clash := self.apart.clash(rec.id, self.running)):
                self.skip(rec.id, f"waits for {clash[0]}: both change {', '.join(clash[1][:3])}")
                continue
            self._launch(decision)

    def _launch(self, plan: Plan) -> None:
        if plan.from_error:
            self.resumed.add(plan.ticket)
        logs = self.root / RALPH_DIR / "logs"
        make_dirs(logs, within=self.root)
        order = self.options.work_order(self.root, plan.ticket, self.mark)
        log = logs / f"{plan.ticket}.log"
        header = f"\n=== tf-fsm ralph: attempt {plan.attempt} ({plan.trigger})\n"
        append_durably(log, header.encode(), within=self.root)
        held, out = outcome_file(logs, plan.ticket)
        proc = WorkerProcess(self.worker, order, self.root, out, log, held)
        self.running[plan.ticket] = _Worker(plan, proc, self.now())
        self.runs[plan.ticket] = self.runs.get(plan.ticket, 0) + 1
        self.result.iterations += 1
        self.reporter.started(plan, proc.pid, list(self.running))

    def _wait(self) -> None:
        """Until at least one worker has finished; refresh the phases meanwhile."""
        last_look = 0.0
        while True:
            self._pass_on_interrupts()
            done = [t for t, w in self.running.items() if w.proc.poll() is not None]
            for ticket in done:
                self._finish(self.running.pop(ticket))
            if done:
                return
            if self.now() - last_look >= 0.5:
                last_look = self.now()
                self._look_at_phases()
            self._nap()

    def _nap(self) -> None:
        """Up to `poll_seconds`, woken as soon as a worker exits: a plain sleep left each
        finished worker's slot idle for half a poll on average."""
        sentinels = [worker.proc.sentinel for worker in self.running.values()]
        select.select(sentinels, [], [], self.options.poll_seconds)

    def _look_at_phases(self) -> None:
        for ticket, worker in self.running.items():
            store = self.store(ticket)
            last = open_attempt(store.peek_retry_state())
            if last is None:
                continue  # not started yet: the last attempt is still the previous one
            phase = store.running_phase(last.get("attemptNumber", 0))
            if phase is not None and phase != worker.phase:
                worker.phase = phase
                self.reporter.phase(ticket, worker.plan.attempt, phase, self.now() - worker.started)

    def _finish(self, worker: _Worker) -> None:
        out, code = worker.proc.result()
        plan = worker.plan
        outcome, reason = worker_outcome(out, code, bool(self.stopping), worker.proc.log)
        if outcome == "failed":
            self.no_rerun[plan.ticket] = f"tf-fsm run failed: {reason}"
        state = self.store(plan.ticket).peek_retry_state()
        result = RunResult.build(
            plan.ticket, plan.title, outcome, reason, code, plan.attempt, state
        )
        result.seconds = self.now() - worker.started
        result.trigger = plan.trigger
        result.max_retries = self.settings.max_retries
        if outcome == "locked":
            self.skip(plan.ticket, reason)
        if outcome == "interrupted" and not self.stopping:  # stopped from outside: by a person
            self.no_rerun[plan.ticket] = (
                f"its run was stopped (tf-fsm stop); tf-fsm resume {plan.ticket} continues it"
            )
        if outcome == "waiting":  # only the hand-off's writer can move it on: not this loop
            self.no_rerun[plan.ticket] = f"{reason}; tf-fsm watch (or tf-fsm run) resumes it"
        self.result.results.append(result)
        self.reporter.finished(result, list(self.running))


def run_ralph(
    root: Path,
    settings: LoadedSettings,
    options: LoopOptions,
    worker: Entry,
    *,
    dry_run: bool = False,
    json_lines: bool = False,
) -> LoopResult | None:
    """`tf-fsm ralph`: the loop's result (None for `--dry-run`, which only prints the plan);
    `worker` runs one ticket in a worker process."""
    from tf_fsm.executors import make_executor
    from tf_fsm.loop.progress_file import ProgressFile
    from tf_fsm.workspace import mode

    progress = None if dry_run else ProgressFile(root / RALPH_DIR / "progress.md", root)
    reporter = Reporter(progress, json_lines)
    loop = Loop(root, settings, options, reporter, worker=worker)
    if dry_run:
        plans, skipped = loop.plan_all()
        reporter.dry_run(plans, skipped, *planned_trees(root, settings, options, plans))
        return None
    # A missing agent program would fail every worker the same way: refuse once, up front.
    make_executor(settings, root).check()
    chosen = mode.for_loop(root, settings, explicit=options.worktree, workers=options.workers)
    loop.worktrees = chosen.worktree
    if chosen.worktree and settings.settings.workspace.conflicts.avoidOverlap:
        loop.apart = KeptApart(root, settings, loop.store)
    if chosen.note:
        reporter.note(chosen.note)
    return loop.run()
