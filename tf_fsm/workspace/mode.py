"""Which tree a ticket runs in: its own git worktree, or the project's working tree (shared).

In a git repository every ticket runs in a worktree of its own (`workspace.mode: "auto"`, the
default), one ticket at a time as much as side by side, unless something says otherwise:
`--no-worktree`, `workspace.mode: "shared"`, or, for one ticket at a time only, an explicit
`ralph.serialUseWorktree: false` (pi-ticketflow's key). Parallel tickets cannot share a tree.
Outside a repository that can have worktrees, and for hand-off tickets, the shared tree, with
one line saying why. A ticket that already has a workspace keeps running in it, so its work is
never split between two trees (docs/workspaces.md, "Modes").
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from tf_fsm.errors import WorkspaceError
from tf_fsm.settings.load import LoadedSettings, knowledge_dir
from tf_fsm.workspace.agent_files import agent_entries
from tf_fsm.workspace.git import Git, paths_of, pathspec_excluding, repository_root, under
from tf_fsm.workspace.model import BOOKKEEPING, branch_name, worktrees_dir

#: how many uncommitted paths the note names before "..."
SHOWN_PATHS = 3


@dataclass(frozen=True)
class Mode:
    worktree: bool
    #: what chose this tree, in a few words ("workspace.mode auto", "--no-worktree",
    #: "not a git repository"): --plan and --dry-run show it
    why: str
    #: the one line a run says about its tree, or None: why the tree is not the one asked
    #: for, or which uncommitted changes a new worktree starts without
    note: str | None = None
    #: the root's uncommitted files a new worktree starts without
    uncommitted: tuple[str, ...] = ()


class Repository:
    """What the choice reads from the project root's git, each part once and only when it is
    needed: why the root cannot have worktrees, the branches, the uncommitted changes."""

    def __init__(self, root: Path, settings: LoadedSettings) -> None:
        self.root, self.settings = root, settings

    @cached_property
    def problem(self) -> str | None:
        return not_ready(self.root)

    @cached_property
    def branches(self) -> frozenset[str]:
        listed = Git(self.root).out("for-each-ref", "--format=%(refname)", "refs/heads/")
        return frozenset(listed.splitlines())

    def has_branch(self, branch: str) -> bool:
        return self.problem is None and f"refs/heads/{branch}" in self.branches

    @cached_property
    def base(self) -> str:
        """The branch a new worktree starts from (raises WorkspaceError when there is none)."""
        from tf_fsm.workspace.worktree import base_branch

        return base_branch(self.root, self.settings)

    @cached_property
    def uncommitted(self) -> tuple[str, ...]:
        """The root's files that differ from its last commit (tracked files changed, untracked
        files) and that a new worktree does not get: tf_fsm's and tk's own files (`.tf/`,
        `.tickets/`, the knowledge and worktrees directories) are left out, and so are
        untracked agent files, which are copied into it (`workspace.agentFiles`)."""
        root, own = self.root, [*BOOKKEEPING]
        for place in (knowledge_dir(root, self.settings), worktrees_dir(root, self.settings)):
            if place.is_relative_to(root) and place != root:
                own.append(place.relative_to(root).as_posix())
        # No optional lock: a `git status` takes the root's index.lock to save its refresh,
        # and a merge another worker runs there meanwhile would fail on it ("File exists").
        listed = Git(self.root).out(
            "--no-optional-locks",
            "status",
            "--porcelain=v1",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--",
            *pathspec_excluding(own),
        )
        copied = agent_entries(self.settings)
        found = []
        for entry in paths_of(listed):
            code, path = entry[:2], entry[3:]
            if not (code == "??" and under(path, copied)):
                found.append(path)
        return tuple(found)


def choose(
    root: Path,
    settings: LoadedSettings,
    ticket_id: str,
    *,
    explicit: bool | None,
    parallel: bool,
    shared_attempt: int | None = None,
    repo: Repository | None = None,
) -> Mode:
    """The tree `ticket_id` runs in. `explicit`: --worktree (True) or --no-worktree (False);
    `parallel`: a worker of a loop that runs several tickets at once; `shared_attempt`: the
    ticket's open attempt, when it began in the project's tree (it finishes there unless the
    flag or workspace.mode says otherwise); `repo`: the root as already read (by a caller
    choosing for many tickets)."""
    repo = repo or Repository(root, settings)
    return _decide(repo, explicit, parallel, ticket_id, shared_attempt)


def for_loop(
    root: Path,
    settings: LoadedSettings,
    *,
    explicit: bool | None,
    workers: int,
    repo: Repository | None = None,
) -> Mode:
    """Whether a loop's tickets run in worktrees (each worker still chooses for its own
    ticket, the same way): the loop then runs untagged tickets side by side. The choice for a
    ticket that has no workspace yet."""
    return _decide(repo or Repository(root, settings), explicit, workers > 1, None, None)


def _decide(
    repo: Repository,
    explicit: bool | None,
    parallel: bool,
    ticket_id: str | None,
    shared_attempt: int | None,
) -> Mode:
    """The one decision (docs/workspaces.md, "How the mode is chosen"); `ticket_id` None: a
    loop's tickets, none of which has a workspace yet."""
    settings = repo.settings
    wanted, who, firm = _asked(settings, explicit, parallel)
    if ticket_id is not None and repo.has_branch(branch := branch_name(settings, ticket_id)):
        if not wanted and firm:
            raise WorkspaceError(
                f"{ticket_id} has a workspace (branch {branch}); {who} would run it in the "
                "project's tree and split its work: finish it, or remove it with "
                f"`tf-fsm workspaces prune {ticket_id} --force`"
            )
        return Mode(True, f"it has a workspace (branch {branch})")  # its work goes on there
    if not wanted:
        return Mode(False, who)
    handoff = settings.settings.executor.kind == "handoff"
    if firm and handoff:
        raise WorkspaceError(
            f"{who} asks for a worktree, but executor.kind handoff has a person write the "
            "artifacts in the project's tree; use the shared tree for hand-off tickets"
        )
    if firm and repo.problem is not None:
        what = "worktrees" if ticket_id is None else "a worktree"
        raise WorkspaceError(f"{who} asks for {what}, but {repo.problem}")
    if repo.problem is not None or handoff:
        why = repo.problem or "executor.kind handoff"
        return Mode(False, why, f"{why}: tickets run in the project's working tree")
    if shared_attempt is not None and not firm:
        why = f"attempt {shared_attempt} began in the project's tree"
        return Mode(False, why, f"{why}: it finishes there; a new attempt runs in a worktree")
    left_out = repo.uncommitted
    note = left_out_note(left_out, "the ticket's" if ticket_id else "each ticket's")
    return Mode(True, who, note, left_out)


def _asked(
    settings: LoadedSettings, explicit: bool | None, parallel: bool
) -> tuple[bool, str, bool]:
    """(worktree wanted, who asked, firm): firm when the flag or `workspace.mode` asked, so a
    tree that cannot be had is refused rather than replaced."""
    if explicit is not None:
        return explicit, "--worktree" if explicit else "--no-worktree", True
    mode = settings.settings.workspace.mode
    if mode != "auto":
        return mode == "worktree", f"workspace.mode {mode}", True
    if parallel:
        return True, "workspace.mode auto: parallel tickets cannot share a tree", False
    serial = settings.settings.ralph.serialUseWorktree
    if serial is None:  # not set: the default
        return True, "workspace.mode auto", False
    return serial, f"ralph.serialUseWorktree {str(serial).lower()}", False


def left_out_note(paths: tuple[str, ...], whose: str) -> str | None:
    """The line saying that a new worktree starts without the root's uncommitted files."""
    if not paths:
        return None
    count = len(paths)
    shown = ", ".join(paths[:SHOWN_PATHS]) + (", ..." if count > SHOWN_PATHS else "")
    files, stay, them = ("file", "stays", "it") if count == 1 else ("files", "stay", "them")
    return (
        f"{whose} worktree starts from the last commit, without the {count} uncommitted "
        f"{files} in the project's tree ({shown}), which {stay} there untouched; commit {them} "
        "for tickets to see them"
    )


def not_ready(root: Path) -> str | None:
    """Why the project cannot have worktrees, or None: it must be the top of a git working
    tree with at least one commit."""
    if not any((d / ".git").exists() for d in (root, *root.resolve().parents)):
        return "not a git repository"  # known without starting git
    top = repository_root(root)
    if top is None:
        return "not a git repository"
    if top.resolve() != root.resolve():
        return f"{root} is inside the git working tree {top}, not at its top"
    if Git(root).rev("HEAD") is None:
        return "the git repository has no commit yet"
    return None
