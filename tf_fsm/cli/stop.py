"""`tf-fsm stop TICKET`: the run that holds a ticket's lock stopped as Ctrl-C stops it.

The process the lock's owner note names (checked to hold the lock now: a pid can be reused)
is sent SIGINT. A run (`run`, `resume`, `merge`, the board's children, a loop's worker) takes
its first SIGINT as an interrupt (tf_fsm.cli.run.run_interrupts): its agents are ended and
its attempt stays resumable. A loop's worker runs one ticket in a process of its own, so only
that ticket stops, and the loop does not run it again (tf_fsm.loop.ralph). A holder that is
not a run of this ticket alone (`tf-fsm watch`, which runs other tickets in the same process;
`reset`, `workspaces prune` or a Temporal worker, which hold the lock for a moment) is named
and left alone."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path

from tf_fsm.cli.common import project_root, ticket_ids
from tf_fsm.cli.exits import EXIT_NOT_RUNNING, EXIT_OK
from tf_fsm.errors import EXIT_LOCKED

#: how long stop waits, by default, for the run to release the lock
WAIT_SECONDS = 30.0

STOP_EPILOG = f"""\
stops the run that holds the ticket's lock as Ctrl-C does: the process the lock's owner note
names (.lock.owner; checked to hold the lock now) is sent SIGINT, so its agents are ended and
its attempt stays resumable (`tf-fsm resume TICKET` continues it); then stop waits until the
lock is released. A ticket run by a `ralph` worker: only that worker stops, and the loop does
not run the ticket again. A ticket that `tf-fsm watch` runs (watch runs other tickets in the
same process: stop watch itself with Ctrl-C), or that reset, workspaces prune or a Temporal
worker holds for a moment, is not stopped: the message names the holder.

exit codes:
  0   stopped: the run ended and released the ticket's lock
  1   unexpected internal error (traceback with --verbose)
  2   bad input: usage, ticket id, settings file, no project found
  {EXIT_NOT_RUNNING}   no run holds the ticket: nothing to stop
  75  the lock's holder is not a run stop may stop (named), or the run still holds the lock
      after --wait seconds (it goes on stopping: stop again, or wait)
  130 interrupted (Ctrl-C)
"""


def add_stop_parser(p: argparse.ArgumentParser) -> None:
    p.epilog = STOP_EPILOG
    p.add_argument("ticket")
    p.add_argument(
        "--wait",
        type=float,
        default=WAIT_SECONDS,
        metavar="SECONDS",
        help=f"how long to wait for the run to release the lock (default {WAIT_SECONDS:g})",
    )
    p.set_defaults(func=cmd_stop)


def cmd_stop(args: argparse.Namespace) -> int:
    from tf_fsm.settings.load import knowledge_dir, load_settings
    from tf_fsm.storage.lock import holds_lock, lock_holder, owner_note

    root = project_root(args)
    (ticket_id,) = ticket_ids([args.ticket])
    ticket_dir = knowledge_dir(root, load_settings(root)) / "tickets" / ticket_id
    holder = lock_holder(ticket_dir)
    if holder == 0:
        return _not_running(ticket_id)
    note = owner_note(ticket_dir)
    if holder < 0 or not holds_lock(ticket_dir, holder):
        if lock_holder(ticket_dir) == 0:  # it ended meanwhile
            return _not_running(ticket_id)
        return _refused(ticket_id, None, holder)
    if isinstance(held_by := note.get("note"), str):  # not a run of this ticket alone
        return _refused(ticket_id, held_by, holder)
    try:
        os.kill(holder, signal.SIGINT)
    except ProcessLookupError:
        return _not_running(ticket_id)
    loop = note.get("loop")
    what = (
        f"a worker of the loop pid {str(loop).partition('.')[0]}: only this ticket stops"
        if isinstance(loop, str)
        else "its run"
    )
    print(f"{ticket_id}: sent SIGINT to pid {holder} ({what})", flush=True)
    return _wait_released(ticket_id, ticket_dir, holder, args.wait)


def _wait_released(ticket_id: str, ticket_dir: Path, holder: int, seconds: float) -> int:
    """Until `holder` no longer holds the lock (another run may take it next: not waited for)."""
    from tf_fsm.storage.lock import holds_lock

    deadline = time.monotonic() + max(seconds, 0.0)
    while holds_lock(ticket_dir, holder):
        if time.monotonic() >= deadline:
            print(
                f"tf-fsm: error: {ticket_id}: pid {holder} still holds the lock after "
                f"{seconds:g} s; it goes on stopping: `tf-fsm stop {ticket_id}` again, or wait",
                file=sys.stderr,
            )
            return EXIT_LOCKED
        time.sleep(0.1)
    print(f"{ticket_id}: stopped; the attempt is resumable: tf-fsm resume {ticket_id}")
    return EXIT_OK


def _not_running(ticket_id: str) -> int:
    print(f"tf-fsm: {ticket_id}: no run holds the ticket: nothing to stop", file=sys.stderr)
    return EXIT_NOT_RUNNING


def _refused(ticket_id: str, holder_note: str | None, pid: int) -> int:
    """A lock stop leaves alone: held by something that is not a run of this ticket alone
    (its note says what), or by a process stop cannot check (no pid, or not the holder)."""
    from tf_fsm.watch.ticket import WATCH_HOLDER

    if holder_note is None:
        why = f"its lock's holder cannot be checked (pid {pid} per its note)"
    else:
        why = f"held by {holder_note} (pid {pid}), not a run of this ticket alone"
    if holder_note == WATCH_HOLDER:
        why += "; stop tf-fsm watch itself with Ctrl-C (every ticket it runs stays resumable)"
    print(f"tf-fsm: error: {ticket_id}: {why}; nothing stopped", file=sys.stderr)
    return EXIT_LOCKED
