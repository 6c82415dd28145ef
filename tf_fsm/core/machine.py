"""The ticket lifecycle as one `transitions` machine, declared once as data.

States: `initial` -> `in_progress.<phase>` for the six phases -> `blocked` | `closed` | `error`;
in a git workspace a passed ticket goes through `merging` (its branch merged into the base
branch, no agent) before `closed`; with `ralph.parallelAutoMerge` off it waits in
`awaiting_merge` first, until `tf-fsm merge` takes it on.
Phase states are flat names with an `in_progress.` prefix: a plain `Machine` triggers about six
times faster than a nested one (measured with transitions 0.9), and the diagrams regroup the
prefix into a nested `in_progress` state. Guards are named functions of `AttemptFacts`; one
machine serves every ticket being advanced (models are added and removed), so a backlog never
costs a machine per ticket.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from itertools import pairwise
from typing import Any

from tf_fsm.errors import TransitionError

PHASES: tuple[str, ...] = ("research", "implement", "review", "fix", "verify", "close")
INITIAL, BLOCKED, CLOSED, ERROR = "initial", "blocked", "closed", "error"
MERGING = "merging"
#: a passed attempt whose merge waits for `tf-fsm merge` (ralph.parallelAutoMerge off)
AWAITING_MERGE = "awaiting_merge"
#: the `phase` an attempt records while it merges (retry-state.json, the journal)
MERGE_PHASE = "merge"
PREFIX = "in_progress."


def phase_state(phase: str) -> str:
    return PREFIX + phase


def phase_of(state: str) -> str | None:
    return state.removeprefix(PREFIX) if state.startswith(PREFIX) else None


STATES: tuple[str, ...] = (
    INITIAL,
    *map(phase_state, PHASES),
    AWAITING_MERGE,
    MERGING,
    BLOCKED,
    CLOSED,
    ERROR,
)


@dataclass
class AttemptFacts:
    """What the guards look at: one ticket's current attempt."""

    ticket_id: str
    attempt: int = 1
    retries_left: int = 1
    runs: frozenset[str] = frozenset(PHASES)  # the phases this attempt runs
    gate_passed: bool | None = None  # decided in verify
    resume_phase: str | None = None  # where an errored attempt picks up
    merges: bool = False  # a passed attempt is merged into the base branch now, then closes
    held: bool = False  # a passed attempt's merge waits for `tf-fsm merge` (auto-merge off)


Guard = Callable[[AttemptFacts], bool]


def retries_left(facts: AttemptFacts) -> bool:
    return facts.retries_left > 0


def gate_passed(facts: AttemptFacts) -> bool:
    return facts.gate_passed is True


def gate_failed(facts: AttemptFacts) -> bool:
    return facts.gate_passed is False


def merges(facts: AttemptFacts) -> bool:
    return facts.merges


def no_merge(facts: AttemptFacts) -> bool:
    return not facts.merges and not facts.held


def merge_held(facts: AttemptFacts) -> bool:
    return facts.held and not facts.merges


def _named(name: str, fn: Guard) -> Guard:
    fn.__name__ = fn.__qualname__ = name
    return fn


@cache
def runs(phase: str) -> Guard:
    return _named(f"runs_{phase}", lambda facts: phase in facts.runs)


@cache
def skips(phase: str) -> Guard:
    return _named(f"skips_{phase}", lambda facts: phase not in facts.runs)


@cache
def resumes_at(phase: str) -> Guard:
    return _named(f"resumes_at_{phase}", lambda facts: facts.resume_phase == phase)


@dataclass(frozen=True)
class Edge:
    trigger: str
    source: str
    dest: str
    guards: tuple[Guard, ...] = ()

    @property
    def label(self) -> str:
        names = ", ".join(g.__name__ for g in self.guards)
        return f"{self.trigger} [{names}]" if names else self.trigger


def _table() -> tuple[Edge, ...]:
    first = phase_state(PHASES[0])
    edges = [
        Edge("start", INITIAL, first, (retries_left,)),
        Edge("retry", BLOCKED, first, (retries_left,)),
    ]
    for here, there in pairwise(PHASES):
        edges.append(Edge("complete", phase_state(here), phase_state(there), (runs(here),)))
        edges.append(Edge("skip", phase_state(here), phase_state(there), (skips(here),)))
    close = phase_state("close")
    edges.append(Edge("complete", close, CLOSED, (gate_passed, no_merge)))
    edges.append(Edge("complete", close, MERGING, (gate_passed, merges)))
    edges.append(Edge("complete", close, AWAITING_MERGE, (gate_passed, merge_held)))
    edges.append(Edge("complete", close, BLOCKED, (gate_failed,)))
    edges.append(Edge("merge", AWAITING_MERGE, MERGING))
    edges.append(Edge("merged", MERGING, CLOSED))
    # a merge conflict no agent could resolve, with workspace.conflicts.mode rerun: the
    # attempt is blocked and the next one starts again from the base branch's tip
    edges.append(Edge("rerun", MERGING, BLOCKED))
    edges += [Edge("fail", phase_state(p), ERROR) for p in PHASES]
    edges.append(Edge("fail", MERGING, ERROR))
    edges += [Edge("resume", ERROR, phase_state(p), (resumes_at(p),)) for p in PHASES]
    return tuple(edges)


#: The transition table: the one definition the runtime machine and the diagrams share.
TRANSITIONS: tuple[Edge, ...] = _table()
TRIGGERS: tuple[str, ...] = tuple(dict.fromkeys(e.trigger for e in TRANSITIONS))
#: The one state with no way out by design. A blocked ticket out of retries is stuck too, but
#: by its guard (`retries_left`), not by the table.
TERMINAL: frozenset[str] = frozenset({CLOSED})


class TicketModel:
    """The object `transitions` moves: a ticket's state plus the facts its guards read."""

    def __init__(self, facts: AttemptFacts, state: str = INITIAL) -> None:
        self.stand_in(facts, state)

    def stand_in(self, facts: AttemptFacts, state: str) -> None:
        """Stand in `state` with `facts` and no path taken (a new model, or a reused one)."""
        if state not in STATES:
            raise ValueError(f"unknown lifecycle state {state!r}")
        self.facts = facts
        self.state = state
        self.path: list[tuple[str, str, str]] = []  # (source, trigger, dest) taken


def _condition(guard: Guard) -> Callable[[Any], bool]:
    def check(event: Any) -> bool:
        return guard(event.model.facts)

    check.__name__ = guard.__name__
    return check


class Lifecycle:
    """One shared `transitions.Machine` for every ticket being advanced. The table is checked
    when the machine is built (`check_structure`): a malformed one never runs a ticket."""

    def __init__(self, table: tuple[Edge, ...] = TRANSITIONS) -> None:
        from transitions import Machine

        report = check_structure(table)
        if not report.ok:
            raise ValueError(f"the lifecycle's transition table is malformed: {report}")
        self.table = table
        # `tf-fsm watch` advances tickets from several threads; the model list is shared.
        self._lock = threading.RLock()
        self._idle: list[TicketModel] = []  # attached, given back: `take` reuses them
        self._machine = Machine(
            model=None,
            states=list(STATES),
            transitions=[
                {
                    "trigger": e.trigger,
                    "source": e.source,
                    "dest": e.dest,
                    "conditions": [_condition(g) for g in e.guards],
                }
                for e in table
            ],
            initial=INITIAL,
            auto_transitions=False,
            send_event=True,
            ignore_invalid_triggers=False,
        )

    def attach(self, model: TicketModel) -> None:
        with self._lock:
            self._machine.add_model(model, initial=model.state)

    def detach(self, model: TicketModel) -> None:
        with self._lock:
            self._machine.remove_model(model)

    def take(self, facts: AttemptFacts, state: str) -> TicketModel:
        """A model attached in `state` with `facts`: one given back earlier when there is
        one (attaching binds every trigger and state of the machine to the model, which
        costs more than an attempt's moves), else a new one. `give_back` when done."""
        with self._lock:
            if self._idle:
                model = self._idle.pop()
                model.stand_in(facts, state)
                return model
        model = TicketModel(facts, state)
        self.attach(model)
        return model

    def give_back(self, model: TicketModel) -> None:
        """A model from `take` that no attempt moves any more."""
        with self._lock:
            self._idle.append(model)

    def fire(self, model: TicketModel, trigger: str) -> str:
        """Take `trigger` from the model's state; returns the new state or raises."""
        from transitions import MachineError

        source = model.state
        try:
            with self._lock:
                moved = bool(getattr(model, trigger)())
        except (MachineError, AttributeError):
            raise TransitionError(model.facts.ticket_id, source, trigger, ()) from None
        if not moved:
            refused = [
                g.__name__
                for e in self.table
                if e.trigger == trigger and e.source == source
                for g in e.guards
                if not g(model.facts)
            ]
            raise TransitionError(model.facts.ticket_id, source, trigger, refused)
        model.path.append((source, trigger, model.state))
        return model.state


@cache
def lifecycle() -> Lifecycle:
    return Lifecycle()


@dataclass
class StructureReport:
    unreachable: list[str] = field(default_factory=list)
    traps: list[str] = field(default_factory=list)
    phases_without_error_edge: list[str] = field(default_factory=list)
    unknown_states: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (
            self.unreachable or self.traps or self.phases_without_error_edge or self.unknown_states
        )


def check_structure(
    table: Iterable[Edge] = TRANSITIONS,
    states: Iterable[str] = STATES,
    initial: str = INITIAL,
    terminal: frozenset[str] = TERMINAL,
) -> StructureReport:
    """Reachability from the initial state, no trap states but the terminal ones, and an
    error edge out of every phase."""
    table, states = list(table), list(states)
    report = StructureReport()
    report.unknown_states = sorted(
        {s for e in table for s in (e.source, e.dest) if s not in states}
    )
    out: dict[str, set[str]] = {s: set() for s in states}
    for e in table:
        out.setdefault(e.source, set()).add(e.dest)
    seen, todo = {initial}, deque([initial])
    while todo:
        for nxt in out.get(todo.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    report.unreachable = [s for s in states if s not in seen]
    report.traps = [s for s in states if not out.get(s) and s not in terminal]
    report.phases_without_error_edge = [
        s
        for s in states
        if s.startswith(PREFIX) and not any(e.source == s and e.dest == ERROR for e in table)
    ]
    return report


def state_of_attempt(status: str | None, phase: str | None) -> str:
    """The lifecycle state a persisted attempt stands in (the state is derived, never stored)."""
    if status is None:
        return INITIAL
    if status == "in_progress":
        if phase == MERGE_PHASE:
            return MERGING
        return phase_state(phase) if phase in PHASES else phase_state(PHASES[0])
    return {"blocked": BLOCKED, "closed": CLOSED, "error": ERROR}[status]
