"""The types at a ticket run's boundary: `RunOptions` in, an `Outcome` out, an `Observer`
told of each phase. Kept apart from the orchestrator so callers and the budget check can name
them without importing the machinery that runs a ticket."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, Protocol

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
