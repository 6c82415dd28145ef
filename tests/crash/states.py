"""Cut points over a recording, crash states drawn at them, and one rerun per state.

Each state has its own seed (the base seed plus its number): the cut point and every choice
of the power-loss model (tests/crash/model.py) come from it, so `try_state` with the same
recording, number and base seed replays it exactly.
"""

from __future__ import annotations

import random
import shutil
from collections import Counter
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from tests.crash import lifecycle
from tests.crash.conftest import Recording
from tests.crash.model import CrashState, Machine
from tf_fsm.core import journal as ev

STATES_PER_CUT = 3
#: crash states in CI (times TF_FSM_CRASH_SOAK): the lifecycle, and the variant with research
#: and the closer on
STATES, FULL_STATES = 600, 150
#: what a rerun journals only when it had to recover something
RECOVERY_EVENTS = {
    "AttemptResumed": "resumed an attempt",
    "StaleTempFilesRemoved": "swept temp files",
    "JournalTailDropped": "cut a torn journal tail",
    "ViewsChecked": "checked the views after a crash",
}


def landmarks(recording: Recording) -> list[int]:
    """Cut points just after the ops a crash is most interesting around: every save of
    retry-state.json, every edit of the tk ticket, the durable point, and the run's end."""
    marks = [len(recording.ops)]
    for i, op in enumerate(recording.ops):
        if op.kind == "sync" or (
            op.kind in ("rename", "exchange")
            and op.dst.endswith(("retry-state.json", f"{lifecycle.TICKET_ID}.md"))
        ):
            marks.append(i + 1)
    return sorted(set(marks))


def cut_points(recording: Recording, count: int, rng: random.Random) -> list[int]:
    """`count` cut points: the landmarks, then one drawn in each of equal strata of the run
    (so attempt starts, phases, saves, the close and the end are all covered)."""
    marks = landmarks(recording)[:count]
    rest = count - len(marks)
    if rest <= 0:
        return marks
    total = len(recording.ops) + 1
    drawn = [
        rng.randrange(k * total // rest, max(k * total // rest + 1, (k + 1) * total // rest))
        for k in range(rest)
    ]
    return marks + drawn


@dataclass(frozen=True)
class Plan:
    """State number -> (cut point, the state's seed)."""

    base_seed: int
    cuts: list[int]
    kind = "state"

    @classmethod
    def of(cls, recording: Recording, states: int, base_seed: int) -> Plan:
        rng = random.Random(base_seed)  # noqa: S311 - seeded test data, not security
        cuts = cut_points(recording, -(-states // STATES_PER_CUT), rng)
        per_state = [cut for cut in cuts for _ in range(STATES_PER_CUT)][:states]
        return cls(base_seed, per_state)

    def state(self, recording: Recording, number: int) -> tuple[int, Machine, CrashState]:
        cut = self.cuts[number]
        machine = Machine(recording.files, recording.dirs).replay(recording.ops[:cut])
        rng = random.Random(self.base_seed + number)  # noqa: S311 - seeded test data
        return cut, machine, machine.crash(rng)


def completions(recording: Recording) -> list[int]:
    """Cut points just after each fsync of the journal that made a phase's completion
    durable: the journal then says the phase is done, while its files may not be on disk."""
    journal = (lifecycle.TICKET_DIR / "events.jsonl").as_posix()
    cuts: list[int] = []
    last = b""
    for i, op in enumerate(recording.ops):
        if op.kind == "write" and op.path == journal:
            last = op.data
        elif op.kind == "fsync" and op.path == journal and b'"PhaseCompleted"' in last:
            cuts.append(i + 1)
    return cuts


@dataclass(frozen=True)
class LossPlan:
    """State number -> (cut point, the one file a power cut takes there): at each durable
    phase completion, each file of the ticket a power cut could take alone."""

    base_seed: int
    losses: list[tuple[int, str]]
    kind = "lost-file state"

    @classmethod
    def of(cls, recording: Recording, base_seed: int) -> LossPlan:
        under = f"{lifecycle.TICKET_DIR.as_posix()}/"
        losses = []
        for cut in completions(recording):
            machine = Machine(recording.files, recording.dirs).replay(recording.ops[:cut])
            losses += [(cut, path) for path in machine.lost_alone(under)]
        return cls(base_seed, losses)

    def state(self, recording: Recording, number: int) -> tuple[int, Machine, CrashState]:
        cut, path = self.losses[number]
        machine = Machine(recording.files, recording.dirs).replay(recording.ops[:cut])
        rng = random.Random(self.base_seed + number)  # noqa: S311 - seeded test data
        return cut, machine, machine.lose(path, rng)


def closed_before_durable_point(recording: Recording, cut: int) -> bool:
    """Is `cut` after TicketClosed was written to the journal and before the run's durable
    point (sync_filesystem)? The window where only the durable point made before the close
    keeps the closed attempt's reports (nothing resumes a closed attempt)."""
    closed = False
    for op in recording.ops[:cut]:
        if op.kind == "write" and op.path.endswith("events.jsonl") and b'"TicketClosed"' in op.data:
            closed = True
        elif op.kind == "sync" and closed:
            return False
    return closed


def same(a: CrashState, b: CrashState) -> bool:
    return a.files == b.files and a.dirs == b.dirs


def try_state(
    recording: Recording, plan: Plan | LossPlan, number: int, root: Path
) -> tuple[list[str], Counter[str]]:
    """Materialize state `number` at `root` (a new directory), rerun until closed, check the
    final state: (the problems, each described with what replays it; what happened)."""
    cut, machine, state = plan.state(recording, number)
    seen = Counter[str]()
    seen["identical to the durable state"] += same(state, machine.durable_state())
    seen["identical to the volatile state"] += same(state, machine.volatile_state())
    state.materialize(root)
    try:
        statuses = lifecycle.run_until_final(root)
        found = lifecycle.problems(root, recording.reference)
    except Exception as exc:
        statuses, found = [], [f"{type(exc).__name__}: {exc}"]
    seen["needed more than one rerun"] += len(statuses) > 1
    seen["found the ticket closed"] += statuses[:1] == ["already_closed"]
    with suppress(Exception):  # a journal the rerun could not read is reported in `found`
        _count_recovery(root, seen)
    if not found:
        shutil.rmtree(root)  # a failing state's directory is kept, to be looked at
        return [], seen
    where = (
        f"{plan.kind} {number} (TF_FSM_CRASH_SEED={plan.base_seed} "
        f"TF_FSM_CRASH_ONLY={number}): "
        f"cut after op {cut} of {len(recording.ops)} ({_op(recording, cut)}), reruns "
        f"{statuses}, choices {state.choices}"
    )
    return [f"{where}{lifecycle.PROBLEM}{problem}" for problem in found], seen


def _op(recording: Recording, cut: int) -> str:
    return str(recording.ops[cut - 1]) if cut else "before the first op"


def _count_recovery(root: Path, seen: Counter[str]) -> None:
    evs = lifecycle.events(root)
    names = {e.event for e in evs}
    for event, label in RECOVERY_EVENTS.items():
        seen[label] += event in names
    seen["repaired a view"] += any(
        getattr(e, "repaired", None) for e in evs if e.event == "ViewsChecked"
    )
    started = Counter((e.attempt, e.phase) for e in evs if isinstance(e, ev.PhaseStarted))
    seen["re-ran a phase"] += any(n > 1 for n in started.values())
