"""What the workflows are given and what their activities answer: plain dataclasses, the
payloads Temporal's history holds (its default converter writes them as JSON). Workflow code
imports this module, so it imports nothing that touches a file, a clock or the network.

The history is the commit point across hosts. What it holds of a ticket is `TicketFiles`:
the journal's lines (small, redacted on the host that wrote them), and two shas in the shared
remote: the ticket branch as the history accepted it, and the commit holding the ticket's
artifacts (`refs/tf/<id>/knowledge`). Every host that runs a phase first rewrites the ticket's
files from it, so a try whose result the history refused leaves nothing behind."""

from __future__ import annotations

from dataclasses import dataclass, field

#: how long one phase may run before Temporal takes it away from its worker
PHASE_TIMEOUT_SECONDS = 6 * 3600.0
#: a worker that has not heartbeaten for this long is taken for dead; the phase is retried
#: elsewhere, where the engine resumes the attempt at its last checkpoint
HEARTBEAT_TIMEOUT_SECONDS = 60.0
#: the queue the workers of a repository poll when none is named
TASK_QUEUE = "tf-fsm"


@dataclass(frozen=True)
class TicketFiles:
    """The ticket's files as the history knows them. `journal`: events.jsonl's lines, oldest
    first; `branch`: the ticket branch's sha on the remote (None: not pushed yet);
    `knowledge`: the sha of the commit holding its artifacts (None: none yet)."""

    journal: list[str] = field(default_factory=list)
    branch: str | None = None
    knowledge: str | None = None


@dataclass(frozen=True)
class TicketOrder:
    """Run this ticket of this repository until nothing is left to run. `repository` is the
    repository's identity (tf_fsm.temporal.identity): a worker refuses an order for another
    repository than the clone it runs in. `files`: where the ticket's history begins (the
    end of its workflow's previous run; empty for its first)."""

    repository: str
    ticket: str
    task_queue: str = TASK_QUEUE
    phase_timeout_seconds: float = PHASE_TIMEOUT_SECONDS
    heartbeat_timeout_seconds: float = HEARTBEAT_TIMEOUT_SECONDS
    files: TicketFiles = field(default_factory=TicketFiles)
    #: merges done by one merge-queue run before it continues as new (a bounded history)
    merges_per_run: int = 50
    #: phases run by one run of the ticket's workflow before it continues as new (each order
    #: carries the whole journal: a bounded history), and those the runs before it ran
    phases_per_run: int = 25
    phases_before: int = 0
    #: the host whose phase paused the attempt the run before this one ended in
    paused_on: str | None = None


@dataclass(frozen=True)
class StepView:
    """The decision of what runs next (tf_fsm.core.next_step.Step), as the core made it on
    the worker from the files rewritten from the history: its action, reason and refusal."""

    action: str
    reason: str
    refusal: str | None = None


@dataclass(frozen=True)
class PhaseOrder:
    """Run the ticket's next phase (one phase of its attempt, or the ending of an attempt
    whose phases are all done), on the files the history holds."""

    repository: str
    ticket: str
    files: TicketFiles


@dataclass(frozen=True)
class PhaseReport:
    """One phase run by a worker. `status`: the work report's (tf_fsm.loop.work), `paused`
    when a phase completed and the attempt goes on; `journal`: the lines the run added;
    `files`: the ticket's files after it (the history's new `TicketFiles`); `step`: what runs
    next; `host`: the worker's host."""

    ticket: str
    status: str
    attempt: int
    phase: str | None
    reason: str
    journal: list[str]
    files: TicketFiles
    step: StepView
    host: str
    base: str | None = None  # the base branch of the ticket's workspace, once it has one


@dataclass(frozen=True)
class MergeOrder:
    """Merge a passed ticket's branch into `base` on the shared remote (the merge queue's
    one activity), on the files the history holds."""

    repository: str
    ticket: str
    base: str
    files: TicketFiles


@dataclass(frozen=True)
class MergeReport:
    """The merge: `status` is `merged` (pushed to the remote's base as `base_sha`), `refused`
    (the gates on the rebased branch, or a conflict left to a person) or `error`."""

    ticket: str
    status: str
    reason: str
    journal: list[str]
    files: TicketFiles
    step: StepView
    host: str
    base_sha: str | None = None


@dataclass(frozen=True)
class MergeRequest:
    """A ticket workflow's request to the merge queue of `repository` and `base`: merge the
    ticket whose files are `files`, and signal the outcome (`merged`) to `workflow_id`."""

    repository: str
    ticket: str
    base: str
    workflow_id: str
    files: TicketFiles
    task_queue: str = TASK_QUEUE
    phase_timeout_seconds: float = PHASE_TIMEOUT_SECONDS
    heartbeat_timeout_seconds: float = HEARTBEAT_TIMEOUT_SECONDS
    merges_per_run: int = 50


@dataclass(frozen=True)
class MergeQueueStart:
    """A merge queue's run: its repository and base, and what a previous run left waiting
    (continue-as-new carries it over)."""

    repository: str
    base: str
    pending: list[MergeRequest] = field(default_factory=list)
    merged: int = 0  # merges done by the runs before this one


@dataclass(frozen=True)
class Progress:
    """What a ticket's workflow has done so far (its `progress` query): the last phase's
    report (None before the first), how many phases ran, and whether it waits for its merge."""

    ticket: str
    phases: int
    last: PhaseReport | None
    merging: bool
    files: TicketFiles


@dataclass(frozen=True)
class TicketEnd:
    """How a ticket's workflow ended: the last status (`closed`, `blocked`, `exhausted`,
    `error`, `waiting`, ...), its reason, the attempt, the files (where the next run of the
    workflow begins) and how many phases this run ran."""

    ticket: str
    status: str
    reason: str
    attempt: int | None
    files: TicketFiles
    phases: int
