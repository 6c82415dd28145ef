"""The git crash scenario: one tk ticket in its own worktree, in a real repository, run by real
`tf-fsm run` processes whose git is counted (and killed at) by the shim of
tests/crash/git_shim.py (docs/crash-testing.md, "Crash points in git").

The ticket's lifecycle: its branch and worktree are made; attempt 1 implements (a checkpoint
commit), a person commits on main meanwhile (so the merge queue must rebase), the review
blocks it, the fixer's edit is a second checkpoint; attempt 2's review passes, the merge queue
rebases the branch onto main and merges it with the tk close in one commit, and the worktree
and branch are removed. `problems` lists every way a project's end differs from the
uninterrupted run's.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import tk_ticket
from tests.crash import lifecycle
from tests.crash.git_shim import Call, CrashPoint, Shim
from tests.e2e.workspace_project import group_members
from tests.gitrepo import GIT_ENV, git, status
from tf_fsm.core.journal_codec import decode
from tf_fsm.workspace.locks import git_processes_in

REPO = Path(__file__).resolve().parents[2]
TICKET_ID = lifecycle.TICKET_ID
TF_FSM = (sys.executable, "-m", "tf_fsm")
#: files of the project besides tf_fsm's and tk's
FILES = 400


@dataclass(frozen=True)
class Scenario:
    """A git crash scenario: its settings, what its agent does (the CRASH_AGENT_* variables of
    tests/crash/agent.py; with CRASH_AGENT_PERSON_FILE a person commits that file on main at
    the root during the last attempt), the attempts its uninterrupted run ends with, and the
    steps of its lifecycle (`step_of`) CI must crash in."""

    name: str
    settings: dict[str, Any]
    agent: dict[str, str]
    attempts: tuple[tuple[int, str], ...]
    steps: frozenset[str]


#: the ticket in its worktree: attempt 1 blocked, attempt 2 merged after a rebase onto the
#: person's commit
WORKTREE = Scenario(
    "worktree",
    {
        "workflow": lifecycle.WORKFLOW,
        "workspace": {"mode": "worktree"},
        "executor": lifecycle.agent_command(),
    },
    {"CRASH_AGENT_EDITS": "1", "CRASH_AGENT_BLOCKED": "1", "CRASH_AGENT_PERSON_FILE": "person.txt"},
    ((1, "blocked"), (2, "closed")),
    frozenset(
        {
            "worktree creation",
            "attempt start",
            "checkpoint",
            "merge queue",
            "rebase",
            "merge",
            "removal",
        }
    ),
)
#: the ticket in its worktree, closed at attempt 1, where a person added the ticket's own file
#: on main meanwhile: the merge queue's rebase conflicts, the agent resolves the conflict
#: (both sides kept), the reviewers pass it, and it merges. A kill in the resolution counts as
#: one of the ticket's resolutions: room for the second crashes
CONFLICT = Scenario(
    "conflict",
    {
        "workflow": lifecycle.WORKFLOW,
        "workspace": {"mode": "worktree", "conflicts": {"maxAttempts": 10}},
        "executor": lifecycle.agent_command(),
    },
    {
        "CRASH_AGENT_EDITS": "1",
        "CRASH_AGENT_BLOCKED": "0",
        "CRASH_AGENT_PERSON_FILE": "src/pt-1.py",
        "CRASH_AGENT_RESOLVES": "1",
    },
    ((1, "closed"),),
    frozenset(
        {
            "worktree creation",
            "checkpoint",
            "merge queue",
            "rebase",
            "resolution",
            "merge",
            "removal",
        }
    ),
)
#: the scenarios every git crash test and git mutant runs in
SCENARIOS = (WORKTREE, CONFLICT)
#: exit codes of a rerun that is not done yet (3: blocked, the kill fell between attempts)
EXIT_OK, NOT_YET = 0, (3,)
MAX_RERUNS = 4
RUN_SECONDS = 120


def make_template(root: Path, scenario: Scenario) -> Path:
    """The project before any run: `tf-fsm init`, the settings, the tk ticket, committed as
    main's first commit (objects packed: a copy is a few files)."""
    (root / ".tf" / "config").mkdir(parents=True)
    env = {**os.environ, **env_of(root, scenario)}
    done = subprocess.run(
        [*TF_FSM, "init"], cwd=root, env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    settings = json.dumps(scenario.settings, indent=2)
    (root / ".tf" / "config" / "settings.json").write_text(settings)
    for n in range(FILES):  # so that a worktree's checkout takes long enough to be cut short
        path = root / "lib" / f"d{n % 20}" / f"f{n}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {n}\n", encoding="utf-8")
    (root / ".tickets").mkdir(exist_ok=True)
    (root / ".tickets" / f"{TICKET_ID}.md").write_text(tk_ticket(TICKET_ID), encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "initial")
    git(root, "gc", "-q")
    return root


def copy_project(template: Path, root: Path) -> Path:
    root.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", str(template), str(root)], check=True)
    return root


def env_of(root: Path, scenario: Scenario) -> dict[str, str]:
    """What every tf-fsm process of the scenario runs with: git isolated from the machine's
    configuration, the project root, what its agent does."""
    return {
        **GIT_ENV,
        **scenario.agent,
        "TF_FSM_ROOT": str(root),
        "CRASH_AGENT_PERSON": str(root),
        "PYTHONPATH": str(REPO),  # a mutant's tf-fsm imports tests.crash.mutants
    }


def journal(root: Path) -> Path:
    return root / lifecycle.TICKET_DIR / "events.jsonl"


@dataclass
class Ran:
    """One `tf-fsm` process: its exit code, what it said, the git commands it ran, and the
    command it was killed at (None: it was not)."""

    code: int
    stderr: str
    calls: list[Call]
    killed: str | None
    during: str | None = None


def run(
    root: Path,
    scenario: Scenario,
    shim: Shim,
    crash: CrashPoint | None = None,
    program: Sequence[str] = TF_FSM,
    measure: bool = False,
) -> Ran:
    """`tf-fsm run pt-1` (`program` may be a mutant's) in a session of its own, killed at
    `crash` by the shim; returns once nothing it started runs any more."""
    env = {**os.environ, **env_of(root, scenario)}
    env |= shim.env(root, env["PATH"], crash, journal(root) if measure else None)
    env["CRASH_AGENT_GIT"] = shim.real
    proc = subprocess.Popen(
        [*program, "run", TICKET_ID],
        cwd=root,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, err = proc.communicate(timeout=RUN_SECONDS)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        err = f"tf-fsm did not end in {RUN_SECONDS} s (killed by the harness)\n{err}"
    wait_gone(root, proc.pid)
    return Ran(proc.returncode, err, shim.calls(), shim.killed(), shim.during())


def wait_gone(root: Path, pgid: int, seconds: float = 30) -> None:
    """Until no process of the killed group and no git in the project runs any more (a git
    killed `during` dies with tf-fsm, a moment later)."""
    deadline = time.monotonic() + seconds
    while group_members(pgid) or git_processes_in([root]):
        if time.monotonic() > deadline:
            raise AssertionError(f"still running after the kill in {root}")
        time.sleep(0.01)


def rerun_until_closed(
    root: Path, scenario: Scenario, shim: Shim, program: Sequence[str] = TF_FSM
) -> list[Ran]:
    """`tf-fsm run` until it exits 0 (closed): each run. Any other exit is a finding."""
    runs: list[Ran] = []
    while len(runs) < MAX_RERUNS:
        runs.append(run(root, scenario, shim, program=program))
        codes = [r.code for r in runs]
        if codes[-1] == EXIT_OK:
            return runs
        if codes[-1] not in NOT_YET:
            raise AssertionError(f"a rerun exited {codes}: {runs[-1].stderr.strip()[-800:]}")
    raise AssertionError(f"not closed after {MAX_RERUNS} reruns: {[r.code for r in runs]}")


# -- the final state ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GitFinal:
    """What the uninterrupted run left in git: main's first-parent subjects, the subjects of
    the ticket's commits the merge brought in, and main's files (tk's aside) with their blobs."""

    line: list[str]
    merged: list[str]
    files: dict[str, str]


@dataclass(frozen=True)
class Reference:
    """A scenario's uninterrupted run: its final state, in tf_fsm and in git, its git commands
    and its journal's events (each with the offset it ends at)."""

    scenario: Scenario
    final: lifecycle.Final
    git: GitFinal
    calls: list[Call] = field(default_factory=list)
    events: list[tuple[int, Any]] = field(default_factory=list)  # (end offset, event)


def git_final(root: Path) -> GitFinal:
    line = git(root, "log", "--first-parent", "--format=%s", "main").splitlines()
    merge = len(git(root, "show", "--no-patch", "--format=%P", "main").split()) == 2
    merged = git(root, "log", "--format=%s", "main^1..main^2").splitlines() if merge else []
    listing = git(root, "ls-tree", "-r", "main").splitlines()
    files = {}
    for entry in listing:
        meta, path = entry.split("\t", 1)
        if not path.startswith(".tickets/"):
            files[path] = meta.split()[2]
    return GitFinal(line, merged, files)


def problems(root: Path, reference: Reference) -> list[str]:
    """Every way the project differs from the uninterrupted run's end: the ticket's state and
    artifacts (lifecycle.problems), and git."""
    return lifecycle.problems(root, reference.final) + git_problems(root, reference.git)


def git_problems(root: Path, reference: GitFinal) -> list[str]:
    found = []
    final = git_final(root)
    if final.line != reference.line:
        found.append(f"main's history is {final.line}, not {reference.line}")
    if final.merged != reference.merged:
        found.append(f"the merge brought in {final.merged}, not {reference.merged}")
    if final.files != reference.files:
        differ = sorted(set(final.files.items()) ^ set(reference.files.items()))
        found.append(f"main's files differ: {differ}")
    committed = git(root, "show", f"main:.tickets/{TICKET_ID}.md")
    if "\nstatus: closed\n" not in committed:
        found.append("main's tk ticket is not closed")
    if left := status(root):
        found.append(f"git status at the root is not clean: {left!r}")
    return found + _left_behind(root) + _journal_agrees(root)


def _left_behind(root: Path) -> list[str]:
    """Worktrees, ticket branches, merge state and locks left."""
    found = []
    listed = git(root, "worktree", "list", "--porcelain").split("\n\n")[1:]
    # the ticket's worktree waits in the pool of one worker's loop, detached, once it is done
    pooled = [w for w in listed if "/.pool-" in w.split("\n", 1)[0] and "\ndetached" in w]
    if len(listed) > len(pooled) or len(pooled) > 1:
        found.append(f"{len(listed)} worktree(s) left, {len(pooled)} of them pooled")
    if branches := git(root, "for-each-ref", "--format=%(refname)", "refs/heads/tf/"):
        found.append(f"ticket branches left: {branches.split()}")
    dot_git = root / ".git"
    leftovers = [
        *dot_git.rglob("*.lock"),
        dot_git / "MERGE_HEAD",
        dot_git / "SQUASH_MSG",
        *(root / ".tf" / "ralph" / "merging").glob("*"),
    ]
    if left := sorted(str(p.relative_to(root)) for p in leftovers if p.exists()):
        found.append(f"git or merge state left: {left}")
    return found


def _journal_agrees(root: Path) -> list[str]:
    """What the journal says of git is so: the refs under refs/tf/ are the WorkSetAside
    events', the one MergeCompleted names main's merge."""
    found = []
    refs = set(git(root, "for-each-ref", "--format=%(refname)", "refs/tf/").split())
    evs = lifecycle.events(root)
    kept = {getattr(e, "ref", "") for e in evs if e.event == "WorkSetAside"}
    if refs != kept:  # work kept under a ref the journal does not name is lost to the user
        found.append(f"refs under refs/tf/ {sorted(refs)}, journaled {sorted(kept)}")
    merges = [getattr(e, "commit", "") for e in evs if e.event == "MergeCompleted"]
    if len(merges) != 1:
        found.append(f"{len(merges)} MergeCompleted events")
    tip = git(root, "rev-parse", "main")
    if any(commit != tip for commit in merges):
        found.append(f"MergeCompleted names {merges}, not main's merge {tip}")
    return found


# -- steps -------------------------------------------------------------------------------------


def step_of(events: Sequence[Any], call: Call) -> str:
    """The step of the lifecycle a git command belongs to, from the journal before it: the
    worktree's creation, an attempt's start, a phase's checkpoint, the merge queue (its checks,
    its rebase, its merge), the removal after the merge. A command after an event of a step
    this list does not know is named after that event (`after <Event>`), so a new step's
    git commands are told apart without a change here."""
    names = {e.event for e in events}
    last = next((e for e in reversed(events) if e.event not in _QUIET), None)
    if last is not None and last.event not in _KNOWN:
        return f"after {last.event}"
    if "WorkspaceReady" not in names:
        return "worktree creation"
    for event, step in _MERGE_STEPS:
        if event in names:
            return step
    attempt = max((e.attempt or 0 for e in events), default=0)
    started = [e for e in events if e.attempt == attempt and e.event in _PHASE_EVENTS]
    if started and started[-1].event == "PhaseStarted":
        return f"checkpoint ({started[-1].phase})"
    ended = any(e.event == "AttemptFinished" and e.attempt == attempt for e in events)
    if started and started[-1].phase == "close" and not ended:
        return "merge queue"
    return "attempt start"


#: the merge queue's steps, by the last of its events the journal holds
_MERGE_STEPS = (
    ("MergeCompleted", "removal"),
    ("MergeRebased", "merge"),
    ("ResolutionStarted", "resolution"),
    ("MergeStarted", "rebase"),
)
_PHASE_EVENTS = frozenset({"PhaseStarted", "PhaseCompleted", "PhaseSkipped"})
#: events that say nothing of where the run is
_QUIET = frozenset(
    {"ViewSaved", "ViewsChecked", "ViewsSynced", "StaleTempFilesRemoved", "JournalTailDropped"}
)
#: the events of the steps above
_KNOWN = frozenset(
    {
        "AttemptStarted",
        "AttemptFinished",
        "AttemptResumed",
        "EscalationApplied",
        "ResearchSkippedOnRetry",
        "PhaseStarted",
        "PhaseSkipped",
        "PhaseCompleted",
        "InvocationFinished",
        "InvocationRestarted",
        "GateEvaluated",
        "GateFeedbackSent",
        "TicketClosed",
        "TicketBlocked",
        "SameFailureDetected",
        "WorkspaceReady",
        "CheckpointCommitted",
        "WorkSetAside",
        "MergeStarted",
        "MergeRebased",
        "MergeCompleted",
        "WorkspaceRemoved",
        "ResolutionStarted",
        "ResolutionFinished",
        "BranchRebased",
        "MergeHeld",
    }
)


def steps(reference: Reference) -> dict[int, str]:
    """Each reference git command's step (by number)."""
    out = {}
    for call in reference.calls:
        before = [e for end, e in reference.events if end <= call.journal_bytes]
        out[call.number] = step_of(before, call)
    return out


def events_with_offsets(root: Path) -> list[tuple[int, Any]]:
    data = journal(root).read_bytes()
    out, end = [], 0
    for line in data.splitlines(keepends=True):
        end += len(line)
        out.extend((end, e) for e in decode(line).events)
    return out
