"""The types at a ticket run's boundary: `RunOptions` in, an `Outcome` out, an `Observer`
told of each phase. Kept apart from the orchestrator so callers and the budget check can name
them without importing the machinery that runs a ticket."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:  # types only: the run's collaborators, none of which imports this module
    from tf_fsm.core.journal import Event
    from tf_fsm.core.state import RetryState
    from tf_fsm.engine.context import AttemptContext
    from tf_fsm.engine.prompts import PromptLibrary
    from tf_fsm.executors.base import Executor, Invocation
    from tf_fsm.settings.load import LoadedSettings
    from tf_fsm.storage.protocol import Store
    from tf_fsm.tk.tickets import Ticket

#: awaiting_merge: the gate passed and the merge waits for `tf-fsm merge`
#: (ralph.parallelAutoMerge false, or `run --hold-merge`): not closed in tk;
#: paused: `run --phases N` stopped at a phase boundary, the attempt in progress (resumable)
OutcomeStatus = Literal[
    "closed",
    "blocked",
    "exhausted",
    "error",
    "already_closed",
    "waiting",
    "awaiting_merge",
    "paused",
]


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
    #: the backlog loop this run is a worker of (`<pid>.<start time>`), noted with its lock
    loop: str | None = None
    #: --worktree (True) / --no-worktree (False); None: the settings choose (docs/workspaces.md)
    worktree: bool | None = None
    #: a worker of a loop that runs several tickets at once (worktrees by default)
    parallel: bool = False
    #: how many tickets the run's loop runs at once (the worktree pool keeps as many)
    workers: int = 1
    #: `tf-fsm merge`: only a passed attempt's merge runs (never a phase or a new attempt)
    merge: bool = False
    #: --phases N: the run pauses at the phase boundary after N phases completed in it
    #: (the attempt stays in progress; the next run resumes it); None: no such bound
    phases: int | None = None
    #: --hold-merge: a passed attempt's merge waits for `tf-fsm merge`, as with
    #: ralph.parallelAutoMerge off (tf_fsm.core.next_step.merges_now)
    hold_merge: bool = False
    #: who runs the ticket when this run is part of a process that runs other tickets too
    #: (`tf-fsm watch`), noted with its lock: `tf-fsm stop` stops a run of one ticket only
    holder: str | None = None

    def __post_init__(self) -> None:
        if self.phases is not None and self.phases < 1:
            raise ValueError(f"phases must be at least 1, not {self.phases}")

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


@dataclass(frozen=True)
class MergeRefusal:
    """Why a passed attempt was not merged. `rerun`: its branch now starts again from the base
    branch's tip, and the attempt ends blocked so that the next one runs there
    (workspace.conflicts.mode rerun); else the attempt ends in error for a person."""

    reason: str
    rerun: bool = False


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


class RunTree(Protocol):
    """The tree a ticket's run works in: the project's own working tree (shared), or the
    ticket's git worktree. The run asks it where agents and gate commands run and where an
    agent finds the ticket's files, and tells it each step (an invocation, a phase, an
    attempt, the outcome); the shared tree has nothing to do at any of them."""

    #: where the agents and the gate commands run
    path: Path
    #: a passed attempt is merged into the base branch before it closes (at once, or by
    #: `tf-fsm merge` with ralph.parallelAutoMerge off)
    merges: bool
    #: where a `reset` rollback kept the blocked attempt's commits (a ref), for its prompts
    kept: str | None

    def agent_path(self, store_path: Path) -> Path:
        """Where an agent running in `path` sees a file of the ticket's store."""

    def base_commit(self) -> str | None:
        """The commit the ticket's work is measured against (the gate baseline): where its
        branch left the base branch, or the project's HEAD; None outside git."""

    def before_invocation(self, run: RunContext, invocation: Invocation) -> None:
        """Make sure `path` is the ticket's tree, then give the agent the ticket's files where
        it looks for them."""

    def after_invocation(self, run: RunContext, invocation: Invocation) -> None:
        """Bring what the agent wrote into the ticket's store (refused when `path` stopped
        being the ticket's tree while the agent ran)."""

    def before_commands(self, run: RunContext, attempt: int) -> None:
        """The quality-gate commands are about to run in `path`: make sure it is the
        ticket's tree."""

    def after_phase(self, run: RunContext, attempt: int, phase: str) -> None:
        """The phase completed: record the tree it left."""

    def begin_attempt(self, run: RunContext, state: RetryState | None) -> str | None:
        """A new attempt starts (after `state`'s last one): what it starts from; the commit,
        or None in a tree without commits of its own."""

    def resume_attempt(self, run: RunContext, attempt: int, *, finished: bool) -> str | None:
        """An interrupted attempt picks up again at its last checkpoint (`finished`: every
        phase completed, only its ending, such as the merge, is left): that commit, or None
        in a tree without commits of its own."""

    def after_outcome(self, run: RunContext, status: OutcomeStatus) -> None:
        """The run ended so: what the tree keeps or lets go of."""


class RunContext(Protocol):
    """What a ticket's run offers the code that carries out its attempts (`attempt`,
    `phases`, `invocation`, `attempt_gates`, `same_failure`, `accounting`, `worktree`,
    `merge_step`): the declared seam between them and `orchestrator.TicketRun`, which is its
    one implementation."""

    root: Path
    ticket_id: str
    ticket: Ticket
    settings: LoadedSettings
    options: RunOptions
    executor: Executor
    observer: Observer
    prompts: PromptLibrary
    now: Callable[[], datetime]
    sleep: Callable[[float], None]
    #: where the agents and gate commands run, and what happens to the tree at each step
    tree: RunTree
    #: (attempt, phase) of each phase completed in this run, in order (`run --phases N`)
    phases_run: list[tuple[int, str]]

    # Read-only: an implementation may keep a more specific store (TicketRun's is a
    # TicketStore), which a settable member (invariant) would refuse.
    @property
    def store(self) -> Store:
        """The ticket's files (tf_fsm.storage.protocol)."""

    def event(
        self, cls: type[Event], attempt: int | None, flush: bool = True, **fields: Any
    ) -> None:
        """Journal one event (`flush=False`: made durable with the next flushed one)."""

    def save(self, state: RetryState) -> RetryState:
        """Persist the retry state; returns it."""

    def outcome(
        self, state: RetryState | None, status: OutcomeStatus, runs: int, reason: str
    ) -> Outcome:
        """The run's result with the state's numbers."""

    def edit_ticket(self, change: Callable[[str], str]) -> None:
        """Rewrite the tk ticket file through `change` (its text in, its new text out)."""

    def close_tk(self, number: int, started: str, reason: str) -> None:
        """Close the tk ticket, with the note that names the attempt."""

    def write_chain_context(self, attempt: AttemptContext) -> None:
        """Write chain-context.json for `attempt`."""

    def new_attempt_context(self, state: RetryState | None, trigger: str) -> AttemptContext:
        """What the next new attempt would run with (read-only)."""

    def merge(self, attempt: AttemptContext, reason: str) -> MergeRefusal | None:
        """Merge the passed attempt's branch into the base branch (the gate's `reason` goes
        into the tk close it commits); None when merged, else why not."""

    def hold_merge(self, attempt: AttemptContext) -> None:
        """Record that the passed attempt's merge waits for `tf-fsm merge`."""
