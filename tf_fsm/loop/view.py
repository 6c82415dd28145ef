"""What the backlog loop shows: a live view on a terminal (plain lines otherwise), `--json`
lines and the final summary; each finished run also goes to `.tf/ralph/progress.md`."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any, TextIO

from tf_fsm.loop.progress_file import ProgressFile, RunResult, next_step, status_line
from tf_fsm.loop.records import TOTALS, final_states, totals
from tf_fsm.views.status import BLOCKED_ATTEMPTS, blocked_attempts
from tf_fsm.views.terminal import terminal_safe

if TYPE_CHECKING:
    from pathlib import Path

    from tf_fsm.loop.records import LoopOptions, LoopResult, Plan
    from tf_fsm.settings.load import LoadedSettings

#: the totals the closing line gives even at 0 (the others only when some ticket ends so)
_ALWAYS_SHOWN = ("closed", "blocked", "failed", "skipped")
#: how a total reads in the closing line, when not by its name
_LABEL = {"awaiting_merge": "passed awaiting `tf-fsm merge`"}


def describe(plan: Plan) -> str:
    models = ", ".join(f"{r} -> {m}" for r, m in plan.escalated.items()) or "base models"
    return f"attempt {plan.attempt} ({plan.trigger}), {models}"


class Reporter:
    """All of the loop's output. A terminal gets a live view on stderr; anything else gets one
    plain line per event. `--json` adds one JSON object per event on stdout."""

    def __init__(
        self,
        progress: ProgressFile | None,
        json_lines: bool = False,
        err: TextIO | None = None,
        out: TextIO | None = None,
    ) -> None:
        self.progress = progress
        self.json_lines = json_lines
        self.err = err or sys.stderr
        self.out = out or sys.stdout
        self.running: dict[str, list[Any]] = {}  # ticket -> [plan, phase, elapsed]
        self._results: list[RunResult] = []  # what the live view counts, as the summary does
        self._skipped: dict[str, str] = {}
        self._live: Any = None

    # -- plumbing ----------------------------------------------------------------------------

    def _emit(self, event: str, **data: Any) -> None:
        if self.json_lines:
            print(json.dumps({"event": event, **data}), file=self.out, flush=True)

    def note(self, text: str) -> None:
        text = terminal_safe(text)  # ids, titles and reasons come from files and agents
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False)
        else:
            print(f"ralph: {text}", file=self.err, flush=True)

    def _render(self) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        states = final_states(self._results, self._skipped)
        c = totals({t: s for t, s in states.items() if t not in self.running})
        counts = Text(
            f"{c['closed']} closed · {len(self.running)} running · {c['skipped']} skipped · "
            f"{c['blocked']} blocked · {c['failed']} failed",
            style="dim",
        )
        table = Table("ticket", "attempt", "phase")
        for ticket, (plan, phase, _) in self.running.items():
            cells = (ticket, f"{plan.attempt} ({plan.trigger})", phase or "starting")
            table.add_row(*(Text(terminal_safe(cell)) for cell in cells))
        return Group(counts, table) if self.running else counts

    # -- events --------------------------------------------------------------------------------

    def begin(self, workers: int, max_iterations: int) -> None:
        if self.progress:
            self.progress.begin()
        if self.err.isatty() and not self.json_lines:
            from rich.console import Console
            from rich.live import Live

            self._live = Live(
                console=Console(file=self.err),
                get_renderable=self._render,
                refresh_per_second=4,
                transient=True,
            )
            self._live.start()
        self._emit("begin", workers=workers, maxIterations=max_iterations)

    def skipped(self, ticket: str, reason: str) -> None:
        self._skipped[ticket] = reason
        self.note(f"Skipping {ticket}: {reason}")
        self._emit("skip", ticket=ticket, reason=reason)

    def started(self, plan: Plan, pid: int, running: list[str]) -> None:
        self.running[plan.ticket] = [plan, None, 0.0]
        self.note(f"{plan.ticket}: started {describe(plan)} [pid {pid}]")
        self._emit(
            "start",
            ticket=plan.ticket,
            attempt=plan.attempt,
            trigger=plan.trigger,
            escalated=plan.escalated,
            pid=pid,
        )
        if self.progress:
            self.progress.current(running)

    def phase(self, ticket: str, attempt: int, phase: str, elapsed: float) -> None:
        if ticket in self.running:
            self.running[ticket][1:] = [phase, elapsed]
        if self._live is None:
            self.note(f"{ticket}: attempt {attempt} {phase} ({elapsed:.0f}s)")
        self._emit("phase", ticket=ticket, attempt=attempt, phase=phase)

    def finished(self, result: RunResult, running: list[str]) -> None:
        self.running.pop(result.ticket, None)
        self._results.append(result)
        label = status_line(result)
        self.note(
            f"{result.ticket}: {label} after attempt {result.attempt} "
            f"({BLOCKED_ATTEMPTS} {_blocked_attempts(result)}, {result.seconds:.1f}s)"
            + (f": {result.reason}" if result.reason else "")
        )
        self._emit("finish", **result.to_json())
        if self.progress and result.outcome != "locked":
            self.progress.record(result, next_step(result))
            self.progress.current(running)

    def interrupted(self, running: int, times: int) -> None:
        if times == 1:
            self.note(
                f"interrupted: no new tickets; waiting for {running} running "
                "(Ctrl-C again stops them at once; either way they stay resumable)"
            )
        else:
            self.note(f"killing {running} running workers; their attempts stay resumable")

    def end(self, result: LoopResult) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
        if self.progress:
            status = {"drained": "COMPLETE", "max_iterations": "STOPPED", "locked": "LOCKED"}
            self.progress.current([], status.get(result.reason, "INTERRUPTED"))
        self.summary(result)

    def summary(self, result: LoopResult) -> None:
        last: dict[str, RunResult] = {}
        runs: dict[str, int] = {}
        for r in result.results:
            last[r.ticket] = r
            runs[r.ticket] = runs.get(r.ticket, 0) + 1
        why = {
            "drained": "no ticket left to run",
            "max_iterations": "max iterations reached",
            "interrupted": "interrupted",
            "locked": "every ready ticket is locked by another process; nothing was run",
        }[result.reason]
        states = final_states(result.results, result.skipped)
        c = totals(states)
        shown = [
            f"{c[name]} {_LABEL.get(name, name)}"
            for name in TOTALS
            if c[name] or name in _ALWAYS_SHOWN
        ]
        headline = (
            f"ralph: {why} after {result.iterations} runs: {', '.join(shown)} "
            f"({len(states)} ticket{'' if len(states) == 1 else 's'})"
        )
        if self.json_lines:
            self._emit(
                "summary",
                reason=result.reason,
                iterations=result.iterations,
                tickets={t: {**r.to_json(), "runs": runs[t]} for t, r in last.items()},
                skipped=result.skipped,
                totals=c,
            )
            print(headline, file=self.err)
            return
        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        table = Table("ticket", "outcome", "runs", "attempt", BLOCKED_ATTEMPTS, "time", "reason")
        rows = [
            (
                ticket,
                status_line(r),
                str(runs[ticket]),
                str(r.attempt),
                _blocked_attempts(r),
                f"{r.seconds:.1f}s",
                r.reason,
            )
            for ticket, r in last.items()
        ]
        rows += [
            (ticket, "skipped", "0", "-", "-", "-", reason)
            for ticket, reason in result.skipped.items()
            if ticket not in last
        ]
        for row in rows:  # Text, escaped: a reason or an id is neither markup nor control
            table.add_row(*(Text(terminal_safe(cell)) for cell in row))
        console = Console(file=self.out, width=None if self.out.isatty() else 200)
        console.print(headline, markup=False, highlight=False)
        if last or result.skipped:
            console.print(table)

    def dry_run(
        self,
        plans: list[Plan],
        skipped: dict[str, str],
        note: str | None,
        trees: dict[str, dict[str, Any]],
    ) -> None:
        """--dry-run: the loop's note on its trees (as the loop says it when it starts), then
        each ticket that would start, in order, with its tree, then the skipped ones."""
        if note is not None:
            self._emit("note", text=note)
            if not self.json_lines:
                print(terminal_safe(f"note: {note}"), file=self.out)
        for n, plan in enumerate(plans, start=1):
            tree = trees[plan.ticket]
            self._emit(
                "plan",
                order=n,
                ticket=plan.ticket,
                attempt=plan.attempt,
                trigger=plan.trigger,
                escalated=plan.escalated,
                components=sorted(plan.components),
                tree=tree,
            )
            if not self.json_lines:
                line = f"{n:>3}. {plan.ticket:<12} {describe(plan)}"
                print(terminal_safe(line), file=self.out)
                print(terminal_safe(f"{'':<17}tree: {tree['summary']}"), file=self.out)
        for ticket, reason in skipped.items():
            self._emit("skip", ticket=ticket, reason=reason)
            if not self.json_lines:
                print(f"     skip {terminal_safe(f'{ticket}: {reason}')}", file=self.out)
        if not self.json_lines and not plans:
            print("nothing to run", file=self.out)


def planned_trees(
    root: Path, settings: LoadedSettings, options: LoopOptions, plans: list[Plan]
) -> tuple[str | None, dict[str, dict[str, Any]]]:
    """--dry-run: the loop's note on its tickets' trees (tf_fsm.workspace.mode.for_loop), and
    the tree each planned ticket's worker would run it in (`run --plan`'s `tree`), the root
    read once for all of them."""
    from tf_fsm.engine.worktree import shared_attempt
    from tf_fsm.errors import WorkspaceError
    from tf_fsm.storage.backends import ticket_stores
    from tf_fsm.views.plan import tree_for
    from tf_fsm.workspace import mode

    explicit, repo = options.worktree, mode.Repository(root, settings)
    try:
        note = mode.for_loop(
            root, settings, explicit=explicit, workers=options.workers, repo=repo
        ).note
    except WorkspaceError:  # each ticket's tree says that its run would refuse, and why
        note = None
    store = ticket_stores(root, settings)
    return note, {
        plan.ticket: tree_for(
            root,
            settings,
            plan.ticket,
            explicit=explicit,
            parallel=options.parallel,
            shared_attempt=shared_attempt(store(plan.ticket)),
            repo=repo,
        )
        for plan in plans
    }


def _blocked_attempts(result: RunResult) -> str:
    closed = result.outcome in ("closed", "already_closed")
    return blocked_attempts(result.retry_count, result.max_retries, closed)
