"""Read-only views of tickets for `tf-fsm status` and `tf-fsm gate`. Nothing here writes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tf_fsm.settings.load import LoadedSettings, knowledge_dir
from tf_fsm.storage.ticket_id import TICKET_ID_RE

# Everything else is imported where it is used: `tf-fsm status` on a project where no ticket
# has run needs only the settings, and the journal/state models, the store (the lock, the
# redaction regex) and the detection regexes cost more start-up than the whole command may
# take (benchmarks/bench_startup.py).
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from tf_fsm.core.journal import Event
    from tf_fsm.core.next_step import TkFile
    from tf_fsm.core.state import Attempt, RetryState
    from tf_fsm.storage.store import TicketStore
    from tf_fsm.tk.backlog import TkRecord


#: how `next` starts when `run` would refuse the ticket (and the loop skips it)
NOTHING = "nothing: "
#: the status column of `retryCount` out of `maxRetries`: blocked attempts since the last close
BLOCKED_ATTEMPTS = "blocked attempts"


def refuses(upcoming: str) -> bool:
    """`skip`: the next step is nothing (one decision, `next_step`, gives both)."""
    return upcoming.startswith(NOTHING)


def blocked_attempts(count: int, cap: int, closed: bool) -> str:
    """`retryCount` out of `maxRetries` in words that cannot read as a contradiction of the
    attempt number: a close resets the count, so after one it says so instead of `0/3`."""
    return "reset on close" if closed else f"{count}/{cap}"


def tracked_tickets(root: Path, settings: LoadedSettings) -> list[str]:
    """Tickets with a state directory, sorted by id."""
    base = knowledge_dir(root, settings) / "tickets"
    if not base.is_dir():
        return []
    return sorted(p.name for p in base.iterdir() if p.is_dir() and TICKET_ID_RE.fullmatch(p.name))


def whole_backlog(root: Path, settings: LoadedSettings) -> tuple[list[TkRecord | str], list[str]]:
    """`status --all`: every ticket of `.tickets/` in tk's order (priority, then id, each
    compared as awk compares them, as `tk ready` sorts), then the tickets with state but no
    ticket file, by id; and what the scan found wrong (a file without an `id:` line, an id in
    two files)."""
    from tf_fsm.tk.backlog import scan, tickets_dir

    backlog = scan(tickets_dir(root))
    gone = [t for t in tracked_tickets(root, settings) if t not in backlog.records]
    return [*in_tk_order(backlog.records.values()), *gone], [str(p) for p in backlog.problems]


def in_tk_order(records: Iterable[TkRecord]) -> list[TkRecord]:
    """Tickets in tk's order: priority, then id, each compared as awk compares them."""
    from tf_fsm.tk.selection import Line, tk_sort

    return [line.record for line in tk_sort([Line(r, (r.priority, r.id)) for r in records])]


def status_row(root: Path, settings: LoadedSettings, ticket: TkRecord | str) -> dict[str, Any]:
    """`ticket_status` of a ticket id (named, or with state), or of a backlog record (`--all`)
    with why `run` cannot take it: an id that cannot name a ticket, or one whose file `run`
    would not find (the id is in another file)."""
    from tf_fsm.errors import InvalidTicketIdError
    from tf_fsm.tk.tickets import ticket_path

    if isinstance(ticket, str):
        return ticket_status(root, settings, ticket)
    record = ticket
    try:
        row = ticket_status(root, settings, record.id)
    except InvalidTicketIdError as exc:
        return _unrunnable_row(record.id, str(exc))
    expected = ticket_path(root, record.id)
    if not expected.is_file():
        why = f"its id is {record.id} but its file is {record.path.name} (run reads {expected})"
        row["next"] = f"{NOTHING}{why}"
        row["skip"] = refuses(row["next"])
    return row


def _unrunnable_row(ticket_id: str, why: str) -> dict[str, Any]:
    """The row of a backlog ticket `run` refuses before reading any state."""
    upcoming = f"{NOTHING}{why}"
    return {
        "ticket": ticket_id, "next": upcoming, "state": None, "status": None, "attempt": None,
        "retryCount": None, "maxRetries": None, "skip": refuses(upcoming), "escalatedRoles": [],
        "lastFailure": None, "workspace": None,
    }  # fmt: skip


def ticket_status(
    root: Path, settings: LoadedSettings, ticket_id: str, store: TicketStore | None = None
) -> dict[str, Any]:
    """`store`: the ticket's store if the caller has it open (its journal is read once)."""
    from tf_fsm.core.escalation import retries_left
    from tf_fsm.core.resume import live_phase
    from tf_fsm.storage.store import open_store
    from tf_fsm.views.workspace_status import workspace_of

    store = store or open_store(root, settings, ticket_id)
    state = store.load_retry_state()
    cur = state.current if state else None
    escalated = cur.escalation.escalated_roles() if cur and cur.escalation else []
    failure = (
        next(
            (
                a.reason
                for a in reversed(state.attempts)
                if a.status in ("blocked", "error") and a.reason
            ),
            None,
        )
        if state
        else None
    )
    if cur is not None and cur.status == "closed":
        failure = None
    events = readable_journal(store)
    spend = cost_summary(events, state, settings)
    phase = live_phase(cur.attemptNumber, cur.status, cur.phase, events) if cur else None
    upcoming = next_step(store, state, settings, root, events)
    return {
        "ticket": ticket_id,
        "next": upcoming,
        "state": lifecycle_state(cur, phase, events),
        "status": state.status if state else None,
        "phase": phase,
        "attempt": cur.attemptNumber if cur else None,
        "trigger": cur.trigger if cur else None,
        "retryCount": state.retryCount if state else 0,
        "maxRetries": settings.max_retries,
        "retriesLeft": retries_left(state, settings),
        "skip": refuses(upcoming),
        "escalatedRoles": escalated,
        "tier": (cur.tier if cur else None),
        "lastFailure": failure,
        "failureSignature": cur.failureSignature if cur else None,
        #: the short-circuit's decision after the last attempt, when it repeated the one before
        "sameFailure": (
            {**cur.sameFailure, "attempt": cur.attemptNumber} if cur and cur.sameFailure else None
        ),
        "stopReason": state.stopReason if state else None,
        **spend,
        "workspace": workspace_of(events, cur.attemptNumber if cur else None),
    }


#: the state words of a ticket whose workspace `tf-fsm workspaces prune` takes unnamed: no
#: attempt will run on it any more (besides a ticket with no state or no ticket file)
DONE_WITH = ("closed", "exhausted")


def state_words(row: dict[str, Any]) -> str:
    """A status row's state as one phrase: `in_progress at implement`, `blocked` (retries
    left), `exhausted` (blocked, and no attempt may run: retries spent, the budget spent or
    the same failure repeated), `error (merge_conflict)`, `merging`, `awaiting_merge`,
    `closed`, or `no ticket state` for a ticket never run."""
    from tf_fsm.core.machine import BLOCKED, ERROR, phase_of

    state = row["state"]
    if row.get("status") is None:
        return "no ticket state"
    if phase_of(state) is not None:
        return f"in_progress at {phase_of(state)}"
    if state == ERROR and row.get("failureClass"):
        return f"error ({row['failureClass']})"
    return "exhausted" if state == BLOCKED and row["skip"] else str(state)


def lifecycle_state(cur: Attempt | None, phase: str | None, events: Sequence[Event]) -> str:
    """The lifecycle state the ticket's current attempt stands in (derived, never stored):
    `merging` while its merge is under way (or was, when the run was killed in it),
    `awaiting_merge` when it passed and its merge waits for `tf-fsm merge`."""
    from tf_fsm.core.machine import AWAITING_MERGE, MERGING, state_of_attempt
    from tf_fsm.core.resume import merge_held
    from tf_fsm.engine.accounting import merge_under_way

    state = state_of_attempt(cur.status if cur else None, phase)
    if cur is None or cur.status != "in_progress":
        return state
    if merge_held(events, cur.attemptNumber):
        return AWAITING_MERGE
    return MERGING if merge_under_way(events, cur.attemptNumber) else state


def cost_summary(
    events: list[Event], state: RetryState | None, settings: LoadedSettings
) -> dict[str, Any]:
    """Usage and cost summed over the ticket's invocations since the last --retry-reset (the
    journal has every invocation, restarts and failed ones too), the budget, and the class of
    the last failure (`budget` when the budget refused the last run)."""
    from tf_fsm.core import journal as ev
    from tf_fsm.engine.accounting import since_reset, ticket_usage

    usage = ticket_usage(events)
    cur = state.current if state else None
    failure_class = (
        next(
            (
                a.failureClass or ("quality" if a.status == "blocked" else None)
                for a in reversed(state.attempts)
                if a.status in ("blocked", "error")
            ),
            None,
        )
        if state
        else None
    )
    recent = since_reset(events)
    last_end = max(
        (i for i, e in enumerate(recent) if isinstance(e, ev.AttemptStarted | ev.AttemptFinished)),
        default=-1,
    )
    if any(isinstance(e, ev.BudgetExhausted) for e in recent[last_end + 1 :]):
        failure_class = "budget"
    if cur is not None and cur.status == "closed":
        failure_class = None
    budget = settings.workflow.escalation.maxCostUsd
    spent = usage.cost_usd if usage else 0.0
    return {
        "failureClass": failure_class,
        "usage": usage.to_json() if usage else None,
        "costUsd": round(spent, 6) if usage else None,
        "maxCostUsd": budget,
        "budgetLeftUsd": None if budget is None else round(max(0.0, budget - spent), 6),
    }


def readable_journal(store: TicketStore) -> list[Event]:
    """The ticket's journal, or nothing when a line of it cannot be trusted: what reads it
    for a report goes on, and `run` names the bad line (with its remedy) when it starts."""
    from tf_fsm.errors import CorruptStateError

    try:
        return store.read_events().events
    except CorruptStateError:
        return []


def next_step(
    store: TicketStore,
    state: RetryState | None,
    settings: LoadedSettings,
    root: Path | None = None,
    events: Sequence[Event] | None = None,
) -> str:
    """What `tf-fsm run` would do next, and why, in one line (read-only; the decision is
    tf_fsm.core.next_step's). `root`: the project, whose tk file tells a closed ticket from one
    whose close the tk file missed or a person reopened (without it: closed). `events`: the
    journal as status read it (a bad line left out) for the budget and the trigger; a resume
    point is read as `run` reads it."""
    from tf_fsm.core.next_step import Facts
    from tf_fsm.core.next_step import next_step as decide
    from tf_fsm.core.resume import gate_decided
    from tf_fsm.engine.accounting import unpriced_refusal

    def journal() -> Sequence[Event]:
        if state is not None and state.has_open_attempt:
            return store.read_events().events  # as `run` reads it: a bad line is an error
        return events if events is not None else readable_journal(store)

    facts = Facts(
        store.ticket_id, state, settings, tk_file=lambda: _tk_file(root, store.ticket_id),
        journal=journal, look=store.seen, gate_decided=lambda: gate_decided(store),
        budget_refusal=lambda: unpriced_refusal(settings, state, journal),
    )  # fmt: skip
    step = decide(facts)
    if step.refused:
        return f"{NOTHING}{step.reason}"
    if step.action == "resume" and step.resume is not None:
        return f"resume attempt {step.attempt} at {step.resume.where}: {step.resume.reason}"
    if step.action in ("close_tk", "remove_workspace"):
        return step.reason
    return f"attempt {step.attempt} ({_trigger_words(step.trigger, state, settings)})"


def _trigger_words(trigger: str | None, state: RetryState | None, settings: LoadedSettings) -> str:
    """A new attempt's trigger: a retry's as `run` and as the backlog loop record it, and the
    tier the same-failure short-circuit skipped to."""
    from tf_fsm.core.escalation import next_tier

    cur = state.current if state else None
    if state is None or cur is None or trigger == "initial":
        return str(trigger)
    info = cur.sameFailure or {}
    skipped = (
        f", tier {next_tier(state, settings)}: skip-tier after attempts "
        f"{info.get('previousAttempt')} and {cur.attemptNumber} failed the same way"
        if info.get("action") == "skip-tier"
        else ""
    )
    if trigger == "manual_retry":  # `run`'s; the loop's workers record their own
        trigger = "manual_retry; ralph_retry from the backlog loop"
    return f"{trigger}{skipped}"


def _tk_file(root: Path | None, ticket_id: str) -> TkFile:
    """The tk file as `run` reads it; one that cannot be read (or no project given) counts as
    closed: there is no tk file to repair or reopen."""
    from tf_fsm.errors import TicketError
    from tf_fsm.tk.tickets import Ticket, read

    if root is not None:
        try:
            return read(root, ticket_id)
        except TicketError:
            pass
    return Ticket(ticket_id, Path(), {"status": "closed"})


def gate_report(root: Path, settings: LoadedSettings, ticket_id: str) -> dict[str, Any]:
    from tf_fsm.core.verdict import evaluate
    from tf_fsm.storage.store import open_store

    store = open_store(root, settings, ticket_id)
    verdict = evaluate(
        settings.workflow.failOn,
        close_summary=store.read_artifact("close-summary.md"),
        post_fix_verification=store.read_artifact("post-fix-verification.md"),
        review=store.read_artifact("review.md"),
        gate_enabled=settings.workflow.enableQualityGate,
        outdated=outdated_reports(store),
    )
    return {
        "ticket": ticket_id,
        "blocked": verdict.blocked,
        "status": verdict.status,
        "source": verdict.source,
        "counts": verdict.counts,
        "failOn": list(verdict.fail_on),
        "reason": verdict.reason,
        "notes": list(verdict.notes),
    }


#: the reports the gate reads, in the order of the phases that write them
GATE_REPORTS = ("review.md", "post-fix-verification.md", "close-summary.md")


def outdated_reports(store: TicketStore) -> dict[str, str]:
    """The reports older than the report of an earlier phase (name -> that report): an
    earlier attempt's, as a resume judges artifacts (tf_fsm.core.resume), not this attempt's
    decision. Each phase rewrites its report after the phases before it rewrote theirs."""
    mtimes: dict[str, int] = {}
    for name in GATE_REPORTS:
        try:
            mtimes[name] = store.artifact_path(name).stat().st_mtime_ns
        except FileNotFoundError:
            continue
    out: dict[str, str] = {}
    for i, name in enumerate(GATE_REPORTS):
        if name not in mtimes:
            continue
        newer = [e for e in GATE_REPORTS[:i] if mtimes.get(e, -1) > mtimes[name]]
        if newer:
            out[name] = newer[-1]
    return out
