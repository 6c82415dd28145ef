"""Each attempt's models, the retry cap and the same-failure short-circuit (pure).

Settings decide which roles *may* escalate (a null escalation model means the base model); the
curve (tf_fsm.core.curve) decides which roles escalate on a given attempt, and its tiers.
`phase_plan` is the other half of what a retry changes: which phases attempt N runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from tf_fsm.core.curve import TIERED_CURVE, AttemptRecord, EscalationPolicy
from tf_fsm.core.state import Attempt, EscalationRecord, RetryState
from tf_fsm.settings.loaded import LoadedSettings
from tf_fsm.settings.roles import REVIEWER_ROLES
from tf_fsm.settings.schema import ESCALATION_KEYS

_KEY_OF_ROLE = {role: key for key, role in ESCALATION_KEYS.items()}


@dataclass(frozen=True)
class RoleResolution:
    role: str
    model: str
    thinking: str | None
    base_model: str
    escalated: bool
    reason: str
    source: str = "settings"  # escalated | frontmatter | settings, in `resolve`'s precedence


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
        """retry-state.json's per-attempt `escalation` object: escalated model, or null for base."""
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
    tier: int | None = None,
) -> Resolution:
    """Each role's model for the attempt. Precedence: this attempt's escalated model,
    then the role's prompt-template frontmatter `model`/`thinking`, then the settings mapping.
    `tier` raises the attempt to that tier when it is above the curve's (the same-failure
    short-circuit); the policy then sees the first attempt number of that tier."""
    esc = settings.workflow.escalation
    curve_number = max(attempt_number, tier or 1)
    record = AttemptRecord(curve_number, attempt_number - 1, esc.maxRetries)
    wanted = policy(record) if esc.enabled else frozenset()
    tier = policy.tier_of(curve_number)
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


def phase_plan(
    attempt: int, settings: LoadedSettings, research_flag: bool | None, resolution: Resolution
) -> dict[str, tuple[bool, str]]:
    """Which phases attempt `attempt` runs, and why. Fix is provisional: it also needs failOn
    findings in review.md, which only the review phase can tell."""
    wf = settings.workflow
    plan: dict[str, tuple[bool, str]] = {}
    if research_flag is True:
        plan["research"] = (True, "--with-research")
    elif research_flag is False:
        plan["research"] = (False, "--no-research")
    elif not wf.enableResearcher:
        plan["research"] = (False, "workflow.enableResearcher is false")
    elif attempt > 1:
        plan["research"] = (
            False,
            "retry: research is not re-run (the prior failure summary is given instead); "
            "--with-research forces it",
        )
    else:
        plan["research"] = (True, "attempt 1")
    if attempt == 1:
        plan["implement"] = (True, "attempt 1")
    elif resolution.roles["worker"].escalated:
        plan["implement"] = (
            True,
            f"retry with an escalated worker ({resolution.roles['worker'].model})",
        )
    else:
        plan["implement"] = (False, "retry without an escalated worker: the implementation stands")
    reviewers = [r for r in wf.enableReviewers if r in REVIEWER_ROLES]
    plan["review"] = (
        (True, f"reviewers: {', '.join(reviewers)}")
        if reviewers
        else (False, "workflow.enableReviewers is empty")
    )
    plan["fix"] = (
        (True, "when review.md has failOn findings")
        if wf.enableFixer
        else (False, "workflow.enableFixer is false")
    )
    plan["verify"] = (True, "the quality gate is decided here")
    plan["close"] = (True, "always")
    return plan


def stopped(state: RetryState | None) -> bool:
    """Did the ticket stop before its retries ran out (the same failure repeated)?"""
    return (
        state is not None
        and state.stopReason is not None
        and state.current is not None
        and state.current.status == "blocked"
    )


def retries_left(state: RetryState | None, settings: LoadedSettings) -> int:
    used = state.retryCount if state is not None else 0
    return max(0, settings.max_retries - used)


def should_retry(state: RetryState | None, settings: LoadedSettings) -> bool:
    """May another attempt start? The cap counts blocked attempts since the last close, so
    no ticket runs more than `maxRetries` attempts in a row without closing. A ticket the
    same-failure short-circuit stopped runs no more attempts either (until --retry-reset)."""
    return retries_left(state, settings) > 0 and not stopped(state)


#: why no attempt starts at all (a ticket with retryCount >= maxRetries is skipped)
NO_ATTEMPT_ALLOWED = "workflow.escalation.maxRetries is 0: no attempt may run"


# -- the same-failure short-circuit ----------------------------------------------------------

SameFailureMode = Literal["skip-tier", "stop", "off"]
#: skip-tier: the next attempt runs at a tier above the curve's; stop: no further attempt;
#: escalate: the failure survived a change of models and the curve escalates anyway;
#: retry-top: it survived the step up to the top tier, which gets its second attempt
SameFailureAction = Literal["skip-tier", "stop", "escalate", "retry-top"]
Models = tuple[tuple[str, str | None], ...]


@dataclass(frozen=True)
class TriedAttempt:
    """What the short-circuit needs of a finished attempt."""

    number: int
    tier: int
    signature: str | None
    models: Models  # the escalation record: escalated model per role, None = base

    @classmethod
    def of(cls, attempt: Attempt) -> TriedAttempt:
        record = attempt.escalation or EscalationRecord.of()
        models = tuple(sorted(EscalationRecord.of(**record.to_json_dict()).to_json_dict().items()))
        # older files: the curve's tier
        tier = attempt.tier or TIERED_CURVE.tier_of(attempt.attemptNumber)
        return cls(attempt.attemptNumber, tier, attempt.failureSignature, models)


@dataclass(frozen=True)
class SameFailure:
    """Attempt `attempt` failed exactly like attempt `previous`, and what follows from it."""

    previous: int
    attempt: int
    signature: str
    tier: int
    action: SameFailureAction
    next_tier: int | None  # None when the ticket stops
    reason: str


def same_failure(
    previous: TriedAttempt,
    last: TriedAttempt,
    mode: SameFailureMode,
    tier_models: Mapping[int, Models],
) -> SameFailure | None:
    """The short-circuit's decision after `last` was blocked; None unless its signature
    repeats `previous`'s. A tier is spent when the same models failed the same way twice in a
    row: the next attempt then runs at the next tier whose models differ (skip-tier), or the
    ticket stops when there is none. A failure that survived a change of models only shows
    that the step did not help; the curve goes on (and the top tier gets a second attempt)."""
    sig = last.signature
    if mode == "off" or sig is None or sig != previous.signature:
        return None
    pair = f"attempts {previous.number} and {last.number}"
    higher = next(
        (t for t in sorted(tier_models) if t > last.tier and tier_models[t] != last.models), None
    )

    def decide(action: SameFailureAction, tier: int | None, why: str) -> SameFailure:
        return SameFailure(previous.number, last.number, sig, last.tier, action, tier, why)

    if mode == "stop":
        return decide("stop", None, f"{pair} failed the same way (sameFailure is stop)")
    if previous.models == last.models:
        if higher is None:
            why = f"{pair} failed the same way with the same models, at the top tier"
            return decide("stop", None, why)
        why = f"{pair} failed the same way at tier {last.tier}: the next attempt runs at {higher}"
        return decide("skip-tier", higher, why)
    if higher is None:
        why = f"{pair} failed the same way across the step up to the top tier, which gets a "
        return decide("retry-top", last.tier, why + "second attempt")
    return decide("escalate", higher, f"{pair} failed the same way; the curve escalates")


#: tier_models of the last settings asked about (a run asks after every blocked attempt, and
#: when it plans the next): by identity, settings are frozen once loaded
_TIERS_OF: list[tuple[LoadedSettings, dict[int, Models]]] = []


def tier_models(settings: LoadedSettings) -> dict[int, Models]:
    """The escalated models of each tier under these settings (a tier with no configured
    model for its roles runs the same models as the tier below it)."""
    for seen, models in _TIERS_OF:
        if seen is settings:
            return dict(models)
    out: dict[int, Models] = {}
    for tier in TIERED_CURVE.tiers:
        record = resolve(tier, settings).escalation_record().to_json_dict()
        out[tier] = tuple(sorted(record.items()))
    _TIERS_OF[:] = [(settings, out), *_TIERS_OF[:3]]
    return dict(out)


def detect_same_failure(state: RetryState | None, settings: LoadedSettings) -> SameFailure | None:
    """The decision for the state's last attempt (pure; recomputed wherever it is needed, so
    the run, `status` and `run --plan` agree). Only with escalation enabled: with it off,
    tf_fsm behaves as before the short-circuit existed (pi-ticketflow's behaviour)."""
    esc = settings.workflow.escalation
    if state is None or len(state.attempts) < 2 or not esc.enabled:
        return None
    previous, last = state.attempts[-2], state.attempts[-1]
    if previous.status != "blocked" or last.status != "blocked":
        return None
    mode: SameFailureMode = esc.sameFailure
    return same_failure(
        TriedAttempt.of(previous), TriedAttempt.of(last), mode, tier_models(settings)
    )


def next_tier(state: RetryState | None, settings: LoadedSettings) -> int:
    """The tier of the state's next new attempt: the curve's for its number, never below the
    tier of the blocked attempt before it (a skipped tier stays skipped), and the short-
    circuit's when it skips a tier."""
    number = state.next_attempt_number if state else 1
    tier = TIERED_CURVE.tier_of(number)
    last = state.current if state else None
    if state is None or last is None or last.status != "blocked":
        return tier
    tier = max(tier, TriedAttempt.of(last).tier)
    decision = detect_same_failure(state, settings)
    if decision is not None and decision.action == "skip-tier" and decision.next_tier:
        tier = max(tier, decision.next_tier)
    return min(tier, TIERED_CURVE.top)
