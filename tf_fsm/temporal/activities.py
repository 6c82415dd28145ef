"""The activities a worker runs, in its clone of the repository (`root`): one attempt of a
ticket, as `tf-fsm run ID --once --json` in a child process, and the decision of what runs
next, as the backlog loop reads it.

The attempt runs in a child process (through tf_fsm.process, the one door): the ticket's lock
is per process, the child dies with the worker (parent-death signal) and its agents with it,
and whatever an agent leaves running is ended with that child, never another ticket's."""

from __future__ import annotations

import contextlib
import contextvars
import os
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from tf_fsm.errors import EXIT_BAD_INPUT, TfFsmError
from tf_fsm.loop.unfinished import loop_view
from tf_fsm.loop.work import WorkDocumentError, read_report
from tf_fsm.process.door import run_process, tail
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.storage.redact import Redactor
from tf_fsm.temporal.identity import repository_identity
from tf_fsm.temporal.orders import AttemptReport, StepView, TicketOrder
from tf_fsm.temporal.workflow import NEXT_STEP, NOT_RETRYABLE, RUN_ATTEMPT
from tf_fsm.tk import tickets

#: heartbeats per heartbeat timeout: one lost or late heartbeat is not taken for a death
BEATS_PER_TIMEOUT = 3
#: how soon a cancelled attempt's run is ended, at most, once the worker hears of it
WAKE_SECONDS = 0.25


def refusal(message: str) -> ApplicationError:
    """An activity error that Temporal does not retry (another host would fail alike)."""
    return ApplicationError(message, type=NOT_RETRYABLE, non_retryable=True)


@contextlib.contextmanager
def heartbeating(details: str) -> Iterator[None]:
    """Heartbeat from a thread of its own while the block runs (the block waits on a child
    process that may print nothing for minutes). The SDK's heartbeat for a threaded activity
    is thread-safe; the thread gets the activity's context, which lives in a contextvar."""
    timeout = activity.info().heartbeat_timeout
    if timeout is None:
        yield
        return
    interval = timeout.total_seconds() / BEATS_PER_TIMEOUT
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(interval):
            activity.heartbeat(details)

    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(beat,), name="tf-fsm heartbeat")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class TicketActivities:
    """The activities of a worker whose clone of the repository is `root`."""

    def __init__(self, root: Path, host: str | None = None) -> None:
        self.root = root.resolve()
        self.repository = repository_identity(self.root)
        self.host = host or socket.gethostname()

    def _check(self, order: TicketOrder) -> None:
        if order.repository != self.repository:
            raise refusal(
                f"{order.ticket}: the order is for repository {order.repository}, "
                f"this worker runs in a clone of {self.repository} ({self.root})"
            )

    @activity.defn(name=RUN_ATTEMPT)
    def run_attempt(self, order: TicketOrder) -> AttemptReport:
        """One attempt of the ticket (or the end of an interrupted one): its work report."""
        self._check(order)
        argv = [sys.executable, "-m", "tf_fsm", "run", order.ticket, "--once", "--json"]
        argv += ["--root", str(self.root)]  # this clone, whatever $TF_FSM_ROOT says
        activity.heartbeat(f"{order.ticket}: starting on {self.host}")
        with heartbeating(f"{order.ticket}: running on {self.host}"):
            # woken every WAKE_SECONDS: a cancellation (an exception the SDK raises in this
            # thread) ends the run's process group even while the run prints nothing
            done = run_process(argv, cwd=self.root, keep=64 * 1024, wake=WAKE_SECONDS)
        try:
            outcome = read_report(done.stdout)
        except WorkDocumentError as exc:
            raise refusal(str(exc)) from None
        if outcome is None:  # it never got to report: its exit code and stderr say why
            # redacted before it leaves the host: the history is read on every host
            said = tail(done.stderr, redact=Redactor.from_environ(os.environ))
            said = f"{order.ticket}: `tf-fsm run` exited {done.exit_code}: {said}"
            if done.exit_code == EXIT_BAD_INPUT:
                raise refusal(said)
            raise ApplicationError(said)  # retried: a crash, a lock held elsewhere
        return AttemptReport(
            ticket=outcome.ticket_id,
            status=outcome.status,
            attempt=outcome.attempt,
            attempts_run=outcome.attempts_run,
            retry_count=outcome.retry_count,
            max_retries=outcome.max_retries,
            reason=outcome.reason,
            host=self.host,
        )

    @activity.defn(name=NEXT_STEP)
    def next_step(self, order: TicketOrder) -> StepView:
        """What runs next for the ticket, as the backlog loop's worker reads it."""
        self._check(order)
        try:
            settings = load_settings(self.root)
            store = open_store(self.root, settings, order.ticket)
            ticket = tickets.read(self.root, order.ticket)
            step = loop_view(self.root, settings, store, ticket).step
        except TfFsmError as exc:
            raise refusal(f"{order.ticket}: {exc}") from None
        return StepView(step.action, step.reason, step.refusal)
