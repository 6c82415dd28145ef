"""What the backlog loop decides and reports: its options, the plan for a ticket's next run or
why it is skipped, and the loop's result (shared by the loop and its views)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tf_fsm.loop.progress_file import RunResult
from tf_fsm.loop.work import WorkOrder


@dataclass(frozen=True)
class LoopOptions:
    workers: int
    max_iterations: int
    resume_errors: bool = False
    assignee: str | None = None
    tag: str | None = None
    poll_seconds: float = 0.1
    #: --worktree / --no-worktree, passed on to every worker; None: the settings decide
    worktree: bool | None = None

    @property
    def parallel(self) -> bool:
        """Several tickets at once: each needs a tree of its own (docs/workspaces.md)."""
        return self.workers > 1

    def work_order(self, root: Path, ticket: str, loop: str) -> WorkOrder:
        """What a worker of loop `loop` is sent for `ticket`, these options passed on."""
        return WorkOrder(
            root,
            ticket,
            loop,
            worktree=self.worktree,
            parallel=self.parallel,
            workers=self.workers,
        )


@dataclass(frozen=True)
class Plan:
    """What the next run of a ticket will do (also what --dry-run prints)."""

    ticket: str
    title: str
    attempt: int
    trigger: str  # initial | ralph_retry | quality_gate | resume | close_tk
    escalated: dict[str, str]  # role -> model, for the roles escalated on that attempt
    components: frozenset[str]
    from_error: bool = False  # resumes an attempt that ended in error


@dataclass(frozen=True)
class Skip:
    reason: str


@dataclass
class LoopResult:
    reason: str  # drained | max_iterations | interrupted | locked
    iterations: int
    results: list[RunResult] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)


#: the loop's totals, in the order its closing line gives them: each ticket counted once,
#: by its final state in this loop (docs/ralph.md, "Output")
TOTALS: tuple[str, ...] = (
    "closed",
    "blocked",
    "failed",
    "waiting",
    "awaiting_merge",
    "interrupted",
    "skipped",
)
#: a run's outcome -> the total it counts in (a `locked` run never ran: not a final state)
_TOTAL_OF = {
    "closed": "closed",
    "already_closed": "closed",
    "blocked": "blocked",
    "exhausted": "blocked",
    "error": "failed",
    "failed": "failed",
    "waiting": "waiting",
    "awaiting_merge": "awaiting_merge",
    "interrupted": "interrupted",
    "paused": "interrupted",  # `run --phases`: in progress at a phase boundary, resumable
}


def final_states(results: Iterable[RunResult], skipped: Mapping[str, str]) -> dict[str, str]:
    """Each ticket the loop ran or skipped -> the total it counts in: the outcome of its last
    run in this loop, else (never run, or only refused as locked) `skipped`. A ticket that ran
    and was skipped afterwards (an error not resumed) keeps its run's outcome."""
    states: dict[str, str] = {}
    for result in results:
        total = _TOTAL_OF.get(result.outcome)
        if total is not None:
            states[result.ticket] = total
    for ticket in skipped:
        states.setdefault(ticket, "skipped")
    return states


def totals(states: Mapping[str, str]) -> dict[str, int]:
    """How many tickets end in each total (TOTALS order); they add up to `len(states)`."""
    return {name: sum(1 for s in states.values() if s == name) for name in TOTALS}
