"""The bodies of the commands that run on a cluster: `ralph --temporal`, `run ID --temporal`
and `status --temporal`. The CLI connects (tf_fsm.temporal.connect) and maps what these
return to exit codes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCStatusCode

from tf_fsm.settings.load import LoadedSettings, load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.temporal.dispatcher import (
    LEFT,
    RESUMED_ON_REQUEST,
    Dispatcher,
    Known,
    Selection,
    look,
    run_backlog,
)
from tf_fsm.temporal.identity import repository_identity, workflow_id
from tf_fsm.temporal.orders import TicketEnd, TicketOrder
from tf_fsm.tk import tickets

Say = Callable[[str], None]


#: tf_fsm's own work in a phase (its files, git, the child's start), beside its agents and gates
OWN_SECONDS = 300.0


def phase_limit(settings: LoadedSettings) -> float:
    """The longest a phase may take by the settings (its activity's start-to-close timeout):
    each of its roles' invocations timed out and restarted as often as allowed (a review
    runs every reviewer), the quality gates likewise, and tf_fsm's own work."""
    executor, flow = settings.settings.executor, settings.workflow
    roles = max(1, len(flow.enableReviewers))
    invocation = (executor.timeoutSeconds + executor.restartBackoffSeconds) * (
        1 + executor.maxRestarts
    )
    gates = sum(
        gate.timeoutSeconds
        * (1 + (gate.maxRetries if gate.maxRetries is not None else flow.qualityGateMaxRetries))
        for gate in flow.qualityGates
    )
    return roles * (invocation + executor.waitSeconds) + gates + OWN_SECONDS


@dataclass(frozen=True)
class Cluster:
    """Where the workflows run and how a ticket's order is made: the client, the task queue
    and the timeouts (the `temporal` settings section and the flags)."""

    client: Client
    task_queue: str
    heartbeat_timeout_seconds: float

    def order(self, root: Path) -> Callable[[str], TicketOrder]:
        repository = repository_identity(root)
        limit = phase_limit(load_settings(root))

        def make(ticket: str) -> TicketOrder:
            return TicketOrder(
                repository,
                ticket,
                task_queue=self.task_queue,
                phase_timeout_seconds=limit,
                heartbeat_timeout_seconds=self.heartbeat_timeout_seconds,
            )

        return make


async def dispatch(
    cluster: Cluster,
    root: Path,
    only: Sequence[str] | None,
    say: Say,
    selection: Selection = (None, None),
    resume_errors: bool = False,
) -> Dispatcher:
    """Start (or attach to) the tickets' workflows and follow them until each has ended:
    `only` those tickets (whatever their last run's end), or (None) the ready backlog of
    `selection`, again as tickets close, leaving those whose last run ended out of retries,
    or in error unless `resume_errors`."""
    left = (
        frozenset()
        if only is not None
        else LEFT - (RESUMED_ON_REQUEST if resume_errors else frozenset())
    )
    dispatcher = Dispatcher(cluster.client, cluster.order(root), say, local_history(root), left)
    await run_backlog(dispatcher, root, only, selection)
    if not dispatcher.ends and not dispatcher.refused:
        say("nothing to run: no ticket is ready")
    return dispatcher


def local_history(root: Path) -> Callable[[str], str | None]:
    """Why a ticket may not begin a history on the cluster: this clone holds a journal of it
    (a local run's) that an empty history would leave behind, and the end of the run here
    would replace."""
    settings = load_settings(root)

    def why(ticket: str) -> str | None:
        lines = open_store(root, settings, ticket).journal_lines()
        if not lines:
            return None
        return (
            f"this clone holds its history ({len(lines)} events in its journal) and no "
            f"workflow does: finish it here (`tf-fsm run {ticket}`); the cluster takes "
            "tickets whose history begins there"
        )

    return why


@dataclass(frozen=True)
class Row:
    """A ticket as its workflow knows it (`status --temporal`)."""

    ticket: str
    workflow: str  # running, completed, ... or `none` (never dispatched)
    phases: int
    attempt: int | None
    phase: str | None
    host: str | None
    last: str | None  # the last phase's (or the ended run's) status
    reason: str | None
    merging: bool

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


async def backlog_known(client: Client, root: Path) -> dict[str, Known]:
    """Every ticket of the backlog, as its workflow tells it (asked all at once)."""
    repository = repository_identity(root)
    ids = sorted(tickets.scan(tickets.tickets_dir(root)).records)
    handles = [
        client.get_workflow_handle(workflow_id(repository, t), result_type=TicketEnd) for t in ids
    ]
    return dict(zip(ids, await asyncio.gather(*map(look, handles)), strict=True))


async def rows(client: Client, root: Path) -> list[Row]:
    """Every ticket of the backlog, as its workflow (the latest run of its id) knows it."""
    return [_row(ticket, known) for ticket, known in (await backlog_known(client, root)).items()]


def _row(ticket: str, known: Known) -> Row:
    if known.end is not None:
        end = known.end
        return Row(
            ticket, known.status, end.phases, end.attempt, None, None, end.status, end.reason, False
        )
    if known.progress is None:  # never started, or no worker polls: what the server says
        said = known.unanswered.message if known.unanswered is not None else None
        return Row(ticket, known.status, 0, None, None, None, None, said, False)
    progress, last = known.progress, known.progress.last
    return Row(
        ticket,
        known.status,
        progress.phases,
        last.attempt if last else None,
        last.phase if last else None,
        last.host if last else None,
        last.status if last else None,
        last.reason if last else None,
        progress.merging,
    )


def print_rows(found: Sequence[Row], as_json: bool, say: Say) -> None:
    if as_json:  # one object per ticket per line, as `status --json`
        for row in found:
            say(json.dumps(row.to_json()))
        return
    say(f"{'TICKET':<12} {'WORKFLOW':<11} {'PHASES':>6} {'ATTEMPT':>7}  {'LAST':<24} HOST")
    for row in found:
        last = row.last or ""
        if row.phase and row.workflow == "running":
            last = f"{row.phase} {last}".strip()
        if row.merging:
            last = "in the merge queue"
        attempt = "" if row.attempt is None else str(row.attempt)
        say(
            f"{row.ticket:<12} {row.workflow:<11} {row.phases:>6} {attempt:>7}  "
            f"{last:<24} {row.host or ''}"
        )


async def known_tickets(client: Client, root: Path) -> dict[str, Known]:
    """The tickets of the backlog that have a workflow that told its files (`ui --temporal`)."""
    found: dict[str, Known] = {}
    for ticket, known in (await backlog_known(client, root)).items():
        asked = known.unanswered
        if asked is not None and asked.status != RPCStatusCode.FAILED_PRECONDITION:
            raise asked
        if known.files is not None:
            found[ticket] = known
    return found
