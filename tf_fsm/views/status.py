"""Read-only views of tickets for `tf-fsm status` and `tf-fsm gate`. Nothing here writes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tf_fsm.settings.load import LoadedSettings

# Everything else is imported where it is used: `tf-fsm status` on a project where no ticket
# has run needs only the settings, and the journal/state models, the store (the lock, the
# redaction regex) and the detection regexes cost more start-up than the whole command may
# take (benchmarks/bench_startup.py).
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from tf_fsm.core.journal import Event
    from tf_fsm.core.next_step import TkFile
    from tf_fsm.core.state import RetryState
    from tf_fsm.core.ticket import TicketView
    from tf_fsm.storage.protocol import Store
    from tf_fsm.tk.backlog import TkRecord


#: how `next` starts when `run` would refuse the ticket (and the loop skips it): wording
#: only, `skip` is the decision's own answer (TicketView.skip)
NOTHING = "nothing: "
#: the status column of `retryCount` out of `maxRetries`: blocked attempts since the last close
BLOCKED_ATTEMPTS = "blocked attempts"


def blocked_attempts(count: int, cap: int, closed: bool) -> str:
    """`retryCount` out of `maxRetries` in words that cannot read as a contradiction of the
    attempt number: a close resets the count, so after one it says so instead of `0/3`."""
    return "reset on close" if closed else f"{count}/{cap}"


def tracked_tickets(root: Path, settings: LoadedSettings) -> list[str]:
    """Tickets with records in the project's store, sorted by id."""
    from tf_fsm.storage.backends import ticket_stores

    return ticket_stores(root, settings).ticket_ids()


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
    from tf_fsm.tk.backlog import misfiled

    if isinstance(ticket, str):
        return ticket_status(root, settings, ticket)
    record = ticket
    try:
        row = ticket_status(root, settings, record.id)
    except InvalidTicketIdError as exc:
        return _unrunnable_row(record.id, str(exc))
    if (why := misfiled(record)) is not None:
        row["next"], row["skip"] = f"{NOTHING}{why}", True
    return row


def _unrunnable_row(ticket_id: str, why: str) -> dict[str, Any]:
    """The row of a backlog ticket `run` refuses before reading any state."""
    return {
        "ticket": ticket_id,
        "next": f"{NOTHING}{why}",
        "state": None,
        "status": None,
        "attempt": None,
        "retryCount": None,
        "maxRetries": None,
        "skip": True,
        "escalatedRoles": [],
        "lastFailure": None,
        "workspace": None,
    }


def ticket_view(
    root: Path,
    settings: LoadedSettings,
    ticket_id: str,
    store: Store | None = None,
    *,
    tk_file: Callable[[], TkFile] | None = None,
    retry_trigger: str = "manual_retry",
) -> TicketView:
    """The ticket's read model (tf_fsm.core.ticket), with this project's reads: the tk file
    as `run` reads it (or `tk_file`, already read), the budget as `run` decides it with an
    agent CLI (no prices), the usage the journal's invocations reported. `store`: the
    ticket's store if the caller has it open (its journal is read once); `retry_trigger`: how
    the caller's retry is recorded (the loop's workers: `ralph_retry`)."""
    from tf_fsm.core.ticket import Reads, read_ticket
    from tf_fsm.engine.accounting import ticket_usage, unpriced_refusal
    from tf_fsm.storage.backends import open_store

    store = store or open_store(root, settings, ticket_id)
    reads = Reads(
        tk_file=tk_file or (lambda: _tk_file(root, ticket_id)),
        budget_refusal=lambda state, journal: unpriced_refusal(settings, state, journal),
        usage=ticket_usage,
        exists=lambda path: Path(path).is_dir(),
        retry_trigger=retry_trigger,
    )
    return read_ticket(store, settings, reads)


def ticket_status(
    root: Path, settings: LoadedSettings, ticket_id: str, store: Store | None = None
) -> dict[str, Any]:
    """`status --json`'s row of a ticket: `row` of its read model."""
    return row(ticket_view(root, settings, ticket_id, store), settings)


def row(view: TicketView, settings: LoadedSettings) -> dict[str, Any]:
    """The read model as `status --json` has always printed it (its keys are kept: tests and
    users read them)."""
    budget = view.budget
    return {
        "ticket": view.ticket_id,
        "next": next_words(view, settings),
        "state": view.state,
        "status": view.status,
        "phase": view.phase,
        "attempt": view.attempt,
        "trigger": view.trigger,
        "retryCount": view.retry_count,
        "maxRetries": view.max_retries,
        "retriesLeft": view.retries_left,
        "skip": view.skip,
        "escalatedRoles": list(view.escalated_roles),
        "tier": view.tier,
        "lastFailure": view.last_failure,
        "failureSignature": view.failure_signature,
        #: the short-circuit's decision after the last attempt, when it repeated the one before
        "sameFailure": view.same_failure,
        "stopReason": view.stop_reason,
        "failureClass": view.failure_class,
        "usage": budget.usage,
        "costUsd": budget.spent,
        "maxCostUsd": budget.limit,
        "budgetLeftUsd": budget.left,
        "workspace": view.workspace,
    }


#: the state words of a ticket whose workspace `tf-fsm workspaces prune` takes unnamed: no
#: attempt will run on it any more (besides a ticket with no state or no ticket file)
DONE_WITH = ("closed", "exhausted")


def state_words(state: str, status: str | None, failure_class: str | None, skip: bool) -> str:
    """A ticket's state as one phrase (from its read model): `in_progress at implement`,
    `blocked` (retries left), `exhausted` (blocked, and no attempt may run: retries spent, the
    budget spent or the same failure repeated), `error (merge_conflict)`, `merging`,
    `awaiting_merge`, `closed`, or `no ticket state` for a ticket never run."""
    from tf_fsm.core.machine import BLOCKED, ERROR, phase_of

    if status is None:
        return "no ticket state"
    if phase_of(state) is not None:
        return f"in_progress at {phase_of(state)}"
    if state == ERROR and failure_class:
        return f"error ({failure_class})"
    return "exhausted" if state == BLOCKED and skip else state


def readable_journal(store: Store) -> list[Event]:
    """The ticket's journal, or nothing when a line of it cannot be trusted: what reads it
    for a report goes on, and `run` names the bad line (with its remedy) when it starts."""
    from tf_fsm.errors import CorruptStateError

    try:
        return store.read_events().events
    except CorruptStateError:
        return []


def next_words(view: TicketView, settings: LoadedSettings) -> str:
    """What `tf-fsm run` would do next, and why, in one line: the read model's step
    (tf_fsm.core.next_step decides it) in words."""
    step, state = view.step, view.retry_state
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
    from tf_fsm.storage.backends import open_store

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


def outdated_reports(store: Store) -> dict[str, str]:
    """The reports older than the report of an earlier phase (name -> that report): an
    earlier attempt's, as a resume judges artifacts (tf_fsm.core.resume), not this attempt's
    decision. Each phase rewrites its report after the phases before it rewrote theirs."""
    mtimes: dict[str, int] = {}
    for name in GATE_REPORTS:
        seen = store.seen(name)
        if seen is not None:
            mtimes[name] = seen.mtime_ns
    out: dict[str, str] = {}
    for i, name in enumerate(GATE_REPORTS):
        if name not in mtimes:
            continue
        newer = [e for e in GATE_REPORTS[:i] if mtimes.get(e, -1) > mtimes[name]]
        if newer:
            out[name] = newer[-1]
    return out
