"""What the backlog loop decides and reports: its options, the plan for a ticket's next run or
why it is skipped, and the loop's result (shared by the loop and its views)."""

from __future__ import annotations

from dataclasses import dataclass, field

from tf_fsm.loop.progress_file import RunResult


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
