"""The `workspace` section: how tickets get a git branch and worktree of their own, and how a
ticket whose gate passed is merged (docs/workspaces.md). pi-ticketflow's own keys for this
(`ralph.parallelWorktreesDir`, `parallelKeepWorktrees`, `parallelAutoMerge`,
`serialUseWorktree`) are in the `ralph` section, where pi-ticketflow reads them."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from typing import Literal

from pydantic import Field, field_validator

from tf_fsm.settings.roles import ROLES
from tf_fsm.settings.section import OsStr, Section

#: what `git check-ref-format` refuses in a branch name, as one pattern: control characters,
#: space, ~ ^ : ? * [ \\, "..", "@{", "//", a component starting with "." or ending ".lock"
_BAD_REF = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|(^|/)\.|\.lock(/|$)")

#: files an agent CLI reads from its working directory that a project often does not commit;
#: copied into a fresh worktree when the branch does not hold them
AGENT_FILES: tuple[str, ...] = (
    ".tf/config",
    ".tf/prompts",
    ".pi",
    ".claude",
    ".codex",
    "AGENTS.md",
    "CLAUDE.md",
)


#: the most worktrees a pool may keep: as many as ralph.parallelWorkers may be
MAX_POOL = 256


def check_ref_part(value: str, what: str) -> str:
    if _BAD_REF.search(value) or value.startswith(("-", "/")) or value.endswith((".", "@")):
        raise ValueError(f"{value!r} cannot be part of a git {what} name (git check-ref-format)")
    return value


class Conflicts(Section):
    """What the merge queue does when a passed ticket's rebase onto the base branch conflicts
    (docs/workspaces.md, "Conflicts")."""

    #: agent: an agent resolves it in the ticket's worktree (checked, gated, reviewed), else a
    #: person does; human: a person always does; rerun: as agent, and when the resolution
    #: fails the ticket's attempt is run again from the base branch's tip
    mode: Literal["agent", "human", "rerun"] = "agent"
    #: the role whose agent resolves, with its model on the attempt's escalation tier
    role: str = "fixer"
    #: resolutions tried per ticket before a person (or a rerun) takes over
    maxAttempts: int = Field(default=2, ge=1, le=10)
    #: the loop does not start a ticket beside a running one when their branches are known
    #: to change the same files (or conflicted in them before)
    avoidOverlap: bool = True

    @field_validator("role")
    @classmethod
    def _role(cls, value: str) -> str:
        if value not in ROLES:
            raise ValueError(f"{value!r} is not a role (one of {', '.join(ROLES)})")
        return value


#: the top directories of a project the worktrees may not be in, and whose they are
_NOT_IN = {".git": "git", ".tickets": "tk"}


def check_worktrees_dir(value: str) -> str:
    """`ralph.parallelWorktreesDir`: a directory of the worktrees' own inside the project,
    written relative to its root: not absolute, no `..`, not the root itself, not in `.git`
    or `.tickets` (docs/settings.md). Where it points on disk and what git tracks there is
    checked when a workspace is made (tf_fsm.workspace.place)."""
    path = PurePosixPath(value)
    parts = [part for part in path.parts if part != "."]
    if path.is_absolute():
        why = "is absolute"
    elif ".." in parts:
        why = "leads out of the project ('..')"
    elif not parts:
        why = "is the project root"
    elif (owner := _NOT_IN.get(parts[0].casefold())) is not None:
        why = f"is in {parts[0]}, {owner}'s own directory"
    else:
        return value
    raise ValueError(
        f"{value!r} {why}: the tickets' worktrees need a directory of their own inside the "
        "project, relative to its root (default '.tf/ralph/worktrees')"
    )


class Workspace(Section):
    #: auto: a worktree in a git repository (one ticket at a time: not when
    #: ralph.serialUseWorktree is set false), else shared; worktree or shared: always that
    mode: Literal["auto", "worktree", "shared"] = "auto"
    #: a ticket's branch is this prefix and its id
    branchPrefix: str = Field(default="tf/", min_length=1, max_length=100)
    #: the branch tickets start from and merge into; None: the branch checked out at the
    #: project root when the run starts
    baseBranch: str | None = Field(default=None, min_length=1, max_length=200)
    #: what the attempt after a blocked one starts from: keep (the blocked attempt's tree) or
    #: reset (the commit the blocked attempt started from; its commits stay under a ref)
    rollback: Literal["keep", "reset"] = "keep"
    mergeStrategy: Literal["merge", "squash", "rebase"] = "merge"
    #: copied from the project root into a fresh worktree when the branch does not hold them
    agentFiles: list[OsStr] = Field(default_factory=lambda: list(AGENT_FILES))
    #: finished tickets' worktrees kept for the next tickets (checked out again rather than
    #: removed and added); None: as many as ralph.parallelWorkers; 0: none kept
    poolSize: int | None = Field(default=None, ge=0, le=MAX_POOL)
    #: untracked or ignored paths a pooled worktree keeps for the next ticket (caches such
    #: as .venv or node_modules); everything else of the previous ticket is removed
    poolKeep: list[OsStr] = Field(default_factory=list)
    conflicts: Conflicts = Conflicts()

    @field_validator("agentFiles", "poolKeep")
    @classmethod
    def _inside(cls, entries: list[str]) -> list[str]:
        for entry in entries:
            path = PurePosixPath(entry)
            if not entry.strip() or path.is_absolute() or ".." in path.parts or "\\" in entry:
                raise ValueError(f"{entry!r} is not a path inside the project (relative, no '..')")
        return entries

    @field_validator("branchPrefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        # checked with a ticket id after it, as the branches are named: "/" (an empty first
        # component) and "tf//" (an empty one) are refused as git refuses those branches
        try:
            check_ref_part(f"{value}pt-1", "branch")
        except ValueError:
            raise ValueError(
                f"{value!r} followed by a ticket id is not a git branch name (git check-ref-format)"
            ) from None
        return value

    @field_validator("baseBranch")
    @classmethod
    def _base(cls, value: str | None) -> str | None:
        return value if value is None else check_ref_part(value, "branch")
