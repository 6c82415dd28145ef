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
    from tf_fsm.executors.base import Executor
    from tf_fsm.settings.load import LoadedSettings
    from tf_fsm.storage.protocol import Store
    from tf_fsm.tk.tickets import Ticket

OutcomeStatus = Literal["closed", "blocked", "exhausted", "error", "already_closed", "waiting"]


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


class RunContext(Protocol):
    """What a ticket's run offers the code that carries out its attempts (`attempt`,
    `phases`, `attempt_gates`, `same_failure`, `accounting`): the declared seam between them
    and `orchestrator.TicketRun`, which is its one implementation."""

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
