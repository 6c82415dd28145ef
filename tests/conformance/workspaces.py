"""The workspaces (tf_fsm.engine.api.RunTree) the Workspace conformance suite runs against, the
project each of its tests runs in, and the engine's side of the seam, played step by step.

A workspace is built by a function taking the ticket's run and returning its tree. The run is
`TicketRun`, the one RunContext, on a real store, real settings and a real tk ticket in a real
git repository; it is never `run()`: the suite calls the tree's steps itself, in the order the
engine does, and the agent is tests/fake_agent.py run as a process by the `command` executor
through the engine's own invocation code. A second implementation is one more entry in
`real_kinds`, with what it does by design declared in its `Kind`.

With TF_FSM_CONFORMANCE_MUTANTS=workspaces the suite runs against the deliberately broken
workspaces of broken_workspaces.py instead (test_mutants.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import tk_ticket
from tests.gitrepo import GIT_ENV, git, init_repo
from tf_fsm.core import workspace_events as wev
from tf_fsm.core.state import RetryState, finish_attempt
from tf_fsm.engine.api import QuietObserver, RunOptions, RunTree
from tf_fsm.engine.context import AttemptContext
from tf_fsm.engine.invocation import invoke, prepared
from tf_fsm.engine.orchestrator import TicketRun
from tf_fsm.engine.tree import SharedTree
from tf_fsm.engine.worktree import open_tree
from tf_fsm.executors.base import Invocation
from tf_fsm.executors.command import CommandExecutor
from tf_fsm.settings.load import load_settings

TICKET = "pt-1"
FAKE_AGENT = Path(__file__).resolve().parents[1] / "fake_agent.py"
#: the project's committed files at the attempt's start
FILES = {
    "src/app.py": "def answer():\n    return 42\n",
    "README.md": "# The demo project\n",
    ".tickets/pt-1.md": tk_ticket(TICKET, tags="[]"),
}
#: implement, one reviewer, the fixer; a `reset` rollback; the fake agent
SETTINGS: dict[str, Any] = {
    "workflow": {
        "enableResearcher": False,
        "enableReviewers": ["reviewer-general"],
        "enableCloser": False,
    },
    "workspace": {"rollback": "reset"},
    "executor": {"kind": "command", "command": [sys.executable, str(FAKE_AGENT)]},
}
MUTANTS_ENV = "TF_FSM_CONFORMANCE_MUTANTS"

Open = Callable[[TicketRun], RunTree]


@dataclass(frozen=True)
class Kind:
    """A workspace, and what it does by design where the promises differ by kind."""

    open: Open
    #: each phase that changed the tree is a commit on the ticket's own branch (False: the
    #: change stays in the tree, uncommitted, and nothing is ever committed)
    commits: bool
    #: a passed attempt is merged into the base branch, and the tree let go of (False: its
    #: work stays where it was made)
    merges: bool
    #: the agent sees copies of the ticket's files inside `path` (False: the store itself)
    mirrors: bool


def open_shared(run: TicketRun) -> RunTree:
    return SharedTree(run.root)


def open_worktree(run: TicketRun) -> RunTree:
    tree, _note = open_tree(run)
    assert tree is not None, "the worktree mode was asked for and not given"
    return tree


def real_kinds() -> dict[str, Kind]:
    return {
        "SharedTree": Kind(open_shared, commits=False, merges=False, mirrors=False),
        "TicketWorktree": Kind(open_worktree, commits=True, merges=True, mirrors=True),
    }


def kinds() -> dict[str, Kind]:
    """Every workspace implementation by name; the broken ones in a mutant run."""
    if os.environ.get(MUTANTS_ENV) == "workspaces":
        from tests.conformance.broken_workspaces import BROKEN

        return BROKEN
    return real_kinds()


# -- the project ---------------------------------------------------------------------------


def make_project(root: Path) -> str:
    """A git repository on `main` holding FILES, tf_fsm's settings and a .gitignore as `tf-fsm
    init` writes it; the sha of its one commit."""
    settings = root / ".tf" / "config" / "settings.json"
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(SETTINGS, indent=2), encoding="utf-8")
    init_repo(root, FILES)
    return git(root, "rev-parse", "HEAD")


class Agent:
    """tests/fake_agent.py as the run's executor: `edits` says which files its invocations of
    a phase write in its working directory (the tree), as a real agent's edits would."""

    def __init__(self, root: Path, scratch: Path, secret: str) -> None:
        self.plan_file = scratch / "agent-plan.json"
        env = {k: v for k, v in os.environ.items() if not k.startswith("FAKE_AGENT")}
        env["FAKE_AGENT_PLAN"] = str(self.plan_file)
        self.executor = CommandExecutor([sys.executable, str(FAKE_AGENT)], root, env)
        self.secret = secret
        self.edits()

    def edits(self, *rules: dict[str, object]) -> None:
        plan = {"secret": self.secret, "edits": [{"mode": "write", **r} for r in rules]}
        self.plan_file.write_text(json.dumps(plan), encoding="utf-8")


def new_run(root: Path, agent: Agent) -> TicketRun:
    """pt-1's run (the worktree mode asked for: the kind's `open` decides the tree)."""
    settings = load_settings(root)
    return TicketRun(
        root, TICKET, RunOptions(worktree=True), settings, agent.executor, QuietObserver()
    )


# -- the engine's side ---------------------------------------------------------------------


@dataclass
class Attempts:
    """The run's attempts as the engine carries them out: begun through `TicketRun`'s own
    start (the tree's `begin_attempt`, the journal's AttemptStarted), each phase one agent
    invocation through the engine's invocation code, then the tree's `after_phase`."""

    run: TicketRun
    state: RetryState | None = None

    def begin(self) -> AttemptContext:
        attempt, self.state = self.run._begin(self.state, "initial")
        return attempt

    def phase(self, attempt: AttemptContext, phase: str, *, completed: bool = True) -> Invocation:
        """One phase: the agent writes its artifact and its edits; `completed=False` is a phase
        cut off after the agent's edits and before the tree recorded them. Its invocation."""
        role, artifact = PHASES[phase]
        prompt = f"Do the {phase} of {TICKET} as {role}.\n"
        call = prepared(self.run, attempt, phase, role, artifact, prompt, f"{phase}-{role}")
        failure = invoke(self.run, attempt, call, on_waiting=_never_waits)
        assert failure is None, failure
        if completed:
            self.run.tree.after_phase(self.run, attempt.number, phase)
        return call

    def block(self) -> None:
        """The current attempt ends blocked (its gate found what blocks it)."""
        assert self.state is not None
        run = self.run
        self.state = run.save(
            finish_attempt(
                self.state,
                status="blocked",
                counts={"Major": 1},
                now=run.now(),
                max_retries=run.settings.max_retries,
                reason="1 Major finding",
            )
        )


#: the suite's phases: the role that runs each and the artifact it writes
PHASES = {
    "implement": ("worker", "implementation.md"),
    "review": ("reviewer-general", "review-general.md"),
    "fix": ("fixer", "fixes.md"),
}


def _never_waits(what: str) -> None:
    raise AssertionError(f"the command executor does not wait: {what}")


# -- what the suite looks at ---------------------------------------------------------------


def holding(root: Path, tree: RunTree, name: str, text: str) -> list[str]:
    """Where the file `name` (relative to the tree) holds exactly `text` now: "tree" when the
    tree's own file does, and every branch and refs/tf/ ref whose commit does."""
    places = []
    path = tree.path / name
    if path.is_file() and not path.is_symlink() and path.read_text(encoding="utf-8") == text:
        places.append("tree")
    refs = git(root, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/tf")
    for ref in refs.splitlines():
        shown = subprocess.run(
            ["git", "show", f"{ref}:{name}"],
            cwd=root,
            env={**os.environ, **GIT_ENV},
            capture_output=True,
            text=True,
        )
        if shown.returncode == 0 and shown.stdout == text:
            places.append(ref)
    return places


def set_aside_refs(run: TicketRun) -> set[str]:
    """The refs the journal says work was kept under."""
    events = run.store.read_events().events
    return {e.ref for e in events if isinstance(e, wev.WorkSetAside)}


def committed_paths(root: Path, since: str) -> set[str]:
    """Every path a commit not in `since` changes, on any ref (branches, refs/tf/, HEADs)."""
    out = git(root, "log", "--all", "--format=", "--name-only", "--no-renames", f"^{since}")
    return {line for line in out.splitlines() if line}


def worktrees(root: Path) -> list[Path]:
    """The working trees git has registered (the project root first)."""
    out = git(root, "worktree", "list", "--porcelain")
    return [
        Path(line[len("worktree ") :]) for line in out.splitlines() if line.startswith("worktree ")
    ]
