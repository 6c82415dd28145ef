"""`tf-fsm watch`: file events in, `run_ticket` out.

An adapter with no decisions of its own. watchdog reports a file in a ticket's directory; once
the file has stopped changing (`executor.stableSeconds`) the ticket is resumed exactly as
`tf-fsm run` would resume it. Which phase runs, and whether an artifact counts, stays with the
orchestrator and the hand-off executor. One worker thread per ticket: tickets run at once, the
runs of one ticket one after another; the ticket lock still keeps other processes out.

Here: the observer, the routing of its events to tickets, start, stop and the summary. The
worker of one ticket, and what it waits for, are in `tf_fsm.watch.ticket`.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Sequence
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from tf_fsm.core import journal as ev
from tf_fsm.errors import TfFsmError
from tf_fsm.executors import Executor, make_executor
from tf_fsm.fs.atomic import make_dirs
from tf_fsm.process.door import signal_children
from tf_fsm.process.strays import end_orphans
from tf_fsm.settings.load import LoadedSettings, knowledge_dir, load_settings
from tf_fsm.storage.backends import ticket_stores
from tf_fsm.storage.store import TICKET_ID_RE, validate_ticket_id
from tf_fsm.tk import tickets
from tf_fsm.views.file_events import observe
from tf_fsm.views.status import tracked_tickets
from tf_fsm.views.terminal import terminal_safe
from tf_fsm.watch.ticket import STATE_FILES, Awaiting, WatchedTicket, awaiting, own_file

if TYPE_CHECKING:
    from watchdog.observers.api import BaseObserver

__all__ = ["Awaiting", "Watch", "awaiting", "own_file"]


class Watch:
    """Watch tickets until `--once` finds nothing left to wait for, or Ctrl-C / SIGTERM."""

    def __init__(
        self,
        root: Path,
        ticket_ids: Sequence[str] = (),
        *,
        once: bool = False,
        json_lines: bool = False,
        out: TextIO | None = None,
        settings: LoadedSettings | None = None,
    ) -> None:
        self.root, self.once, self.json, self.out = root, once, json_lines, out or sys.stdout
        self.settings = settings or load_settings(root, record=True)
        self.tickets_dir = knowledge_dir(root, self.settings) / "tickets"
        self.store = ticket_stores(root, self.settings)
        self.stable = self.settings.settings.executor.stableSeconds
        # A handoff run only checks for a file; other executors may run an agent for an hour.
        self.interruptible = self.settings.settings.executor.kind != "handoff"
        self.named = [validate_ticket_id(t) for t in ticket_ids]
        for ticket_id in self.named:
            tickets.read(root, ticket_id)  # a typo is bad input, not a ticket never seen
        self.tickets: dict[str, WatchedTicket] = {}
        self.stopping = self.interrupted = False
        self.done = threading.Event()
        self.runs = 0
        self.lock = threading.Lock()  # tickets, runs and the output stream
        self.observer: BaseObserver | None = None  # from `start` on

    def executor(self) -> Executor:
        conf = self.settings.settings.executor
        if conf.kind == "handoff":
            from tf_fsm.executors.handoff import HandoffExecutor

            # watch does the waiting: a run that finds no artifact returns at once rather than
            # holding its worker (and Ctrl-C) for executor.waitSeconds.
            return HandoffExecutor(0.0, conf.stableSeconds)
        return make_executor(self.settings, self.root)

    def log(self, ticket: str | None, event: str, text: str, **fields: Any) -> None:
        text = "; ".join(part.strip() for part in text.splitlines())  # one event, one line
        if self.json:
            stamp = ev.timestamp(datetime.now(UTC))
            data = {"ts": stamp, "event": event, "ticket": ticket, "message": text, **fields}
            line = json.dumps(data)
        else:
            text = terminal_safe(text)  # it may quote an agent: shown, never acted on
            line = f"[{ticket}] {text}" if ticket else text
        with self.lock:
            print(line, file=self.out, flush=True)

    def _add(self, ticket_id: str, kinds: tuple[str, ...]) -> WatchedTicket | None:
        """Watch `ticket_id` if its state is one of `kinds`; none given: a named ticket."""
        store = self.store(ticket_id)
        try:
            state = awaiting(store)
        except TfFsmError as exc:
            if not kinds:
                raise
            self.log(ticket_id, "skipped", f"not watched: {exc}")
            return None
        if kinds and state.kind not in kinds:
            return None
        ticket = WatchedTicket(self, store, state)
        with self.lock:
            self.tickets[ticket_id] = ticket
        return ticket

    def start(self) -> None:
        if ended := end_orphans():
            self.log(None, "orphans", ended)
        for ticket_id in self.named or tracked_tickets(self.root, self.settings):
            self._add(ticket_id, () if self.named else ("waiting", "error", "interrupted"))
        make_dirs(self.tickets_dir, within=self.tickets_dir.parent)
        # started before the workers' first scan, so no file falls in between
        self.observer = observe([self.tickets_dir], self.on_path, self._observer_error)
        listed = "".join(f"; {t.id} {t.state.describe()}" for t in self.tickets.values())
        where = f"{self.tickets_dir} (stable {self.stable:g}s)"
        # said before the tickets' threads start, so it is the log's first line, never after
        # a line of theirs
        self.log(None, "watching", f"watching {len(self.tickets)} ticket(s) in {where}{listed}")
        with self.lock:
            for ticket in self.tickets.values():
                ticket.thread.start()
        self.state_changed()

    def _observer_error(self, problem: str) -> None:
        self.log(None, "internal", f"watch: {problem}")

    def on_path(self, path: Path) -> None:
        """Observer thread: route a file event to its ticket. With no ids given, a ticket that
        starts waiting (or fails) in another process comes under watch by its journal write."""
        try:
            ticket_id, *rest = path.relative_to(self.tickets_dir).parts
        except ValueError:
            return
        rel = "/".join(rest)
        with self.lock:
            ticket = self.tickets.get(ticket_id)
        if ticket is not None and rest:
            ticket.notify(path, rel)
        elif rel in STATE_FILES and not (self.named or self.stopping):
            # Not "interrupted": mid-run, the other process's last write is yet to come.
            valid = TICKET_ID_RE.fullmatch(ticket_id)
            if valid and (ticket := self._add(ticket_id, ("waiting", "error"))) is not None:
                self.log(ticket_id, "watching", f"now watched: {ticket.state.describe()}")
                ticket.thread.start()

    def state_changed(self) -> None:
        with self.lock:
            live = any(t.busy or (t.state.active and not t.dropped) for t in self.tickets.values())
        if self.once and not live:
            self.done.set()

    def stop(self, interrupted: bool = True) -> None:
        self.interrupted = self.interrupted or interrupted
        self.done.set()

    def run(self) -> int:
        """Block until done: 0 when `--once` found nothing left, 130 when interrupted."""
        main = threading.current_thread() is threading.main_thread()
        # SIGTERM stops watch as Ctrl-C does (only the main thread may set a handler), from
        # before its first line: one sent as soon as "watching" is printed is no kill
        previous = signal.signal(signal.SIGTERM, _interrupt) if main else None
        try:
            self.start()
            while not self.done.wait(0.2):
                pass
        except KeyboardInterrupt:
            self.interrupted = True
        try:
            self._shutdown()
        except KeyboardInterrupt:
            signal_children(signal.SIGKILL)  # their agents lead sessions of their own
            self.log(None, "left", "interrupted again: agents stopped, tickets left resumable")
        finally:
            if main:
                signal.signal(signal.SIGTERM, previous)
        return self._summary()

    def _shutdown(self) -> None:
        self.stopping = True
        with self.lock:
            workers = list(self.tickets.values())
        for ticket in workers:
            with ticket.cond:
                ticket.cond.notify_all()
        if self.observer is not None:  # None: interrupted before it started
            self.observer.stop()
        busy = ", ".join(t.id for t in workers if t.busy)
        if busy and self.interruptible:
            self.log(
                None,
                "stopping",
                f"stopping: waiting for the current invocation of {busy} "
                "(Ctrl-C again to leave it; it stays resumable)",
            )
        for ticket in workers:
            while ticket.thread.is_alive():
                ticket.thread.join(0.2)
        if self.observer is not None:
            self.observer.join(5)

    def _summary(self) -> int:
        with self.lock:
            watched = [t for t in self.tickets.values() if not t.dropped]
        for ticket in watched:  # a run left behind may have moved it on
            with suppress(TfFsmError):
                ticket.state = awaiting(ticket.store)
        left = [t for t in watched if t.state.active]
        rest = "; ".join(f"{t.id} {t.state.describe()}" for t in left) or "none"
        if self.interrupted:
            self.log(
                None,
                "interrupted",
                f"watch interrupted after {self.runs} run(s); left "
                f"resumable (tf-fsm watch or tf-fsm run): {rest}",
            )
            return 130
        with self.lock:
            dropped = [t.id for t in self.tickets.values() if t.dropped]
        if dropped:  # their errors were logged when they were dropped
            self.log(
                None,
                "done",
                f"watch done after {self.runs} run(s); not watched after an "
                f"error (see above): {', '.join(dropped)}",
            )
            return 2
        self.log(None, "done", f"watch done after {self.runs} run(s): nothing waits or is in error")
        return 0


def _interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt
