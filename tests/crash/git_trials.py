"""Crash trials of the git scenario (tests/crash/git_scenario.py): which git command boundaries
are tried, and one trial: crash, optionally crash again during the rerun, rerun until closed,
compare with the uninterrupted run.

Every git command of the uninterrupted run is a crash point, before it runs and after it
returns (`every_point`), and every command that changes something also a few milliseconds
into it: ~190 points in all, tried with TF_FSM_CRASH_GIT_ALL=1. CI tries `ci_points`: for each
step of the lifecycle, its first command, and each kind of changing command the step runs
(after it: git did it, tf_fsm did not record it), the long ones also half done.
"""

from __future__ import annotations

import random
import shutil
import signal
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tests.crash import git_scenario as scenario
from tests.crash import lifecycle
from tests.crash.git_shim import Call, CrashPoint, Shim

#: git subcommands that change nothing (any other is a changing one, so a new step's git
#: commands count as changing without a change here)
READ_ONLY = (
    "rev-parse",
    "symbolic-ref",
    "for-each-ref",
    "log",
    "merge-base",
    "status",
    "diff",
    "ls-tree",
    "check-ignore",
    "worktree list",
    "cat-file",
    "show",
    "config",
    "hash-object",
    "rev-list",
    "write-tree",
)
#: changing commands that take long enough to be killed half done in CI, and the file git
#: makes while it runs that the kill waits for (its half-made worktree's `locked` marker, its
#: rebase's state; "": a few milliseconds into it)
HALF_DONE = {
    "worktree add": ".git/worktrees/pt-1/locked",
    "rebase --no-autostash": ".git/worktrees/pt-1/rebase-merge",
    "merge --no-ff": "",
}
#: changing commands CI does not crash after: staging, which the command after it (a commit,
#: a reset) always follows up; TF_FSM_CRASH_GIT_ALL=1 does
STAGING = ("add ",)
#: what a rerun journals only when it had to recover something
RECOVERY_EVENTS = {
    "AttemptResumed": "resumed an attempt",
    "WorkSetAside": "set work aside under a ref",
    "JournalTailDropped": "cut a torn journal tail",
    "StaleTempFilesRemoved": "swept temp files",
}
#: what the reruns said they undid (tf_fsm's notes)
RECOVERY_NOTES = {
    "aborted an unfinished rebase": "aborted a killed rebase",
    "ended an unfinished merge": "ended a killed merge",
    "undid an unfinished merge": "ended a killed merge",
    "half made": "removed a half-made worktree",
    "left by a git process that is no longer running": "removed a killed git's lock",
    "a worktree never finished": "removed a half-made worktree",
    "put back": "put back files a killed merge wrote",
}


def changing(words: str) -> bool:
    return not words.startswith(READ_ONLY)


@dataclass(frozen=True)
class Trial:
    """A crash, and optionally a second one during the rerun (its git commands counted from
    the rerun's first)."""

    first: CrashPoint
    step: str
    second: CrashPoint | None = None

    def __str__(self) -> str:
        again = f", then {self.second} of the rerun" if self.second else ""
        return f"{self.first} [{self.step}]{again}"


def every_point(reference: scenario.Reference, rng: random.Random) -> list[Trial]:
    """Every boundary of every git command of the uninterrupted run."""
    steps = scenario.steps(reference)
    trials = []
    for call in reference.calls:
        step = steps[call.number]
        trials += [Trial(CrashPoint(w, at=call.number), step) for w in ("before", "after")]
        if changing(call.words):
            trials.append(Trial(half_done(call, rng), step))
    return trials


def half_done(call: Call, rng: random.Random) -> CrashPoint:
    """A crash while `call` runs: once its state file exists (HALF_DONE), else a seeded few
    milliseconds into it."""
    until = HALF_DONE.get(call.words, "")
    delay = 0.0 if until else round(rng.uniform(0.0, 0.005), 4)
    return CrashPoint("during", at=call.number, delay=delay, until=until)


def ci_points(reference: scenario.Reference, rng: random.Random) -> list[Trial]:
    """Each step's first git command (before it), and the first of each kind of changing
    command in each step but staging (after it; the long ones also half done)."""
    steps = scenario.steps(reference)
    trials, seen = [], set()
    for call in reference.calls:
        step = steps[call.number]
        group = step.split(" (")[0]  # every phase's checkpoint is one step
        if group not in seen:
            trials.append(Trial(CrashPoint("before", at=call.number), step))
        seen.add(group)
        if not changing(call.words) or call.words.startswith(STAGING):
            continue
        if (group, call.words) in seen:
            continue
        seen.add((group, call.words))
        trials.append(Trial(CrashPoint("after", at=call.number), step))
        if call.words in HALF_DONE:
            trials.append(Trial(half_done(call, rng), step))
    return trials


#: second crashes inside the rerun's recovery of what the first left: (first crash, the
#: recovery command of the rerun it is followed by a crash at)
SECOND_CRASHES = [
    (CrashPoint("during", match="worktree add*", delay=0, until=HALF_DONE["worktree add"]),
     CrashPoint("during", match="worktree add*", delay=0, until=HALF_DONE["worktree add"])),
    (CrashPoint("during", match="rebase --no-autostash*", delay=0,
                until=HALF_DONE["rebase --no-autostash"]),
     CrashPoint("after", match="rebase --abort*")),
    (CrashPoint("after", match="merge --no-ff*"), CrashPoint("after", match="merge --abort*")),
    (CrashPoint("before", match="commit --quiet --cleanup*"),  # a checkpoint
     CrashPoint("after", match="update-ref -m tf-fsm: keep*")),
]  # fmt: skip


def second_crashes(reference: scenario.Reference, rng: random.Random, soak: int) -> list[Trial]:
    """The targeted second crashes, then `soak` times as many at seeded points: a first crash
    at any boundary, a second at one of the rerun's first 30 git commands."""
    trials = [Trial(first, "recovery", second) for first, second in SECOND_CRASHES]
    points = every_point(reference, rng)
    for _ in range((soak - 1) * len(SECOND_CRASHES)):
        first = rng.choice(points)
        when = rng.choice(("before", "after"))
        trials.append(Trial(first.first, first.step, CrashPoint(when, at=rng.randint(1, 30))))
    return trials


@dataclass
class Outcome:
    problems: list[str]
    seen: Counter[str]


def run_trial(
    template: Path,
    tmp: Path,
    reference: scenario.Reference,
    trial: Trial,
    program: Sequence[str] = scenario.TF_FSM,
) -> Outcome:
    """One trial in a copy of the template under `tmp` (removed when nothing was found)."""
    root = scenario.copy_project(template, tmp / "project")
    shim = Shim(tmp / "shim")
    seen = Counter[str]({"trials": 1})
    found: list[str] = []
    first = scenario.run(root, reference.scenario, shim, trial.first, program)
    seen["killed"] += first.code == -signal.SIGKILL
    if program != scenario.TF_FSM:  # a mutant's git commands may differ: not its finding
        seen["crash point not reached"] += first.code != -signal.SIGKILL
    elif first.code != -signal.SIGKILL:
        found.append(f"the run was not killed (exit {first.code}): {first.stderr[-300:]}")
    else:
        found += _same_commands(first.calls, reference)
    seen[f"killed during a git command that was {first.during}"] += first.during is not None
    notes = first.stderr
    if trial.second is not None:
        second = scenario.run(root, reference.scenario, shim, trial.second, program)
        seen["killed again in the rerun"] += second.code == -signal.SIGKILL
        words = (second.killed or "").split("\t")[-1].split(" ")[:2]
        seen[f"killed again at git {' '.join(words)}"] += second.code == -signal.SIGKILL
        notes += second.stderr
    codes: list[int] = []
    try:
        reruns = scenario.rerun_until_closed(root, reference.scenario, shim, program)
        codes = [r.code for r in reruns]
        notes += "".join(r.stderr for r in reruns)
        found += scenario.problems(root, reference)
    except AssertionError as exc:
        found.append(str(exc))
    seen["needed more than one rerun"] += len(codes) > 1
    _count_recovery(root, notes, seen)
    if not found:
        shutil.rmtree(tmp)
        return Outcome([], seen)
    where = f"{trial} (reruns exited {codes}; kept in {tmp})"
    return Outcome([f"{where}{lifecycle.PROBLEM}{problem}" for problem in found], seen)


def _same_commands(calls: list[Call], reference: scenario.Reference) -> list[str]:
    """The killed run made the uninterrupted run's git commands up to the kill (the crash
    point is the boundary it names)."""
    ran = [c.words for c in calls]
    expected = [c.words for c in reference.calls[: len(ran)]]
    if ran != expected:
        return [f"the killed run's git commands differ from the uninterrupted run's: {ran}"]
    return []


def _count_recovery(root: Path, notes: str, seen: Counter[str]) -> None:
    try:
        names = {e.event for e in lifecycle.events(root)}
    except Exception:  # a journal the rerun could not read is reported by the checks
        return
    for event, label in RECOVERY_EVENTS.items():
        seen[label] += event in names
    for label in {label for phrase, label in RECOVERY_NOTES.items() if phrase in notes}:
        seen[label] += 1


def run_many(
    trials: list[Trial],
    template: Path,
    tmp: Path,
    reference: scenario.Reference,
    program: Sequence[str] = scenario.TF_FSM,
    jobs: int = 2,
) -> list[Outcome]:
    """`run_trial` of each, `jobs` at a time (the machine's two cores), in order."""

    def one(numbered: tuple[int, Trial]) -> Outcome:
        n, trial = numbered
        return run_trial(template, tmp / f"trial-{n}", reference, trial, program)

    with ThreadPoolExecutor(jobs) as pool:
        return list(pool.map(one, enumerate(trials)))


def merged(outcomes: list[Outcome]) -> Outcome:
    problems = [p for outcome in outcomes for p in outcome.problems]
    return Outcome(problems, sum((o.seen for o in outcomes), Counter[str]()))
