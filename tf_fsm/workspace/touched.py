"""Which files each ticket's branch changes, for the backlog loop's rule that keeps apart two
tickets that would conflict (docs/workspaces.md, "Fewer conflicts to begin with").

One `git for-each-ref` lists every ticket branch's tip; each branch's files come from one
`git diff --name-only` against where it left the base branch, computed once per pair of tips
and then remembered, so a loop asks git again only about a branch that moved.
"""

from __future__ import annotations

from pathlib import Path

from tf_fsm.errors import WorkspaceError
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.workspace.git import Git, paths_of
from tf_fsm.workspace.worktree import base_branch


class BranchFiles:
    """The files the ticket branches change against the base branch, as of `refresh`."""

    def __init__(self, root: Path, settings: LoadedSettings) -> None:
        self.git = Git(root)
        self.settings = settings
        self.prefix = settings.settings.workspace.branchPrefix
        self._tips: dict[str, str] = {}  # ticket -> its branch's tip
        self._base = ""
        self._files: dict[tuple[str, str], frozenset[str]] = {}

    def refresh(self) -> None:
        """Read the branches' tips and the base branch's again (`base_branch`, as a workspace
        names it: `workspace.baseBranch`, else the branch checked out at the root)."""
        ref = f"refs/heads/{self.prefix}"
        out = self.git.out("for-each-ref", "--format=%(objectname) %(refname)", ref)
        tips = {}
        for line in out.splitlines():
            sha, _, name = line.partition(" ")
            tips[name.removeprefix(ref)] = sha
        self._tips = tips
        try:
            base = base_branch(self.git.cwd, self.settings)
        except WorkspaceError:  # none to compare with: no branch is known to change anything
            self._base = ""
        else:
            self._base = self.git.rev(f"refs/heads/{base}") or ""

    def of(self, ticket_id: str) -> frozenset[str]:
        """The files `ticket_id`'s branch changes since it left the base branch (none without
        a branch)."""
        tip = self._tips.get(ticket_id)
        if tip is None or not self._base:
            return frozenset()
        key = (tip, self._base)
        if key not in self._files:
            out = self.git.run("diff", "--name-only", "-z", f"{self._base}...{tip}", check=False)
            self._files[key] = (
                frozenset(paths_of(out.stdout)) if out.exit_code == 0 else frozenset()
            )
        return self._files[key]

    def has_branch(self, ticket_id: str) -> bool:
        return ticket_id in self._tips
