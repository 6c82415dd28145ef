"""Power loss at any point of a 3-attempt lifecycle: whatever the disk keeps, a rerun ends in
the uninterrupted run's final state (docs/crash-testing.md).

The reference run is recorded once per session (tests/crash/conftest.py); each crash state is
drawn by the model (tests/crash/model.py) at a seeded cut point, materialized in a fresh
directory and run again until the ticket is closed (tests/crash/states.py). The states are
tried once per module; the tests below judge them.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.crash import lifecycle
from tests.crash.conftest import ONLY, SEED, SOAK, Recording
from tests.crash.states import (
    FULL_STATES,
    STATES,
    LossPlan,
    Plan,
    closed_before_durable_point,
    landmarks,
    try_state,
)


@dataclass
class Tried:
    label: str
    failures: list[str]
    seen: Counter[str]


def run_states(
    recording: Recording, states: int, tmp: Path, label: str, plan: Plan | LossPlan | None = None
) -> Tried:
    plan = plan or Plan.of(recording, states, SEED)
    numbers = [ONLY] if 0 <= ONLY < states else range(states)
    tried = Tried(label, [], Counter())
    for number in numbers:
        found, outcome = try_state(recording, plan, number, tmp / f"state-{number}")
        tried.failures.extend(found)
        tried.seen += outcome
        tried.seen["states tried"] += 1
        tried.seen["states that did not end as the reference"] += bool(found)
    return tried


@pytest.fixture(scope="module")
def tried(recording: Recording, states_dir: Path) -> Tried:
    tmp = states_dir / "states"
    return run_states(recording, STATES * SOAK, tmp, f"power loss (seed {SEED})")


@pytest.fixture(scope="module")
def tried_full(full_recording: Recording, states_dir: Path) -> Tried:
    tmp = states_dir / "states-full"
    label = f"power loss, research and closer on (seed {SEED})"
    return run_states(full_recording, FULL_STATES * SOAK, tmp, label)


@pytest.fixture(scope="module")
def tried_lost(recording: Recording, full_recording: Recording, states_dir: Path) -> Tried:
    """At each durable phase completion, each file a power cut could take alone, taken."""
    tmp = states_dir / "states-lost"
    tried = Tried(f"a file lost alone (seed {SEED})", [], Counter())
    for name, rec in (("lifecycle", recording), ("full", full_recording)):
        plan = LossPlan.of(rec, SEED)
        one = run_states(rec, len(plan.losses), tmp / name, "", plan)
        tried.failures += one.failures
        tried.seen += one.seen
    return tried


def summary(tried: Tried, capsys: pytest.CaptureFixture[str]) -> str:
    line = f"{tried.label}: {json.dumps(dict(sorted(tried.seen.items())))}"
    with capsys.disabled():
        print(f"\n{line}")
    return line


def shown(found: list[str]) -> str:
    return "\n".join(found[:10]) + f"\n({len(found)} problems in all)"


@pytest.mark.parametrize("which", ["tried", "tried_full"])
def test_every_crash_state_ends_as_the_uninterrupted_run(
    which: str, request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str]
) -> None:
    tried: Tried = request.getfixturevalue(which)
    line = summary(tried, capsys)
    assert not tried.failures, shown(tried.failures)
    if ONLY < 0:
        # The states really were crashes: most differ from what the process saw, and the
        # reruns had to recover (resume an attempt, sweep temp files) in many of them.
        seen = tried.seen
        assert seen["identical to the volatile state"] < seen["states tried"] // 2, line
        assert seen["resumed an attempt"] >= seen["states tried"] // 10, line
        assert seen["swept temp files"] >= 1, line


def test_a_file_a_power_cut_took_alone_is_made_again(
    tried_lost: Tried, capsys: pytest.CaptureFixture[str]
) -> None:
    """The random states rarely take one file and leave the rest (every other pending op must
    come out applied): a lost implementation.md, prompt or log whose phase the journal says
    completed is tried here for each, and the rerun must make it again."""
    line = summary(tried_lost, capsys)
    assert not tried_lost.failures, shown(tried_lost.failures)
    if ONLY < 0:
        assert tried_lost.seen["re-ran a phase"] >= tried_lost.seen["states tried"] // 3, line


def test_cut_points_cover_the_whole_run(recording: Recording) -> None:
    plan = Plan.of(recording, STATES, SEED)
    total = len(recording.ops)
    assert set(landmarks(recording)) <= set(plan.cuts)
    tenths = {cut * 10 // (total + 1) for cut in plan.cuts}
    assert tenths == set(range(10)), sorted(tenths)  # every tenth of the run has cut points
    # the window between the journal saying closed and the run's end, where a closed
    # attempt's reports must already be durable (they are made so before TicketClosed)
    assert any(closed_before_durable_point(recording, cut) for cut in plan.cuts)
    assert Plan.of(recording, STATES, SEED) == plan  # seeded: the same plan every time


def test_retry_state_is_the_journals_last_view_saved(recording: Recording, tmp_path: Path) -> None:
    """The journal holds the after-image of retry-state.json (the lead's durability change)."""
    root = tmp_path / "project"
    lifecycle.make_project(root, recording.workflow)
    lifecycle.run_once(root)
    image = lifecycle.last_view_saved(lifecycle.events(root), "retry-state.json")
    if image is None:
        pytest.skip("the journal has no ViewSaved event of retry-state.json yet")
    on_disk = json.loads((root / lifecycle.TICKET_DIR / "retry-state.json").read_text())
    assert on_disk == image
