"""Dispatching tickets as workflows and following them: `tf-fsm ralph --temporal` (the ready
backlog, again as tickets close) and `tf-fsm run ID --temporal` (one ticket).

A dispatcher holds nothing the cluster needs: killing it stops nothing, and running it again
attaches to the workflows that run (the start's "use existing" policy) and starts no second
one. A ticket whose workflow ended before is continued from that run's end (its files are
where the new run's history begins); one whose workflow closed it is not started again."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError, RPCStatusCode

from tf_fsm.temporal.identity import workflow_id
from tf_fsm.temporal.orders import PhaseReport, Progress, TicketEnd, TicketFiles, TicketOrder
from tf_fsm.temporal.workflow import TicketWorkflow
from tf_fsm.tk import tickets
from tf_fsm.tk.selection import ready

#: how often a dispatcher asks its workflows how far they are
POLL_SECONDS = 0.5
#: a server that does not answer: waited for, not an error
UNANSWERED = frozenset({RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED})
#: how a workflow's run may end with the ticket done: no later run is started
DONE = frozenset({"closed", "already_closed"})
#: how a run may end that the backlog loop does not go on with by itself (`--resume-errors`
#: goes on with those in error or waiting for a hand-off; out of retries is for a person)
LEFT = frozenset({"exhausted", "error", "waiting"})
RESUMED_ON_REQUEST = frozenset({"error", "waiting"})

Say = Callable[[str], None]
#: `ralph -a ASSIGNEE -T TAG`: the backlog's selection (None: any)
Selection = tuple["str | None", "str | None"]
Handle = WorkflowHandle[TicketWorkflow, TicketEnd]


@dataclass
class Started:
    """A ticket's workflow as a dispatcher found or started it: `how` is `started`,
    `attached` (it was running) or `done` (a previous run closed the ticket: `end`)."""

    ticket: str
    handle: Handle
    how: str
    end: TicketEnd | None = None
    why: str | None = None  # `refused`: why no workflow was started


#: why a ticket's first workflow must not start (None: it may): a history begins empty
Fresh = Callable[[str], "str | None"]


async def start_ticket(
    client: Client,
    order: TicketOrder,
    fresh: Fresh | None = None,
    left: frozenset[str] = frozenset(),
) -> Started:
    """The ticket's workflow: the running one, or a new run continuing the last one's end,
    unless that end's status is in `left` (how `left`: the backlog loop leaves tickets in
    error unless asked). `fresh` may refuse the first run of a ticket (how `refused`): one
    with a history of its own in the dispatcher's clone, which an empty history would lose."""
    wid = workflow_id(order.repository, order.ticket)
    handle: Handle = client.get_workflow_handle(wid, result_type=TicketEnd)
    status = await _status(handle)
    if status == WorkflowExecutionStatus.RUNNING:
        return Started(order.ticket, handle, "attached")
    if status is None and fresh is not None and (why := fresh(order.ticket)) is not None:
        return Started(order.ticket, handle, "refused", why=why)
    if status is not None:  # a run ended: the next begins where it left the files
        end = await _end_of(handle, status)
        if end.status in DONE:
            return Started(order.ticket, handle, "done", end)
        if end.status in left:
            return Started(order.ticket, handle, "left", end)
        order = dataclasses.replace(order, files=end.files)
    started: Handle = await client.start_workflow(
        TicketWorkflow.run,
        order,
        id=wid,
        task_queue=order.task_queue,
        id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
    )
    return Started(order.ticket, started, "started")


async def _status(handle: Handle) -> WorkflowExecutionStatus | None:
    try:
        return (await handle.describe()).status
    except RPCError as exc:
        if exc.status == RPCStatusCode.NOT_FOUND:
            return None
        raise


@dataclass(frozen=True)
class Known:
    """A ticket's workflow (the latest run of its id) as the server and the workflow tell
    it: `status` (`running`, `completed`, `terminated`, ...; `none`: never started), a
    completed run's result (`end`), any other run's progress (`progress`), or why its
    progress could not be asked (`unanswered`: no worker replayed it yet, the server gone)."""

    status: str
    end: TicketEnd | None = None
    progress: Progress | None = None
    unanswered: RPCError | None = None

    @property
    def running(self) -> bool:
        return self.status == "running"

    @property
    def files(self) -> TicketFiles | None:
        """The files its history holds, when it told them."""
        if self.end is not None:
            return self.end.files
        return self.progress.files if self.progress is not None else None


async def look(handle: Handle) -> Known:
    """What the ticket's workflow tells of itself: `dispatch`, `status --temporal` and the
    board's mirror all ask here."""
    status = await _status(handle)
    return Known("none") if status is None else await _known(handle, status)


async def _known(handle: Handle, status: WorkflowExecutionStatus) -> Known:
    name = status.name.lower()
    if status == WorkflowExecutionStatus.COMPLETED:
        return Known(name, end=await handle.result())
    try:
        return Known(name, progress=await handle.query(TicketWorkflow.progress))
    except RPCError as exc:
        return Known(name, unanswered=exc)


async def _end_of(handle: Handle, status: WorkflowExecutionStatus) -> TicketEnd:
    """How the last run ended: its result, or for a run ended from outside (terminated,
    cancelled, timed out) what its progress query says it had reached."""
    known = await _known(handle, status)
    if known.end is not None:
        return known.end
    if known.progress is None:
        raise known.unanswered or RuntimeError(f"{handle.id}: no progress")
    progress, last = known.progress, known.progress.last
    return TicketEnd(
        progress.ticket,
        known.status,
        f"its last workflow run was {known.status}",
        last.attempt if last else None,
        progress.files,
        progress.phases,
    )


def phase_line(report: PhaseReport) -> str:
    """One progress line per phase, as the backlog loop says its tickets' progress."""
    where = f"attempt {report.attempt} {report.phase or 'ending'} on {report.host}"
    return f"[{report.ticket}] {where}: {report.status} ({report.reason})"


def end_line(end: TicketEnd) -> str:
    return f"[{end.ticket}] {end.status}: {end.reason}"


class Dispatcher:
    """Starts or attaches to tickets' workflows and follows them until each has ended. A
    server that stops answering for a while (restarted) is waited for, said once."""

    def __init__(
        self,
        client: Client,
        order: Callable[[str], TicketOrder],
        say: Say,
        fresh: Fresh | None = None,
        left: frozenset[str] = frozenset(),
    ) -> None:
        self.client, self.order, self.say, self.fresh = client, order, say, fresh
        self.left = left
        self.ends: dict[str, TicketEnd] = {}
        self.refused: dict[str, str] = {}
        self._following: dict[str, Handle] = {}
        self._phases: dict[str, int] = {}
        self._merging: set[str] = set()
        self._unanswered: str | None = None

    async def dispatch(self, ticket: str) -> None:
        found = await start_ticket(self.client, self.order(ticket), self.fresh, self.left)
        if found.why is not None:
            self.say(f"[{ticket}] not started: {found.why}")
            self.refused[ticket] = found.why
            return
        if found.end is not None:
            if found.how == "done":
                self.say(f"[{ticket}] already done by its workflow: {found.end.reason}")
            else:
                self.say(
                    f"[{ticket}] left as its last workflow run ended, {found.end.status}: "
                    f"{found.end.reason} (`ralph --temporal --resume-errors` or `run {ticket} "
                    "--temporal` goes on with it)"
                )
            self.ends[ticket] = found.end
            return
        self.say(f"[{ticket}] {found.how}: workflow {found.handle.id}")
        self._following[ticket] = found.handle

    @property
    def following(self) -> list[str]:
        """The tickets whose workflows it follows."""
        return list(self._following)

    async def step(self) -> list[TicketEnd]:
        """Say what progressed; return the workflows that ended since the last step."""
        await asyncio.sleep(POLL_SECONDS)
        ended: list[TicketEnd] = []
        for ticket, handle in list(self._following.items()):
            try:
                end = await self._look(ticket, handle)
            except RPCError as exc:
                if exc.status not in UNANSWERED:
                    raise
                if self._unanswered is None:
                    self.say(f"the Temporal server does not answer ({exc.message}): waiting")
                self._unanswered = exc.message
                return ended
            self._unanswered = None
            if end is not None:
                del self._following[ticket]
                self.ends[ticket] = end
                self.say(end_line(end))
                ended.append(end)
        return ended

    async def _look(self, ticket: str, handle: Handle) -> TicketEnd | None:
        status = await _status(handle)
        if status is not None and status != WorkflowExecutionStatus.RUNNING:
            return await _end_of(handle, status)
        if status is None:  # not visible yet, just started: next time
            return None
        progress = (known := await _known(handle, status)).progress
        if progress is None:  # no worker has taken its first task yet: next time
            if known.unanswered is not None and known.unanswered.status in UNANSWERED:
                raise known.unanswered
            return None
        if progress.last is not None and progress.phases > self._phases.get(ticket, 0):
            self._phases[ticket] = progress.phases
            self.say(phase_line(progress.last))
        if progress.merging and ticket not in self._merging:
            self._merging.add(ticket)
            self.say(f"[{ticket}] in the merge queue")
        return None


def ready_tickets(
    root: Path, done: Sequence[str], skip: Sequence[str], only: Selection = (None, None)
) -> list[str]:
    """The backlog's ready tickets in tk's order (`tk ready`, with `only`'s assignee and
    tag), counting those the workflows closed as closed: the dispatcher's clone learns of
    their close only when it pulls the base branch."""
    backlog = tickets.scan(tickets.tickets_dir(root))
    lines = ready(backlog, *only, closed_elsewhere=done)
    return [line.record.id for line in lines if line.record.id not in skip]


async def run_backlog(
    dispatcher: Dispatcher,
    root: Path,
    only: Sequence[str] | None,
    selection: Selection = (None, None),
) -> None:
    """Dispatch `only` (those tickets, whatever their deps), or the ready backlog (`tk ready
    -a -T` with `selection`'s assignee and tag) again and again as its tickets close, until
    no workflow runs and nothing more is ready."""
    if only is not None:
        for ticket in only:
            await dispatcher.dispatch(ticket)
    while True:
        if only is None:
            done = [t for t, end in dispatcher.ends.items() if end.status in DONE]
            for ticket in ready_tickets(
                root, done, [*dispatcher.ends, *dispatcher.following, *dispatcher.refused]
            ):
                await dispatcher.dispatch(ticket)
        if not dispatcher.following:
            return
        await dispatcher.step()
