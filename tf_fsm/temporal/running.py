"""What the activities do on the worker's host besides the data plane: a `tf-fsm` command run
as a child process with heartbeats (the running phase in their details), the phase the run
worked on, and the clone's base branch brought to the remote's."""

from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from temporalio import activity
from temporalio.exceptions import ApplicationError

from tf_fsm.core.journal import PhaseStarted
from tf_fsm.core.journal_codec import JournalLineError, decode_line
from tf_fsm.engine.api import Outcome
from tf_fsm.errors import EXIT_BAD_INPUT, WorkspaceError
from tf_fsm.loop.work import WorkDocumentError, read_report
from tf_fsm.process.door import run_process, tail
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.protocol import Store
from tf_fsm.storage.redact import Redactor
from tf_fsm.temporal.fence import REMOTE
from tf_fsm.temporal.workflow import NOT_RETRYABLE
from tf_fsm.workspace import worktree
from tf_fsm.workspace.git import Git
from tf_fsm.workspace.model import MERGED_TIP_TRAILER, Workspace
from tf_fsm.workspace.tk_files import set_aside_tk_changes

#: heartbeats per heartbeat timeout: one lost or late heartbeat is not taken for a death
BEATS_PER_TIMEOUT = 3
#: how soon a cancelled run is ended, at most, once the worker hears of it
WAKE_SECONDS = 0.25


def refusal(message: str) -> ApplicationError:
    """An activity error that Temporal does not retry (another host would fail alike),
    redacted: the history is read on every host."""
    redact = Redactor.from_environ(os.environ)
    return ApplicationError(redact(message), type=NOT_RETRYABLE, non_retryable=True)


def retryable(message: str) -> ApplicationError:
    """An activity error that Temporal retries (a crash, a lock held, a remote that moved),
    redacted."""
    return ApplicationError(Redactor.from_environ(os.environ)(message))


@contextlib.contextmanager
def heartbeating(details: Callable[[], str]) -> Iterator[None]:
    """Heartbeat from a thread of its own while the block runs (the block waits on a child
    process that may print nothing for minutes), with `details()` of the moment. The SDK's
    heartbeat for a threaded activity is thread-safe; the thread gets the activity's
    context, which lives in a contextvar."""
    timeout = activity.info().heartbeat_timeout
    if timeout is None:
        yield
        return
    interval = timeout.total_seconds() / BEATS_PER_TIMEOUT
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(interval):
            activity.heartbeat(details())

    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(beat,), name="tf-fsm heartbeat")
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def run_child(
    root: Path, args: list[str], ticket: str, host: str, store: Store
) -> tuple[Outcome, int | None]:
    """`python -m tf_fsm <args>` in the clone at `root`, heartbeating with the phase it runs;
    its work report and exit code. A run that printed no report is retried (a crash, a lock
    held elsewhere), but for exit 2 (bad input); its stderr is redacted before it goes into
    the history."""
    argv = [sys.executable, "-m", "tf_fsm", *args, "--root", str(root)]

    def details() -> str:
        phase = running_phase(store)
        return f"{ticket}: {phase or 'running'} on {host}"

    activity.heartbeat(f"{ticket}: starting on {host}")
    with heartbeating(details):
        # woken every WAKE_SECONDS: a cancellation (an exception the SDK raises in this
        # thread) ends the run's process group even while the run prints nothing
        done = run_process(argv, cwd=root, keep=64 * 1024, wake=WAKE_SECONDS)
    try:
        outcome = read_report(done.stdout)
    except WorkDocumentError as exc:
        raise refusal(str(exc)) from None
    if outcome is None:  # it never got to report: its exit code and stderr say why
        said = tail(done.stderr, redact=Redactor.from_environ(os.environ))
        said = f"{ticket}: `tf-fsm {args[0]}` exited {done.exit_code}: {said}"
        if done.exit_code == EXIT_BAD_INPUT:
            raise refusal(said)
        raise retryable(said)
    return outcome, done.exit_code


def running_phase(store: Store) -> str | None:
    """The phase the run works on now, from the journal's end."""
    attempts = (store.peek_retry_state() or {}).get("attempts")
    last = attempts[-1] if isinstance(attempts, list) and attempts else None
    attempt = last.get("attemptNumber") if isinstance(last, dict) else None
    return store.running_phase(attempt) if isinstance(attempt, int) else None


def phase_of(lines: list[str]) -> str | None:
    """The last phase started among journal `lines` (None: no phase ran)."""
    for number, line in enumerate(reversed(lines), 1):
        try:
            event = decode_line(line.encode("utf-8"), number)
        except JournalLineError:
            continue
        if isinstance(event, PhaseStarted):
            return event.phase
    return None


def base_branch_of(root: Path, settings: LoadedSettings, ticket: str) -> str | None:
    """The base branch of the ticket's workspace, None when it has none."""
    found = worktree.find(root, settings, ticket)
    return found.base_branch if found is not None else None


#: where a worker keeps its root's tk edits before its base moves (refs/tf/<id>/<name>)
TICKETS_AT_ROOT = "tickets-at-root"


def bring_base(git: Git, base: str, ticket: str) -> str | None:
    """Bring this clone's `base` to the remote's (fast-forward only) and return its sha
    (None: the remote has no such branch). Merges of tf-fsm's own the remote never took (a
    try whose push was refused) are set aside under `refs/tf/<ticket>/refused-merge`, and
    the base goes back to the remote's. WorkspaceError when the clone's base has commits of
    its own, naming them: the merge would publish them too."""
    ref = f"refs/heads/{base}"
    git.run("fetch", "--quiet", REMOTE, f"+{ref}:refs/remotes/{REMOTE}/{base}")
    remote = git.rev(f"refs/remotes/{REMOTE}/{base}")
    local = git.rev(ref)
    if remote is None or local == remote:
        return remote
    if local is not None and not git.is_ancestor(local, remote):
        if not _only_refused_merges(git, remote, local):
            own = git.out("log", "--format=%h %s", f"{remote}..{local}")
            raise WorkspaceError(
                f"this clone's {base} has commits the remote's lacks, which a merge would "
                f"publish: {'; '.join(own.splitlines())}. Push or drop them first"
            )
        git.run("update-ref", f"refs/tf/{ticket}/refused-merge-{local[:12]}", local)
    if git.head_branch() == base:
        # tk's files at a worker's root hold only its own runs' status edits (the state of
        # record is the remote's base, where merges close tickets): kept under a ref, then
        # put back as the base has them, so that the base can move
        at_root = Workspace(ticket, git.cwd, git.cwd, f"tf/{ticket}", base)
        set_aside_tk_changes(at_root, TICKETS_AT_ROOT)
        git.run("reset", "--quiet", "--keep", remote)
    else:
        git.run("update-ref", ref, remote, local or "")
    return remote


def _only_refused_merges(git: Git, remote: str, local: str) -> bool:
    """Are the base's own commits (first parents) all merges tf-fsm made (its trailer)?"""
    trailers = git.out(
        "log",
        "--first-parent",
        f"--format=%(trailers:key={MERGED_TIP_TRAILER},valueonly)%x00",
        f"{remote}..{local}",
    )
    return all(t.strip() for t in trailers.split("\0")[:-1])
