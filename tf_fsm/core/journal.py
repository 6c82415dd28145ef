"""The ticket journal (`events.jsonl`): the lifecycle's event models. No file I/O here; the
line codec is tf_fsm.core.journal_codec, the workspace's events tf_fsm.core.workspace_events.

One event is one line of compact JSON. Event types this version does not know are read back as
plain `Event`s with all their fields, so an older tf_fsm can still read a newer journal.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from tf_fsm.core.curve import TIERED_CURVE
from tf_fsm.core.state import MAX_ATTEMPTS

# The numbers a run writes, bounded as retry-state.json bounds them (tf_fsm.core.state), so a line
# no run could have written is corruption naming its line, not a number carried into a run.
# Numbers the agents report (usage, cost) or the OS gives (exit codes) are not bounded above:
# a bound there would refuse a line tf_fsm itself wrote.
#: an attempt's number, or a restart's, an inner gate try's
Ordinal = Annotated[int, Field(ge=1, le=MAX_ATTEMPTS)]
#: a retry count or its cap
Count = Annotated[int, Field(ge=0, le=MAX_ATTEMPTS)]
#: the escalation tier, one of the curve's (tf_fsm.core.curve)
Tier = Annotated[int, Field(ge=1, le=TIERED_CURVE.top)]
#: a size, a duration or a number of findings
NonNegative = Annotated[int, Field(ge=0)]

_REGISTRY: dict[str, type[Event]] = {}


def timestamp(moment: datetime) -> str:
    """UTC, ISO 8601, milliseconds, `Z`: 2026-02-14T02:37:05.123Z."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def validation_problem(exc: ValidationError) -> str:
    """`field.path: problem (got 'value')` for each error, joined with `; `."""
    parts = []
    for error in exc.errors():
        where = ".".join(str(p) for p in error["loc"]) or "<top level>"
        value = error.get("input")
        got = ""
        if error["type"] != "missing" and isinstance(value, str | int | float | bool):
            shown = repr(value)
            got = f" (got {shown[:40]}{'...' if len(shown) > 40 else ''})"
        parts.append(f"{where}: {error['msg']}{got}")
    return "; ".join(parts)


class Event(BaseModel):
    """Base of every journal event. Subclasses set `event` to a `Literal` default, which is
    their type name in the file; defining the subclass registers it for decoding."""

    # Unknown keys are kept: they belong to a newer writer and must survive a read.
    model_config = ConfigDict(extra="allow", frozen=True)

    event: str
    ts: str
    ticket: str
    attempt: Ordinal | None = None

    @field_validator("ts")
    @classmethod
    def _iso_timestamp(cls, value: str) -> str:
        try:
            datetime.fromisoformat(value)
        except ValueError as exc:
            raise ValueError(f"not an ISO 8601 timestamp: {value!r}") from exc
        return value

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        name = cls.model_fields["event"].default
        if not isinstance(name, str):
            raise TypeError(f"{cls.__name__} must give `event` a Literal default (its type name)")
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise TypeError(f"event type {name!r} is already defined by {_REGISTRY[name].__name__}")
        _REGISTRY[name] = cls


def event_types() -> dict[str, type[Event]]:
    """The registered event classes by type name (a copy)."""
    return dict(_REGISTRY)


def event_class(name: str) -> type[Event]:
    """The class of event type `name`; the plain Event for a type this version does not know
    (a newer writer's), which keeps all its fields."""
    return _REGISTRY.get(name, Event)


class AttemptStarted(Event):
    event: Literal["AttemptStarted"] = "AttemptStarted"
    trigger: str
    escalation: dict[str, str | None]
    #: role -> {model, source}: source is escalated | frontmatter | settings
    models: dict[str, dict[str, str]] | None = None
    #: the commit the attempt starts from, in a ticket's own worktree (docs/workspaces.md)
    head: str | None = None


class AttemptFinished(Event):
    event: Literal["AttemptFinished"] = "AttemptFinished"
    status: str
    counts: dict[str, NonNegative] | None = None
    reason: str | None = None


class RetryStateReset(Event):
    event: Literal["RetryStateReset"] = "RetryStateReset"
    backup: str | None = None
    retryCountBefore: Count | None = None


class JournalTailDropped(Event):
    """A torn final line (a crashed append) was cut off before the next append."""

    event: Literal["JournalTailDropped"] = "JournalTailDropped"
    bytes: NonNegative
    preview: str


class AttemptResumed(Event):
    event: Literal["AttemptResumed"] = "AttemptResumed"
    phase: str
    reason: str | None = None  # why this phase is the first not complete


class EscalationApplied(Event):
    event: Literal["EscalationApplied"] = "EscalationApplied"
    roles: dict[str, str]
    tier: Tier
    reason: str


class ResearchSkippedOnRetry(Event):
    """A retry does not re-run research (pi-ticketflow's RagSkippedOnRetry)."""

    event: Literal["ResearchSkippedOnRetry"] = "ResearchSkippedOnRetry"
    attemptCount: Count
    lastFailureKind: str


class PhaseStarted(Event):
    event: Literal["PhaseStarted"] = "PhaseStarted"
    phase: str
    roles: list[str]


class PhaseSkipped(Event):
    event: Literal["PhaseSkipped"] = "PhaseSkipped"
    phase: str
    reason: str


class InvocationFinished(Event):
    event: Literal["InvocationFinished"] = "InvocationFinished"
    phase: str
    role: str
    model: str
    artifact: str
    sha256: str | None
    ok: bool
    durationMs: NonNegative
    #: {inputTokens, outputTokens, costUsd} when the agent CLI reported them
    usage: dict[str, int | float] | None = None  # token counts stay ints, cost is a float
    failureClass: str | None = None  # when not ok (see PhaseFailed)


class InvocationRestarted(Event):
    """An invocation failed transiently and runs again after `delay` seconds."""

    event: Literal["InvocationRestarted"] = "InvocationRestarted"
    phase: str
    role: str
    failureClass: str  # crash, timeout, killed, provider
    attemptNo: Ordinal  # the restart's number: 1 for the first restart
    delay: float = Field(ge=0)
    failure: str


class BudgetExhausted(Event):
    """workflow.escalation.maxCostUsd is spent: no further attempt or escalation starts."""

    event: Literal["BudgetExhausted"] = "BudgetExhausted"
    spentUsd: float
    maxCostUsd: float
    reason: str


class PhaseWaiting(Event):
    """A hand-off phase waits for its artifact; `tf-fsm watch` or `run` picks it up."""

    event: Literal["PhaseWaiting"] = "PhaseWaiting"
    phase: str
    role: str
    output: str
    promptFile: str


class PhaseCompleted(Event):
    event: Literal["PhaseCompleted"] = "PhaseCompleted"
    phase: str
    artifact: str
    sha256: str
    #: every file the phase wrote or took from its agents (name under the ticket directory ->
    #: sha256): none of them was fsynced, so a resume checks them all (docs/retry-state.md)
    files: dict[str, str] | None = None


class ViewSaved(Event):
    """The after-image of a view tf_fsm keeps (`retry-state.json`, `chain-context.json`),
    journaled just before the file is written: after a crash the file is rebuilt from it."""

    event: Literal["ViewSaved"] = "ViewSaved"
    file: str
    content: dict[str, Any]


class ViewsSynced(Event):
    """Everything the run wrote before this line was on disk (the durable point at the end
    of a run): a journal that ends otherwise was cut short by a crash."""

    event: Literal["ViewsSynced"] = "ViewsSynced"


class ViewsChecked(Event):
    """A run found the journal cut short by a crash (no ViewsSynced at its end) and checked
    the views against their journaled after-images: `repaired` names those it found missing,
    empty, torn or stale and rewrote (none: every view was whole)."""

    event: Literal["ViewsChecked"] = "ViewsChecked"
    repaired: list[str]


class PhaseFailed(Event):
    event: Literal["PhaseFailed"] = "PhaseFailed"
    phase: str
    role: str
    failure: str
    exitCode: int | None
    stderrTail: str
    log: str
    #: crash, timeout, killed, provider (transient, after the restarts ran out), agent_error,
    #: no_output; absent in journals written before failure classes existed
    failureClass: str | None = None


class GateEvaluated(Event):
    """One gate's verdict: `review-counts` (the failOn counts) or a quality-gate command."""

    event: Literal["GateEvaluated"] = "GateEvaluated"
    name: str = "review-counts"
    passed: bool
    reason: str | None = None
    # review-counts
    counts: dict[str, NonNegative] | None = None
    failOn: list[str] | None = None
    source: str | None = None
    # commands
    exitCode: int | None = None
    durationMs: NonNegative | None = None
    innerTry: Ordinal | None = None
    required: bool | None = None
    #: a required command failing no worse than on the base commit: reported, not blocking
    preexisting: bool | None = None


class GateFeedbackSent(Event):
    """The fixer was sent back with the failing gates' output (the gates' inner loop)."""

    event: Literal["GateFeedbackSent"] = "GateFeedbackSent"
    innerTry: Ordinal
    gates: list[str]
    bytes: NonNegative


class TicketClosed(Event):
    event: Literal["TicketClosed"] = "TicketClosed"
    retryCountBefore: Count


class TicketBlocked(Event):
    event: Literal["TicketBlocked"] = "TicketBlocked"
    reason: str
    retryCount: Count
    maxRetries: Count
    #: the run meant to start the next attempt at once (escalation on, retries left, budget
    #: not refusing, no --once); a run that finds it unstarted after a crash keeps the
    #: trigger quality_gate
    autoRetry: bool = False
    #: the prior-failure summary the next attempt is given, taken from this attempt's
    #: reports as it ended (fenced and capped): a later attempt's reports replace them
    priorFailure: dict[str, Any] | None = None


class StaleTempFilesRemoved(Event):
    """Half-written temp files of a writer that died, swept when the lock was taken."""

    event: Literal["StaleTempFilesRemoved"] = "StaleTempFilesRemoved"
    files: list[str]


class SameFailureDetected(Event):
    """A blocked attempt failed exactly like the one before it (the same failure signature):
    `attempt` and `previousAttempt`, the signature's digest and entries, and the action:
    skip-tier, stop, escalate (the curve escalates anyway) or retry-top."""

    event: Literal["SameFailureDetected"] = "SameFailureDetected"
    previousAttempt: Ordinal
    signature: str
    entries: list[str]
    action: str
    tier: Tier
    nextTier: Tier | None = None
    mode: str
    reason: str


class RetriesExhausted(Event):
    event: Literal["RetriesExhausted"] = "RetriesExhausted"
    retryCount: Count
    maxRetries: Count
