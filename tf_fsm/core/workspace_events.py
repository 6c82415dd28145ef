"""The journal's events of a ticket's git workspace (docs/workspaces.md): its branch and
worktree made, the checkpoint commits of its phases, work set aside under a ref, and the
steps of its merge into the base branch. Each names the commits, so a run killed between a
git command and its record is told apart from one that never ran it."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tf_fsm.core.journal import Event


class WorkspaceReady(Event):
    """The ticket's branch and worktree exist: made now, found, or repaired (`notes`)."""

    event: Literal["WorkspaceReady"] = "WorkspaceReady"
    branch: str
    base: str
    path: str
    head: str
    notes: list[str] = Field(default_factory=list)
    #: the base branch's commit the branch was made from, when it was made now: where the
    #: ticket's own commits begin (the merge queue rebases only those)
    fork: str | None = None


class CheckpointCommitted(Event):
    """The tree a phase left, committed on the ticket's branch."""

    event: Literal["CheckpointCommitted"] = "CheckpointCommitted"
    phase: str
    sha: str


class WorkSetAside(Event):
    """Work moved off the ticket's branch or tree and kept under `ref`: a blocked attempt's
    commits before a `reset` rollback, or an interrupted phase's uncommitted edits."""

    event: Literal["WorkSetAside"] = "WorkSetAside"
    ref: str
    reason: str
    head: str  # where the branch stands afterwards
    #: set when the branch now starts again from the base branch's tip (a merge conflict with
    #: workspace.conflicts.mode rerun): that commit, where the ticket's own commits begin
    fork: str | None = None


class MergeHeld(Event):
    """The attempt's gate passed, and its merge waits for `tf-fsm merge`
    (`ralph.parallelAutoMerge` is false): the ticket is not closed in tk until it merges."""

    event: Literal["MergeHeld"] = "MergeHeld"
    base: str  # the base branch it will merge into
    tip: str  # the branch's tip when its gate passed


class MergeStarted(Event):
    event: Literal["MergeStarted"] = "MergeStarted"
    base: str
    baseSha: str
    tip: str
    strategy: str


class MergeRebased(Event):
    """The base moved since the branch was made: the branch was rebased onto it (the gate
    commands then run again on the rebased tree). `checkpoints`: each of the branch's commits
    before the rebase -> the commit it became (the old ones are on no branch any more)."""

    event: Literal["MergeRebased"] = "MergeRebased"
    baseSha: str
    oldTip: str
    newTip: str
    checkpoints: dict[str, str] = Field(default_factory=dict)


class BranchRebased(Event):
    """A new attempt starts on the base branch's tip: the ticket's branch was rebased onto it
    (no agent, no conflict), so its work goes on on top of what merged meanwhile."""

    event: Literal["BranchRebased"] = "BranchRebased"
    baseSha: str
    oldTip: str
    newTip: str
    checkpoints: dict[str, str] = Field(default_factory=dict)  # as MergeRebased's


class MergeCompleted(Event):
    event: Literal["MergeCompleted"] = "MergeCompleted"
    commit: str
    base: str
    #: found already merged (a run killed after the merge and before this record)
    already: bool = False


class MergeRefused(Event):
    """The ticket was not merged: a rebase conflict or a gate failing after the rebase
    (failure class merge_conflict), or the base checkout is not in a state to merge into."""

    event: Literal["MergeRefused"] = "MergeRefused"
    failureClass: str
    files: list[str] = Field(default_factory=list)
    reason: str


class WorkspaceRemoved(Event):
    event: Literal["WorkspaceRemoved"] = "WorkspaceRemoved"
    path: str
    branchDeleted: bool


class ResolutionStarted(Event):
    """The merge queue's rebase conflicted and an agent resolves it in the ticket's worktree
    (the `number`-th resolution of the ticket since its retries were last reset)."""

    event: Literal["ResolutionStarted"] = "ResolutionStarted"
    number: int = Field(ge=1)
    role: str
    model: str
    baseSha: str  # the base branch's tip the branch is rebased onto
    oldTip: str  # the branch's tip before the rebase, where a failed resolution puts it back
    files: dict[str, str]  # conflicting path -> kind of conflict (content, modify/delete...)


class ResolutionFinished(Event):
    """How a resolution ended: `passed` (its rebase completed with no conflict marker left, the
    required gates and the review of the resolution passed: the merge follows), else why not,
    and the ref the agent's work was kept under (the branch is back at its old tip)."""

    event: Literal["ResolutionFinished"] = "ResolutionFinished"
    number: int = Field(ge=1)
    passed: bool
    reason: str
    ref: str | None = None
    newTip: str | None = None
