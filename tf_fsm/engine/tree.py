"""The project's own working tree as a run's tree (tf_fsm.engine.api.RunTree); the other one is
the ticket's git worktree (tf_fsm.engine.worktree)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tf_fsm.core.state import RetryState
    from tf_fsm.engine.api import OutcomeStatus, RunContext
    from tf_fsm.executors.base import Invocation


class SharedTree:
    """The project's working tree, shared by every ticket run in it: nothing is committed,
    set aside or merged (today's behaviour, and the only one outside a git repository)."""

    merges = False
    kept: str | None = None

    def __init__(self, root: Path) -> None:
        self.path = root

    def agent_path(self, store_path: Path) -> Path:
        return store_path

    def base_commit(self) -> str | None:
        """HEAD: tickets in the shared tree commit nothing, so it is what they started from."""
        from tf_fsm.workspace.git import Git
        from tf_fsm.workspace.mode import not_ready

        return None if not_ready(self.path) else Git(self.path).rev("HEAD")

    def before_invocation(self, run: RunContext, invocation: Invocation) -> None:
        pass

    def after_invocation(self, run: RunContext, invocation: Invocation) -> None:
        pass

    def before_commands(self, run: RunContext, attempt: int) -> None:
        pass

    def after_phase(self, run: RunContext, attempt: int, phase: str) -> None:
        pass

    def begin_attempt(self, run: RunContext, state: RetryState | None) -> str | None:
        return None

    def resume_attempt(self, run: RunContext, attempt: int, *, finished: bool) -> str | None:
        return None

    def after_outcome(self, run: RunContext, status: OutcomeStatus) -> None:
        pass
