"""The escalation curve: which roles escalate on an attempt, and the tiers that follows (pure).

Policies are callables of one record, in the manner of tenacity's `stop`/`wait`:
`escalate_from("fixer", 2) | escalate_from("worker", 3)` is itself a policy. And as tenacity's
objects carry their parameters, a curve carries its tiers: a tier begins at each attempt number
where the curve changes what escalates, and is numbered by it (tier 1 is the base models;
TIERED_CURVE's tiers are 1, 2 and 3, its top). Nothing else names a tier number.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass


@dataclass(frozen=True)
class AttemptRecord:
    """What the policies look at: one attempt, seen before it starts."""

    number: int
    retry_count: int = 0
    max_retries: int = 3


class EscalationPolicy(abc.ABC):
    """Which roles escalate on an attempt."""

    @abc.abstractmethod
    def __call__(self, attempt: AttemptRecord) -> frozenset[str]: ...

    @abc.abstractmethod
    def changes(self) -> frozenset[int]:
        """The attempt numbers where this policy changes what escalates."""

    def __or__(self, other: EscalationPolicy) -> EscalationPolicy:
        return escalate_any(self, other)

    @property
    def tiers(self) -> tuple[int, ...]:
        """The curve's tiers, lowest first: 1 (the base models), then each attempt number where
        it changes what escalates."""
        return (1, *sorted(n for n in self.changes() if n > 1))

    @property
    def top(self) -> int:
        """The highest tier: every attempt from it on runs its models."""
        return self.tiers[-1]

    def tier_of(self, attempt_number: int) -> int:
        """The tier attempt `attempt_number` runs at on this curve."""
        return max(t for t in self.tiers if t <= max(attempt_number, 1))

    def attempts_of(self, tier: int) -> str:
        """The attempts tier `tier` covers as the tables and the legend name them, by its
        first: "2", or "3+" for the top."""
        return f"{tier}+" if tier == self.top else str(tier)


class escalate_from(EscalationPolicy):  # lower case: reads like tenacity
    """`role` escalates from attempt `first` on."""

    def __init__(self, role: str, first: int) -> None:
        self.role, self.first = role, first

    def __call__(self, attempt: AttemptRecord) -> frozenset[str]:
        return frozenset({self.role}) if attempt.number >= self.first else frozenset()

    def changes(self) -> frozenset[int]:
        return frozenset({self.first})

    def __repr__(self) -> str:
        return f"escalate_from({self.role!r}, {self.first})"


class escalate_any(EscalationPolicy):
    """The union of several policies."""

    def __init__(self, *policies: EscalationPolicy) -> None:
        self.policies = policies

    def __call__(self, attempt: AttemptRecord) -> frozenset[str]:
        return frozenset().union(*(p(attempt) for p in self.policies))

    def changes(self) -> frozenset[int]:
        return frozenset().union(*(p.changes() for p in self.policies))

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.policies))


class escalate_none(EscalationPolicy):
    def __call__(self, attempt: AttemptRecord) -> frozenset[str]:
        return frozenset()

    def changes(self) -> frozenset[int]:
        return frozenset()


#: The default curve: attempt 1 base; attempt 2 fixer; attempt 3+ fixer, second-opinion
#: reviewer, worker.
TIERED_CURVE: EscalationPolicy = (
    escalate_from("fixer", 2)
    | escalate_from("reviewer-second-opinion", 3)
    | escalate_from("worker", 3)
)
