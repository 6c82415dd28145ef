"""The retry-state schema (pi-ticketflow's `retry-state.json`) and its pure updates.

Nothing here touches the disk or the clock: timestamps come in as arguments. The model keeps
the exact field names of pi-ticketflow, accepts the looser files it writes in practice
(legacy triggers, repeated attempt numbers, attempts left in progress without
`completedAt`/`qualityGate`/`escalation`), and preserves unknown keys, so that a file it wrote
round-trips unchanged.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator, model_validator

from tf_fsm.core.curve import TIERED_CURVE

# Re-exported: the severities lived here before tf_fsm.settings.severity; callers import them.
from tf_fsm.settings.severity import SEVERITIES as SEVERITIES
from tf_fsm.settings.severity import normalize_severity as normalize_severity

SCHEMA_VERSION = 1
#: The largest attempt number or retry count a file may hold. A run never writes more than
#: workflow.escalation.maxRetries + 1 (at most 1001), so only a damaged or hand-made file
#: reaches it, and it is refused (corrupt, exit 2) rather than carried into a run.
MAX_ATTEMPTS = 10_000

AttemptStatus = Literal["in_progress", "blocked", "closed", "error"]
TicketStatus = Literal["active", "blocked", "closed"]

#: Triggers tf_fsm writes. pi-ticketflow also wrote `manual`, `implementation`, `retry` and
#: `auto`; any lower-case word loads, so older files are never refused for their trigger.
Trigger = Literal["initial", "quality_gate", "manual_retry", "ralph_retry"]
KNOWN_TRIGGERS: frozenset[str] = frozenset(
    {
        "initial",
        "quality_gate",
        "manual_retry",
        "ralph_retry",
        "manual",
        "implementation",
        "retry",
        "auto",
    }
)
_TRIGGER_RE = re.compile(r"^[a-z][a-z0-9_-]*$")


def utc_stamp(moment: datetime) -> str:
    """The timestamp format pi-ticketflow writes: second resolution, `Z` suffix."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _check_timestamp(value: str) -> str:
    try:
        datetime.fromisoformat(value)
    except ValueError as exc:
        raise ValueError(f"not an ISO 8601 timestamp: {value!r}") from exc
    return value


def _lower(value: Any) -> Any:
    # pi-ticketflow stores statuses lower case; they are parsed case-insensitively.
    return value.lower() if isinstance(value, str) else value


class _Record(BaseModel):
    # `extra="allow"` keeps keys written by other tools, so a rewrite loses nothing.
    model_config = ConfigDict(extra="allow", frozen=True)

    def to_json_dict(self) -> dict[str, Any]:
        # Only fields that were present (or set by us) are written: absent stays absent.
        return self.model_dump(mode="json", exclude_unset=True)


class QualityGateRecord(_Record):
    failOn: list[str] = Field(default_factory=list)
    counts: dict[str, int] = Field(default_factory=dict)

    @field_validator("counts")
    @classmethod
    def _non_negative(cls, counts: dict[str, int]) -> dict[str, int]:
        negative = {k: v for k, v in counts.items() if v < 0}
        if negative:
            raise ValueError(f"severity counts must not be negative: {negative}")
        return counts


class EscalationRecord(_Record):
    """The escalated model per role for one attempt; null means the base model was used."""

    fixer: str | None = None
    reviewerSecondOpinion: str | None = None
    worker: str | None = None

    @classmethod
    def of(
        cls,
        fixer: str | None = None,
        reviewerSecondOpinion: str | None = None,
        worker: str | None = None,
    ) -> EscalationRecord:
        """All three keys, always written (null = base model), as pi-ticketflow writes them."""
        return cls(fixer=fixer, reviewerSecondOpinion=reviewerSecondOpinion, worker=worker)

    def escalated_roles(self) -> list[str]:
        return [role for role, model in self.to_json_dict().items() if model is not None]


class UsageRecord(_Record):
    """Tokens and cost the agent CLIs reported for an attempt's invocations (summed)."""

    inputTokens: int = Field(default=0, ge=0)
    outputTokens: int = Field(default=0, ge=0)
    costUsd: float = Field(default=0.0, ge=0)


class Attempt(_Record):
    attemptNumber: StrictInt = Field(ge=1, le=MAX_ATTEMPTS)
    startedAt: str
    completedAt: str | None = None
    status: AttemptStatus
    trigger: str
    qualityGate: QualityGateRecord | None = None
    escalation: EscalationRecord | None = None
    closeSummaryRef: str | None = None
    # tf_fsm's own optional fields; pi-ticketflow ignores keys it does not know.
    phase: str | None = None
    reason: str | None = None
    #: why the attempt did not close: quality (the gate), budget, or the failed invocation's
    #: class (crash, timeout, killed, provider, agent_error, no_output)
    failureClass: str | None = None
    usage: UsageRecord | None = None
    #: the escalation tier the attempt ran at (tf_fsm.core.curve); absent in older files,
    #: where the tier is the curve's for the attempt number
    tier: StrictInt | None = Field(default=None, ge=1, le=TIERED_CURVE.top)
    #: digest of the blocked attempt's failure signature (tf_fsm/core/signature.py)
    failureSignature: str | None = None
    #: set when this attempt failed exactly like the one before it: {previousAttempt, action,
    #: nextTier}; action is skip-tier, stop, escalate or retry-top (docs/lifecycle.md)
    sameFailure: dict[str, Any] | None = None

    _lower_status = field_validator("status", mode="before")(_lower)

    @field_validator("trigger")
    @classmethod
    def _trigger_word(cls, value: str) -> str:
        if not _TRIGGER_RE.match(value):
            raise ValueError(f"trigger must be a lower-case word, got {value!r}")
        return value

    @field_validator("startedAt", "completedAt")
    @classmethod
    def _timestamps(cls, value: str | None) -> str | None:
        return value if value is None else _check_timestamp(value)


class RetryState(_Record):
    version: Literal[1] = 1
    ticketId: str
    attempts: list[Attempt] = Field(default_factory=list)
    lastAttemptAt: str
    status: TicketStatus = "active"
    #: "2" or true is an error, not a count
    retryCount: StrictInt = Field(default=0, ge=0, le=MAX_ATTEMPTS)
    #: why the ticket stopped before its retries ran out (`same-failure`); absent otherwise.
    #: Only --retry-reset (or a successful close) clears it.
    stopReason: Literal["same-failure"] | None = None

    _lower_status = field_validator("status", mode="before")(_lower)

    @model_validator(mode="before")
    @classmethod
    def _derive_missing_retry_count(cls, data: Any) -> Any:
        # pi-ticketflow's loader does not require retryCount. Defaulting it to 0 would reset
        # the counter and let a ticket retry forever, so it is derived from the attempts.
        if (
            isinstance(data, dict)
            and "retryCount" not in data
            and isinstance(data.get("attempts"), list)
        ):
            statuses = [a.get("status", "") for a in data["attempts"] if isinstance(a, dict)]
            return {**data, "retryCount": _blocked_since_close(statuses)}
        return data

    @field_validator("lastAttemptAt")
    @classmethod
    def _timestamp(cls, value: str) -> str:
        return _check_timestamp(value)

    @property
    def current(self) -> Attempt | None:
        """The most recent attempt. File order is the order; timestamps may tie."""
        return self.attempts[-1] if self.attempts else None

    @property
    def next_attempt_number(self) -> int:
        """Attempt numbers restart at 1 after a successful close, as in pi-ticketflow's files:
        the number is the escalation tier's input, so it is one more than the blocked
        attempts counted since the last close."""
        return self.retryCount + 1

    @property
    def has_open_attempt(self) -> bool:
        cur = self.current
        return cur is not None and cur.status in ("in_progress", "error")


_M = TypeVar("_M", bound=BaseModel)


def _with(model: _M, **changes: Any) -> _M:
    # model_copy(update=...) marks the updated fields as set, so they are written.
    return model.model_copy(update=changes)


def new_state(ticket_id: str, now: datetime) -> RetryState:
    return RetryState(
        version=SCHEMA_VERSION,
        ticketId=ticket_id,
        attempts=[],
        lastAttemptAt=utc_stamp(now),
        status="active",
        retryCount=0,
    )


def start_attempt(
    state: RetryState,
    *,
    trigger: str,
    escalation: EscalationRecord,
    fail_on: list[str],
    now: datetime,
    tier: int | None = None,
) -> RetryState:
    """Append a new in-progress attempt. An open (in_progress/error) attempt must be resumed or
    ended first; a closed ticket that is run again starts over at attempt 1."""
    if state.has_open_attempt:
        raise ValueError("the current attempt is still open; resume it instead of starting another")
    stamp = utc_stamp(now)
    attempt = Attempt(
        attemptNumber=state.next_attempt_number,
        startedAt=stamp,
        status="in_progress",
        trigger=trigger,
        escalation=escalation,
        qualityGate=QualityGateRecord(failOn=list(fail_on)),
        **({"tier": tier} if tier is not None else {}),
    )
    return _with(state, attempts=[*state.attempts, attempt], lastAttemptAt=stamp, status="active")


def update_current(state: RetryState, **changes: Any) -> RetryState:
    """Change fields of the current attempt (e.g. the phase it is in)."""
    cur = state.current
    if cur is None:
        raise ValueError("no attempt to update")
    return _with(state, attempts=[*state.attempts[:-1], _with(cur, **changes)])


def finish_attempt(
    state: RetryState,
    *,
    status: Literal["blocked", "closed", "error"],
    counts: dict[str, int] | None,
    max_retries: int,
    now: datetime,
    reason: str | None = None,
    close_summary_ref: str | None = "close-summary.md",
) -> RetryState:
    """End the current attempt. The counter rules: blocked increments `retryCount`;
    only a successful close resets it; an error leaves it alone (the attempt is resumable)."""
    cur = state.current
    if cur is None or cur.status != "in_progress":
        raise ValueError("no attempt in progress to finish")
    stamp = utc_stamp(now)
    gate = cur.qualityGate or QualityGateRecord()
    changes: dict[str, Any] = {"status": status, "completedAt": stamp}
    if counts is not None:
        full = {sev: int(counts.get(sev, 0)) for sev in SEVERITIES}
        changes["qualityGate"] = _with(gate, counts=full)
    if reason is not None:
        changes["reason"] = reason
    if status != "error" and close_summary_ref is not None:
        changes["closeSummaryRef"] = close_summary_ref
    attempts = [*state.attempts[:-1], _with(cur, **changes)]
    retry_count, top = state.retryCount, state.status
    if status == "blocked":
        retry_count += 1
        top = "blocked" if retry_count >= max_retries else "active"
    elif status == "closed":
        retry_count, top = 0, "closed"
    return _with(state, attempts=attempts, lastAttemptAt=stamp, retryCount=retry_count, status=top)


def reopen_attempt(state: RetryState, now: datetime) -> RetryState:
    """Resume an attempt that ended in error: same number, trigger and models."""
    cur = state.current
    if cur is None or cur.status not in ("error", "in_progress"):
        raise ValueError("no attempt to resume")
    # Rebuilt rather than copied so the old completedAt/reason do not linger.
    kept = {k: v for k, v in cur.to_json_dict().items() if k not in ("completedAt", "reason")}
    reopened = Attempt.model_validate({**kept, "status": "in_progress"})
    return _with(state, attempts=[*state.attempts[:-1], reopened], lastAttemptAt=utc_stamp(now))


def _blocked_since_close(statuses: list[str]) -> int:
    count = 0
    for status in statuses:
        if str(status).lower() == "closed":
            count = 0
        elif str(status).lower() == "blocked":
            count += 1
    return count


def derived_retry_count(attempts: list[Attempt]) -> int:
    """Blocked attempts since the last close: what `retryCount` should say."""
    return _blocked_since_close([a.status for a in attempts])
