"""Deliberately broken workspaces: each is the ticket's worktree (TicketWorktree, made as a run
makes it) with one promise of the Workspace contract broken, as a plausible bug would break
it. test_mutants.py runs the Workspace suite against each and checks that every one fails it.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from tests.conformance.workspaces import Kind, open_worktree
from tf_fsm.engine.mirror import fill
from tf_fsm.engine.worktree import TicketWorktree, attempt_start
from tf_fsm.workspace import checkpoint

if TYPE_CHECKING:
    from tf_fsm.core.state import RetryState
    from tf_fsm.engine.api import OutcomeStatus, RunContext, RunTree
    from tf_fsm.engine.orchestrator import TicketRun
    from tf_fsm.executors.base import Invocation


class CheckpointCommitsNothing(TicketWorktree):
    def after_phase(self, run: RunContext, attempt: int, phase: str) -> None:
        pass


class CheckpointCommitsBookkeeping(TicketWorktree):
    """`git add --all --force`: tf_fsm's `.tf/` and tk's `.tickets/` go in with the code."""

    def after_phase(self, run: RunContext, attempt: int, phase: str) -> None:
        git = self.ws.git
        git.run("add", "--all", "--force", "--", ".")
        message = f"tf-fsm: {run.ticket_id} attempt {attempt} {phase}"
        git.run("commit", "--no-verify", "--quiet", "-m", message, env=git.commit_env())


class ResumeDiscardsEdits(TicketWorktree):
    """Back to the last checkpoint without keeping what the interrupted phase had written."""

    def resume_attempt(self, run: RunContext, attempt: int, *, finished: bool) -> str | None:
        checkpoint.reset_tree(self.ws, "HEAD")
        return checkpoint.head(self.ws)


class RollbackDropsCommits(TicketWorktree):
    """A `reset` rollback that moves the branch back and keeps nothing under a ref."""

    def begin_attempt(self, run: RunContext, state: RetryState | None) -> str | None:
        previous = state.current if state else None
        if previous is not None and previous.status == "blocked":
            started = attempt_start(run, previous.attemptNumber)
            if started is not None:
                checkpoint.reset_tree(self.ws, started)
        return checkpoint.head(self.ws)


class AgentPathOutsideTree(TicketWorktree):
    """The agent is pointed at the store at the project root, outside its worktree."""

    def agent_path(self, store_path: Path) -> Path:
        return store_path


class NoPromptForTheAgent(TicketWorktree):
    """The ticket's artifacts and chain context are copied in, the prompt is not."""

    def before_invocation(self, run: RunContext, invocation: Invocation) -> None:
        context = self.store_dir / "chain-context.json"
        fill(self.store_dir, self.mirror, [context] if context.is_file() else [], self.path)


class OutputNeverReachesTheStore(TicketWorktree):
    def after_invocation(self, run: RunContext, invocation: Invocation) -> None:
        pass


class FollowsSymlinksBack(TicketWorktree):
    """Also takes back the files the agent linked to in its view of the ticket's files."""

    def after_invocation(self, run: RunContext, invocation: Invocation) -> None:
        super().after_invocation(run, invocation)
        for path in self.mirror.iterdir():
            if path.is_symlink() and path.is_file():
                shutil.copyfile(path, self.store_dir / path.name)


class BaselineFollowsTheBranch(TicketWorktree):
    """The gate's baseline moves with the ticket's own checkpoints."""

    def base_commit(self) -> str | None:
        return checkpoint.head(self.ws)


class DeletesUnmergedBranch(TicketWorktree):
    """Lets go of the worktree and the branch whatever the outcome."""

    def after_outcome(self, run: RunContext, status: OutcomeStatus) -> None:
        root = self.ws.root_git
        root.run("worktree", "remove", "--force", str(self.ws.tree))
        root.run("update-ref", "-d", f"refs/heads/{self.ws.branch}")


class KeepsMergedWorktree(TicketWorktree):
    def after_outcome(self, run: RunContext, status: OutcomeStatus) -> None:
        pass


class RunsInAnEmptyDirectory(TicketWorktree):
    """Agents and gates run in a directory that is not the checkout (a worktree gone)."""

    def empty(self) -> None:
        self.path = self.ws.tree.parent / f"{self.ws.ticket_id}.empty"
        self.path.mkdir(exist_ok=True)


def _broken(cls: type[TicketWorktree]) -> Kind:
    """The kind of a broken worktree: made by the run's own code, then given the broken class
    (so it holds whatever state the real one does), with the real one's declared design."""

    def open_broken(run: TicketRun) -> RunTree:
        tree = open_worktree(run)
        assert isinstance(tree, TicketWorktree)
        tree.__class__ = cls
        if isinstance(tree, RunsInAnEmptyDirectory):
            tree.empty()
        return tree

    return Kind(open_broken, commits=True, merges=True, mirrors=True)


MUTANTS = (
    CheckpointCommitsNothing, CheckpointCommitsBookkeeping, ResumeDiscardsEdits,
    RollbackDropsCommits, AgentPathOutsideTree, NoPromptForTheAgent, OutputNeverReachesTheStore,
    FollowsSymlinksBack, BaselineFollowsTheBranch, DeletesUnmergedBranch, KeepsMergedWorktree,
    RunsInAnEmptyDirectory,
)  # fmt: skip
BROKEN: dict[str, Kind] = {cls.__name__: _broken(cls) for cls in MUTANTS}
