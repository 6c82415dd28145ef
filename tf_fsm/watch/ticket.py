"""The watch of one ticket: what it waits for, and the worker thread that resumes it.

`awaiting` reads a ticket's retry state and journal into an `Awaiting`; a `WatchedTicket` takes
the file events `tf_fsm.watch.watcher` routes to it, waits out `executor.stableSeconds` and calls
`run_ticket`. No watchdog here: the observer and the process-wide stop stay in
`tf_fsm.watch.watcher`.
"""

from __future__ import annotations

import threading
import time
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NamedTuple, Protocol

from tf_fsm.core import journal as ev
from tf_fsm.core.artifacts import REPORTS
from tf_fsm.core.resume import live_phase
from tf_fsm.core.ticket_rules import waiting_for_handoff
from tf_fsm.engine.api import RunOptions
from tf_fsm.engine.orchestrator import Outcome, run_ticket
from tf_fsm.errors import TfFsmError, TicketLockedError
from tf_fsm.storage.layout import CHAIN_CONTEXT, JOURNAL, RETRY_STATE, RUN_RECORDS
from tf_fsm.storage.protocol import Store

if TYPE_CHECKING:
    from tf_fsm.executors.base import Executor
    from tf_fsm.settings.load import LoadedSettings


class WatchHost(Protocol):
    """What a watched ticket needs from the watch that routes events to it (its one
    implementation is tf_fsm.watch.watcher.Watch)."""

    root: Path
    settings: LoadedSettings
    stable: float
    stopping: bool
    interruptible: bool
    runs: int
    lock: threading.Lock

    def executor(self) -> Executor: ...

    def log(self, ticket: str | None, event: str, text: str, **fields: Any) -> None: ...

    def state_changed(self) -> None: ...


RESUME = "resume"  # touched by the user: resume this ticket now
LOCK_RETRY_MAX = 5.0
#: the note watch's runs leave with their lock: watch runs many tickets in one process
WATCH_HOLDER = "tf-fsm watch"
#: What tf_fsm writes into a ticket directory itself: never a reason to act (no feedback loops).
_OWN_NAMES = frozenset({JOURNAL, CHAIN_CONTEXT, *REPORTS})
_OWN_DIRS = frozenset({"prompts", "logs", "gates"})
#: Written by every run, ours or another process's: re-read the ticket's state, never act on it.
STATE_FILES = frozenset(RUN_RECORDS)


def own_file(rel: str) -> bool:
    """Is `rel` (a path inside a ticket directory) never a trigger: a file tf_fsm writes
    itself, or a hidden file or editor backup (opening a file in vim writes `.x.md.swp`)?"""
    first, name = rel.split("/", 1)[0], rel.rsplit("/", 1)[-1]
    return (
        first in _OWN_DIRS
        or first in _OWN_NAMES
        or first.startswith((RETRY_STATE, "lifecycle."))
        or name.startswith(".")
        or name.endswith((".tmp", "~", ".swp", ".swx"))
    )


@dataclass(frozen=True)
class Awaiting:
    """What a ticket waits for, read from its retry state and journal."""

    kind: Literal["waiting", "error", "interrupted", "idle"]
    attempt: int = 0
    phase: str | None = None
    output: Path | None = None  # waiting: the artifact of the last PhaseWaiting
    prompt: Path | None = None
    since_ns: int = 0  # error: when it failed; older files are not news
    status: str = "not started"  # idle: why

    @property
    def active(self) -> bool:
        return self.kind != "idle"

    def describe(self) -> str:
        where = f"attempt {self.attempt} {self.phase or 'start'}"
        if self.kind == "waiting" and self.output is not None:
            return f"waits for {self.output.name} ({where})"
        if self.kind in ("error", "interrupted"):
            return f"{'in error' if self.kind == 'error' else 'in progress'} ({where})"
        return f"not waiting or in error ({self.status})"


def awaiting(store: Store) -> Awaiting:
    """What the ticket waits for: a hand-off artifact (tf_fsm.core.ticket_rules decides it, as
    for the board), a resume after an error, or a run that is in progress or was cut short."""
    state = store.load_retry_state()
    cur = state.current if state else None
    if cur is None or cur.status not in ("in_progress", "error"):
        return Awaiting("idle", status=cur.status if cur else "not started")
    n, events = cur.attemptNumber, store.read_events().events
    if cur.status == "error":
        ends = [e.ts for e in events if e.attempt == n and isinstance(e, ev.AttemptFinished)]
        since = int(datetime.fromisoformat(ends[-1]).timestamp() * 1e9) if ends else 0
        return Awaiting("error", n, cur.phase, since_ns=since)
    handoff = waiting_for_handoff(cur, events)
    if handoff is not None:
        return Awaiting("waiting", n, handoff.phase, Path(handoff.output), Path(handoff.promptFile))
    # A run in another process right now, or one that died (or was stopped) between phases.
    mine = [e for e in events if e.attempt == n]
    return Awaiting("interrupted", n, live_phase(n, cur.status, cur.phase, mine))


class Snap(NamedTuple):
    size: int
    mtime_ns: int


def snap(path: Path | None) -> Snap | None:
    try:
        st = path.stat() if path is not None else None
    except OSError:
        return None
    return Snap(st.st_size, st.st_mtime_ns) if st is not None else None


def handed_in(st: Awaiting) -> bool:
    """Is the awaited artifact there and newer than its prompt (the hand-off rule)?"""
    out, prompt = snap(st.output), snap(st.prompt)
    return out is not None and (prompt is None or out.mtime_ns >= prompt.mtime_ns)


class _Stopped(Exception):
    """Raised into a run at its next agent invocation once watch stops: the attempt stays in
    progress, exactly as after a crash, and `run` or `watch` resumes it later."""


class _RunObserver:
    """Announces the trigger (and takes the resume file) only once the run holds the lock, at
    its first note or phase: a run refused by the lock leaves both for the retry."""

    def __init__(self, ticket: WatchedTicket, why: str, take: Path | None) -> None:
        self.ticket, self.why, self.take = ticket, why, take

    def announce(self, text: str) -> None:
        if self.why:
            if self.take is not None:
                self.take.unlink(missing_ok=True)  # one touch, one resume
            self.ticket.w.log(self.ticket.id, "resume", f"{self.why}: {text.split(': ')[0]}")
            self.why = ""

    def phase_started(self, ticket: str, attempt: int, phase: str, role: str, model: str) -> None:
        self.announce(f"attempt {attempt} {phase}")
        if self.ticket.w.stopping and self.ticket.w.interruptible:
            raise _Stopped(phase)

    def phase_finished(self, ticket: str, attempt: int, phase: str, role: str, ok: bool) -> None:
        pass

    def note(self, ticket: str, text: str) -> None:
        self.announce(text)


class WatchedTicket:
    """One ticket under watch: events from the observer thread in, one run at a time out."""

    def __init__(self, watch: WatchHost, store: Store, state: Awaiting) -> None:
        self.w, self.store, self.state, self.id = watch, store, state, store.ticket_id
        self.cond = threading.Condition()
        self.pending: dict[Path, tuple[float, Snap | None]] = {}  # path -> (last event, stat)
        self.refresh = True  # re-read the state (and look for files that are already there)
        self.busy = self.dropped = self.lock_logged = False
        self.first = True  # in progress at watch start: left by a crash or a stopped watch
        self.retry_at: float | None = None
        self.backoff = 0.5
        self.thread = threading.Thread(target=self._loop, name=f"watch-{self.id}", daemon=True)

    def notify(self, path: Path, rel: str) -> None:
        """Observer thread: note the event; the worker decides after the quiet window."""
        with self.cond:
            if self.busy or self.dropped:
                return  # the run's own writes; the scan after the run finds anything else
            st = self.state
            if rel in STATE_FILES:
                self.refresh = True
            elif rel == RESUME or path == st.output or (st.kind == "error" and not own_file(rel)):
                self.pending[path] = (time.monotonic(), snap(path))
            else:
                return
            self.cond.notify()

    def _has_work(self) -> bool:
        if self.w.stopping or self.dropped:
            return True
        if self.retry_at is not None:
            return time.monotonic() >= self.retry_at
        return self.refresh or bool(self.pending)

    def _loop(self) -> None:
        while True:
            with self.cond:
                while not self._has_work():
                    wait = None if self.retry_at is None else self.retry_at - time.monotonic()
                    self.cond.wait(None if wait is None else max(wait, 0.01))
                if self.w.stopping or self.dropped:
                    return
                self.refresh, self.retry_at = False, None
            self._reread()
            # Later, in progress means another process is running it: its last write (a
            # PhaseWaiting, an AttemptFinished) tells what comes next.
            if self.state.kind == "interrupted" and self.first:
                self._run(f"attempt {self.state.attempt} is in progress and nobody runs it")
            elif (picked := self._settle()) is not None:
                self._run(*picked)
            self.first = False

    def _reread(self) -> None:
        try:
            state = awaiting(self.store)
        except TfFsmError as exc:
            self._drop(str(exc))
            return
        # Files that landed while the ticket was busy, or before watch started.
        found = [self.store.files.dir / RESUME] if state.active else []
        if state.output is not None and handed_in(state):
            found.append(state.output)
        with self.cond:
            self.state = state
            for path in found:
                if path not in self.pending and (now := snap(path)) is not None:
                    self.pending[path] = (time.monotonic(), now)
        self.w.state_changed()

    def _settle(self) -> tuple[str, Path | None] | None:
        """Wait until the noted files have been quiet for stableSeconds (no event, same size
        and mtime, mtime that old); then pick the one that calls for a run, if any."""
        quiet = self.w.stable
        while True:
            with self.cond:
                if self.w.stopping or self.refresh or not self.pending:
                    return None
                left = max(t for t, _ in self.pending.values()) + quiet - time.monotonic()
                if left > 0:
                    self.cond.wait(left)
                    continue
                seen = dict(self.pending)
            unsettled = False
            for path, (_, before) in seen.items():
                now = snap(path)
                young = now is not None and 0 <= time.time_ns() - now.mtime_ns < quiet * 1e9
                if now != before or young:  # still being written: a new window starts
                    with self.cond:
                        self.pending[path] = (time.monotonic(), now)
                    unsettled = True
            if unsettled:
                continue
            with self.cond:
                for path, entry in seen.items():
                    if self.pending.get(path) == entry:
                        del self.pending[path]
            return self._pick({p for p, (_, now) in seen.items() if now is not None})

    def _pick(self, present: set[Path]) -> tuple[str, Path | None] | None:
        st, resume = self.state, self.store.files.dir / RESUME
        if resume in present and st.active:
            return f"{RESUME} file taken", resume
        stable = f"(stable {self.w.stable:g}s)"
        for path in present - {resume}:
            if st.kind == "waiting" and path == st.output:
                if handed_in(st):
                    return f"{path.name} arrived {stable}", None
                self.w.log(self.id, "ignored", f"{path.name} is older than its prompt: not taken")
            elif st.kind == "error" and (now := snap(path)) and now.mtime_ns > st.since_ns:
                return f"{path.name} arrived {stable}", None  # newer than the failure
        return None

    def _run(self, why: str, take: Path | None = None) -> None:
        with self.cond:
            self.busy, saved = True, dict(self.pending)
            self.pending.clear()
        w, observer = self.w, _RunObserver(self, why, take)
        try:
            executor = w.executor()
            outcome = run_ticket(
                w.root,
                self.id,
                RunOptions(holder=WATCH_HOLDER),
                settings=w.settings,
                executor=executor,
                observer=observer,
            )
        except TicketLockedError as exc:
            with self.cond:  # another process has it: the same trigger, later
                self.pending.update(saved)
                self.retry_at = time.monotonic() + self.backoff
                self.backoff = min(self.backoff * 2, LOCK_RETRY_MAX)
                self.busy = False
            if not self.lock_logged and self.state.kind != "interrupted":
                holder = exc.holder_pid or "unknown"
                w.log(self.id, "locked", f"locked by another process (pid {holder}): retrying")
                self.lock_logged = True
            return
        except _Stopped as exc:
            w.log(self.id, "stopped", f"stopped before {exc}: the attempt stays resumable")
        except Exception as exc:  # one ticket's trouble must not stop the others
            self._drop(str(exc) if isinstance(exc, TfFsmError) else f"{type(exc).__name__}: {exc}")
        else:
            observer.announce("resumed")
            w.log(self.id, "outcome", self._outcome_line(outcome), status=outcome.status)
            with w.lock:
                w.runs += 1
        self.backoff, self.lock_logged = 0.5, False
        with self.cond:
            self.busy, self.refresh = False, True
            self.cond.notify()

    def _outcome_line(self, o: Outcome) -> str:
        with suppress(TfFsmError, ValueError):
            nxt = awaiting(self.store)
            if o.status == "waiting" and nxt.output is not None and nxt.prompt is not None:
                prompt = nxt.prompt.relative_to(self.store.files.dir)
                line = f"waiting for {nxt.output.name} ({nxt.phase}; prompt {prompt})"
                if nxt.output.exists() and not handed_in(nxt):
                    line += f"; {nxt.output.name} is older than its prompt: touch it to hand it in"
                return line
        label, retries = o.status.upper().replace("_", " "), f"{o.retry_count}/{o.max_retries}"
        line = f"{label} after attempt {o.attempt} (retries {retries}): {o.reason}"
        if o.status == "error":
            line += f"; resumes on a new artifact or `touch {self.store.files.dir / RESUME}`"
        return line

    def _drop(self, problem: str) -> None:
        with self.cond:
            self.dropped = True
        self.w.log(self.id, "dropped", f"error: {problem}; not watched any more")
        self.w.state_changed()
