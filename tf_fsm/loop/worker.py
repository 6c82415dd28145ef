"""The worker side of the backlog loop (what it is told and answers: tf_fsm.loop.work), the
workers' outcome files, and what the loop makes of a ticket's lock (its holder, a worker of a
loop that died)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tf_fsm.errors import EXIT_INTERRUPTED, EXIT_LOCKED, InvalidTicketIdError
from tf_fsm.loop.work import WorkDocumentError, WorkOrder, read_report
from tf_fsm.process.strays import mark_alive
from tf_fsm.storage.backends import Stores
from tf_fsm.storage.protocol import Store

LOCKED = "locked by another process"
#: how long a new loop waits for the workers of a killed loop to stop (they stop by themselves)
ORPHAN_WAIT_SECONDS = 15.0


def worker_outcome(out: str, code: int, stopping: bool, log: Path) -> tuple[str, str]:
    """(outcome, reason) of a finished worker: its work report (tf_fsm.loop.work, the last line
    of its stdout), else what its exit code says; "failed" when neither tells, with what is
    wrong in a report that cannot be read, or the exit code and the end of its `log`."""
    try:
        report = read_report(out)
    except WorkDocumentError as exc:
        return "failed", str(exc)
    if report is not None:
        return report.status, report.reason
    if code == EXIT_LOCKED:  # the worker's `tf-fsm run` was refused the lock
        return "locked", LOCKED
    if code in (EXIT_INTERRUPTED, -signal.SIGINT) or stopping:
        return "interrupted", "interrupted; the attempt is resumable"
    return "failed", log_tail(log, code)


def locked_reason(store: Store, holder: int) -> str:
    """Why a locked ticket is skipped, saying so plainly when the holder is a worker whose
    loop is no longer running (it is stopping by itself)."""
    who = f"pid {holder}" if holder > 0 else "pid unknown"
    loop = orphaned_loop(store)
    if loop is None:
        return f"{LOCKED} ({who})"
    return (
        f"{LOCKED} ({who}, a worker of loop pid {loop}, which is no longer running; "
        "it stops by itself, then the ticket resumes)"
    )


def orphaned_workers(stores: Stores) -> list[str]:
    """`<ticket> (pid N)` for each ticket still locked by a worker of a loop that died."""
    found = []
    for ticket_id in stores.ticket_ids():
        try:
            store = stores(ticket_id)
        except InvalidTicketIdError:
            continue
        holder = store.lock_holder()
        if holder and orphaned_loop(store) is not None:
            found.append(f"{store.ticket_id} (pid {holder})")
    return found


def wait_for_orphaned_workers(
    stores: Stores,
    note: Callable[[str], None],
    poll: float,
    stopping: Callable[[], object],
) -> None:
    """At a loop's start: give workers of a killed loop, which are stopping by themselves,
    up to ORPHAN_WAIT_SECONDS to release their tickets, saying so."""
    waiting = orphaned_workers(stores)
    if not waiting:
        return
    note(
        f"waiting up to {ORPHAN_WAIT_SECONDS:g}s for {len(waiting)} worker(s) of a loop that is "
        f"no longer running to stop: {', '.join(waiting)}"
    )
    deadline = time.monotonic() + ORPHAN_WAIT_SECONDS
    while waiting and time.monotonic() < deadline and not stopping():
        time.sleep(poll)
        waiting = orphaned_workers(stores)


def orphaned_loop(store: Store) -> int | None:
    """The pid of the loop whose worker holds the ticket's lock, when that loop is no longer
    running (the worker ends by itself, see `_stop_with_loop`); None otherwise."""
    loop = store.lock_loop()
    if loop is None or mark_alive(loop):
        return None
    pid = loop.partition(".")[0]
    return int(pid) if pid.isdigit() else None


def _lock_free(path: Path) -> bool | None:
    """Whether nobody holds an flock on `path` (None if there is no such file). Takes the lock
    for an instant and drops it: closing the descriptor releases the probe's own lock."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)
    return True


def open_attempt(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """The last attempt when it is in progress (the plain-JSON view of it)."""
    attempts = data.get("attempts") if data else None
    last = attempts[-1] if isinstance(attempts, list) and attempts else None
    return last if isinstance(last, dict) and last.get("status") == "in_progress" else None


# -- starting workers ------------------------------------------------------------------------

#: what every worker imports anyway, imported once in the fork server instead (with the module
#: of the worker's entry, which the command that starts the loop gives it)
PRELOAD = ["tf_fsm.engine.orchestrator", "tf_fsm.executors.command", "jinja2"]

#: a worker's entry: its work order in (one JSON document, tf_fsm.loop.work), its exit code out;
#: it prints its work report on stdout (tf_fsm.cli.run.worker_main)
Entry = Callable[[str], int]


def _server(entry: Entry) -> Any:
    """The multiprocessing fork server the workers are forked from, started on first use.

    A worker is a separate process (the ticket lock is per process, and a crash takes one
    ticket down, not the loop), but starting a fresh interpreter for each one cost about
    400 ms of CPU in imports, which on 2 cores capped what 4 workers could gain. Forked from
    a server that has those modules loaded, a worker starts in milliseconds. The server is a
    clean single-threaded process, so forking it is safe whatever threads the loop has."""
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([*PRELOAD, entry.__module__])
    return context


def stop_server() -> None:
    """Stop the fork server, if one was started, and wait for it: the loop leaves no process
    behind, and its workers' CPU time is counted as its children's, as a plain child's would
    be. `_stop` is CPython's own (its tests use it); without it the server still exits by
    itself when the loop does."""
    from multiprocessing import forkserver

    stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)
    if stop is not None:
        stop()


def _serve(entry: Entry, order: str, cwd: str, out: str, log: str) -> None:
    """In the forked worker: in `cwd`, stdin from /dev/null, stdout to `out` (the work report
    the loop reads), stderr appended to the ticket's log, as a `tf-fsm run` process started
    there would have; `entry` runs the work order."""
    _stop_with_loop()
    os.chdir(cwd)
    for fd, path, flags in (
        (0, os.devnull, os.O_RDONLY),
        (1, out, os.O_WRONLY | os.O_CREAT | os.O_TRUNC),
        (2, log, os.O_WRONLY | os.O_CREAT | os.O_APPEND),
    ):
        opened = os.open(path, flags, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    try:
        code = entry(order)
    finally:
        # the log is appended to as the run goes; one fsync at the end makes it durable
        sys.stderr.flush()
        with contextlib.suppress(OSError):
            os.fsync(2)
    raise SystemExit(code)


#: how long a worker whose loop died gets to stop cleanly before it kills itself
ORPHAN_GRACE_SECONDS = 10.0


def _stop_with_loop() -> None:
    """In the forked worker: stop when the loop that started it dies, however it dies.

    The worker's parent is the fork server, not the loop, so the parent-death signal cannot
    tell. multiprocessing gives the worker a sentinel of the loop instead (a pipe only the loop
    holds): at its EOF the worker is sent SIGTERM, which interrupts its run as Ctrl-C does (the
    agent's process group is ended, the attempt stays resumable), and after a grace SIGKILL.
    Once the workers are gone, the fork server sees its last client go and exits too."""
    import multiprocessing
    import threading

    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def watch() -> None:
        select.select([parent.sentinel], [], [])
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(ORPHAN_GRACE_SECONDS)
        os.kill(os.getpid(), signal.SIGKILL)

    threading.Thread(target=watch, name="tf-fsm loop watch", daemon=True).start()


#: an unlocked outcome file younger than this may be one a live loop has just created
STALE_OUTCOME_SECONDS = 60.0


def outcome_file(logs: Path, ticket: str) -> tuple[int, Path]:
    """A fresh `.<id>.<random>.out` for one worker's report (its stdout), and an open descriptor
    holding an exclusive lock on it while this loop may still read it. A file of each run's
    own: two loops over one backlog may start workers for the same ticket (one is refused the
    ticket lock), and a shared name let the refused one truncate the other's report."""
    fd, out = tempfile.mkstemp(prefix=f".{ticket}.", suffix=".out", dir=logs)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd, Path(out)


def sweep_outcome_files(logs: Path) -> list[str]:
    """Remove outcome files no loop holds any more (their loop was SIGKILLed before reading
    them): unlocked, and older than STALE_OUTCOME_SECONDS. Returns their names."""
    removed: list[str] = []
    for path in sorted(logs.glob(".*.out")):
        try:
            stale = time.time() - path.stat().st_mtime >= STALE_OUTCOME_SECONDS
            if not stale or not _lock_free(path):
                continue  # new, gone, or a live loop holds it
        except OSError:
            continue
        path.unlink(missing_ok=True)
        removed.append(path.name)
    return removed


class WorkerProcess:
    """A work order run in a forked worker, through `entry`; the parts of Popen the loop uses.
    `held` is the locked descriptor of `out` (from `outcome_file`), closed once the report is
    read."""

    def __init__(
        self, entry: Entry, order: WorkOrder, cwd: Path, out: Path, log: Path, held: int
    ) -> None:
        self.out, self.log, self._held = out, log, held
        self._process = _server(entry).Process(
            target=_serve,
            args=(entry, order.to_json(), str(cwd), str(out), str(log)),
            name=f"tf-fsm worker {order.ticket}",
        )
        try:
            self._process.start()
        except BaseException:
            out.unlink(missing_ok=True)
            os.close(held)
            raise
        self.pid: int = self._process.pid

    @property
    def sentinel(self) -> int:
        """Readable once the worker has ended (for select)."""
        sentinel: int = self._process.sentinel
        return sentinel

    def poll(self) -> int | None:
        code: int | None = self._process.exitcode
        return code

    def result(self) -> tuple[str, int]:
        """(what the worker printed on stdout, its exit code) once it has ended; negative
        codes are signals, as with Popen. The stdout file is removed."""
        self._process.join()
        try:
            text = self.out.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            text = ""
        self.out.unlink(missing_ok=True)
        os.close(self._held)
        code: int = self._process.exitcode
        return text, code


def last_error(lines: list[str]) -> str:
    """The worker's last `tf-fsm: ...` error with its indented remedy lines (it names the file
    and line), else its last non-empty line; at most 500 characters."""
    start = next(
        (i for i in range(len(lines) - 1, -1, -1) if lines[i].startswith("tf-fsm: ")), None
    )
    if start is None:
        said = [next((ln.strip() for ln in reversed(lines) if ln.strip()), "")]
    else:
        said = [lines[start].strip()]
        for line in lines[start + 1 :]:
            if not line[:1].isspace() or not line.strip():
                break
            said.append(line.strip())
    from tf_fsm.storage.redact import Redactor

    # redacted before it is cut, so that no secret is kept in part (the cut would hide it)
    return Redactor.from_environ(os.environ)("; ".join(said))[:500]


def log_tail(log: Path, code: int) -> str:
    """Why a worker failed outright: its exit code or signal, and what its log last said."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        lines = ""
    how = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
    said = last_error(lines.splitlines())
    return f"{how}: {said}" if said else how
