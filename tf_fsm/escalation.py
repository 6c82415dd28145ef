"""The escalation curve and the retry cap, as small composable policies (pure).

Policies are callables of one record, in the manner of tenacity's `stop`/`wait`:
`escalate_from("fixer", 2) | escalate_from("worker", 3)` is itself a policy. Settings decide
which roles *may* escalate (a null escalation model means the base model); the curve decides
which roles escalate on a given attempt.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping
from dataclasses import dataclass, field

from tf_fsm.config import ESCALATION_KEYS, LoadedSettings
from tf_fsm.state import EscalationRecord, RetryState

_KEY_OF_ROLE = {role: key for key, role in ESCALATION_KEYS.items()}


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

    def __or__(self, other: EscalationPolicy) -> EscalationPolicy:
        return escalate_any(self, other)


class escalate_from(EscalationPolicy):  # lower case: reads like tenacity
    """`role` escalates from attempt `first` on."""

    def __init__(self, role: str, first: int) -> None:
        self.role, self.first = role, first

    def __call__(self, attempt: AttemptRecord) -> frozenset[str]:
        return frozenset({self.role}) if attempt.number >= self.first else frozenset()

    def __repr__(self) -> str:
        return f"escalate_from({self.role!r}, {self.first})"


class escalate_any(EscalationPolicy):
    """The union of several policies."""

    def __init__(self, *policies: EscalationPolicy) -> None:
        self.policies = policies

    def __call__(self, attempt: AttemptRecord) -> frozenset[str]:
        return frozenset().union(*(p(attempt) for p in self.policies))

    def __repr__(self) -> str:
        return " | ".join(map(repr, self.policies))


class escalate_none(EscalationPolicy):
    def __call__(self, attempt: AttemptRecord) -> frozenset[str]:
        return frozenset()


#: Seed 000: attempt 1 base; attempt 2 fixer; attempt 3+ fixer, second-opinion reviewer, worker.
TIERED_CURVE: EscalationPolicy = (
    escalate_from("fixer", 2)
    | escalate_from("reviewer-second-opinion", 3)
    | escalate_from("worker", 3)
)


def tier_of(attempt_number: int) -> int:
    """The curve's tier: 1 base, 2 fixer, 3 everything configured."""
    return max(1, min(attempt_number, 3))


@dataclass(frozen=True)
class RoleResolution:
    role: str
    model: str
    thinking: str | None
    base_model: str
    escalated: bool
    reason: str
    source: str = "settings"  # escalated | frontmatter | settings (seed 002's precedence)


@dataclass(frozen=True)
class Resolution:
    """Every role's model for one attempt, and why."""

    attempt: int
    tier: int
    roles: dict[str, RoleResolution] = field(default_factory=dict)

    @property
    def escalated_roles(self) -> list[str]:
        return [r.role for r in self.roles.values() if r.escalated]

    def escalation_record(self) -> EscalationRecord:
        """The seed's per-attempt `escalation` object: escalated model, or null for base."""
        models = {
            key: (
                self.roles[role].model
                if role in self.roles and self.roles[role].escalated
                else None
            )
            for key, role in ESCALATION_KEYS.items()
        }
        return EscalationRecord.of(**models)


def resolve(
    attempt_number: int,
    settings: LoadedSettings,
    policy: EscalationPolicy = TIERED_CURVE,
    frontmatter: Mapping[str, tuple[str | None, str | None]] | None = None,
) -> Resolution:
    """Each role's model for the attempt. Precedence (seed 002): this attempt's escalated model,
    then the role's prompt-template frontmatter `model`/`thinking`, then the settings mapping."""
    esc = settings.workflow.escalation
    record = AttemptRecord(attempt_number, attempt_number - 1, esc.maxRetries)
    wanted = policy(record) if esc.enabled else frozenset()
    tier = tier_of(attempt_number)
    roles: dict[str, RoleResolution] = {}
    for role, base in settings.roles.items():
        up = settings.escalated.get(role)
        if role in wanted and up is not None:
            reason = f"attempt {attempt_number}, tier {tier}: escalated by {up.source}"
            roles[role] = RoleResolution(
                role, up.model, up.thinking, base.model, True, reason, "escalated"
            )
            continue
        fm_model, fm_thinking = (frontmatter or {}).get(role, (None, None))
        if role in wanted:
            key = f"workflow.escalation.models.{_KEY_OF_ROLE.get(role, role)}"
            reason = (
                f"attempt {attempt_number}, tier {tier} escalates {role}, "
                f"but {key} is null: base model"
            )
        elif not esc.enabled and role in _KEY_OF_ROLE:
            reason = "escalation disabled (workflow.escalation.enabled is false): base model"
        else:
            reason = f"attempt {attempt_number}, tier {tier}: base model ({base.source})"
        if fm_model or fm_thinking:
            roles[role] = RoleResolution(
                role,
                fm_model or base.model,
                fm_thinking or base.thinking,
                base.model,
                False,
                f"{reason}; prompt frontmatter sets {'model' if fm_model else 'thinking'}",
                "frontmatter",
            )
            continue
        roles[role] = RoleResolution(role, base.model, base.thinking, base.model, False, reason)
    return Resolution(attempt_number, tier, roles)


def retries_left(state: RetryState | None, settings: LoadedSettings) -> int:
    used = state.retryCount if state is not None else 0
    return max(0, settings.max_retries - used)


def should_retry(state: RetryState | None, settings: LoadedSettings) -> bool:
    """May another attempt start? The cap counts blocked attempts since the last close, so
    no ticket runs more than `maxRetries` attempts in a row without closing."""
    return retries_left(state, settings) > 0


def should_skip(state: RetryState | None, settings: LoadedSettings) -> bool:
    """The backlog loop's test: the last attempt was blocked and the retries are spent."""
    if state is None or state.current is None:
        return False
    return state.current.status == "blocked" and state.retryCount >= settings.max_retries
