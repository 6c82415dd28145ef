"""The merge queue's git operations (docs/workspaces.md, "Merging"): a ticket's branch merged
into the base branch one ticket at a time across processes (`merge_lock`), exactly once
however often it is run or killed.

The merge is made where the base branch is checked out, normally the project root, by the
user's own git with the user's configuration and hooks. Where the base branch is checked out
nowhere, it is made in a temporary detached worktree (`.tf/ralph/merging/<id>/`) and the
branch is moved by a compare-and-swap. Its commit holds the tk ticket file and carries the
trailers `Tf-Ticket: <id>` and `Tf-Merged-Tip: <the ticket branch's tip>`, by which
`merged_commit` finds it again: a rerun never merges twice. While a merge is under way in a
checkout, `.tf/ralph/merging/<id>.json` says so, and `recover` undoes what a killed one left.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from tf_fsm.errors import GitError, TfFsmError, WorkspaceError
from tf_fsm.fs.atomic import atomic_write_text, exclusive, make_dirs
from tf_fsm.workspace.checkpoint import commit_message
from tf_fsm.workspace.git import Git, literal, paths_of, said
from tf_fsm.workspace.locks import worktree_registry
from tf_fsm.workspace.merge_note import note_path, temp_tree, write_note
from tf_fsm.workspace.model import MERGED_TIP_TRAILER, TICKET_TRAILER, Workspace
from tf_fsm.workspace.rebase import Rebased as Rebased  # re-exported: the queue's interface
from tf_fsm.workspace.rebase import (
    branch_tips,
    discard_worktree,
    listing,
    overwritten,
    undo_merge,
)
from tf_fsm.workspace.rebase import rebase_onto_base as rebase_onto_base  # re-exported too

Strategy = Literal["merge", "squash", "rebase"]
#: how each strategy begins where the base branch is checked out. `--no-autostash`: the
#: user's unstaged changes stay in their files, untouched, instead of being stashed around it
_BEGIN: dict[str, tuple[str, ...]] = {
    "merge": ("merge", "--no-ff", "--no-commit", "--no-autostash"),
    "squash": ("merge", "--squash", "--no-autostash"),
    "rebase": ("merge", "--ff-only", "--no-autostash"),
}
#: an operation left unfinished in a checkout (its file in the git directory): what it is and
#: how its owner ends it
_UNFINISHED = {
    "MERGE_HEAD": ("merge", "git merge --abort"),
    "rebase-merge": ("rebase", "git rebase --abort"),
    "rebase-apply": ("rebase", "git rebase --abort"),
    "CHERRY_PICK_HEAD": ("cherry-pick", "git cherry-pick --abort"),
    "REVERT_HEAD": ("revert", "git revert --abort"),
}


@dataclass(frozen=True)
class Merged:
    """What `merge` did."""

    commit: str  # the commit of the base branch that merged the ticket
    base_before: str  # the base branch's tip before the merge
    already: bool  # merged before this call: nothing was done


@dataclass(frozen=True)
class _Job:
    ws: Workspace
    strategy: Strategy
    tip: str  # the ticket branch's tip being merged
    base: str  # the base branch's tip it is merged onto
    text: str  # the commit's message, trailers included
    tk_file: str
    tk_text: str


@contextmanager
def merge_lock(root: Path) -> Iterator[None]:
    """Hold the merge queue: one ticket merges at a time, across processes (a flock on
    `.tf/ralph/merge.lock`, released however its holder ends)."""
    lock = root / ".tf" / "ralph" / "merge.lock"
    make_dirs(lock.parent, within=root)
    with exclusive(lock, within=root):
        yield


# -- merged already? -----------------------------------------------------------------------


def merged_commit(ws: Workspace, since: str | None = None) -> str | None:
    """The commit by which the merge queue merged the ticket branch's current tip into the
    base branch: the one carrying both `Tf-Ticket: <id>` and `Tf-Merged-Tip: <tip>` (only
    among the commits after `since`, when given). None when there is none, also when the base
    branch's history holds the tip some other way (merged by a person; or a branch with no
    commit of its own, whose tip is a commit the base already had, or that another ticket's
    merge names): the ticket's own commit, which holds its tk close, is still to be made."""
    tip, base = branch_tips(ws)
    return _queue_merge(ws.root_git, ws.ticket_id, tip, base, since)


def _queue_merge(git: Git, ticket: str, tip: str, base: str, since: str | None) -> str | None:
    # The commit naming the tip was made after it, so it is never in the tip's own history:
    # `^tip` keeps the search to the commits since the branch left the base, however long
    # the base's history is. The grep narrows; the trailers' whole values decide: two
    # tickets' branches may share a tip, and `Tf-Ticket: pt-1` is a prefix of pt-10's.
    span = f"{since}..{base}" if since else base
    values = "%x1e".join(
        f"%(trailers:key={key},valueonly,separator=%x1f)"
        for key in (TICKET_TRAILER, MERGED_TIP_TRAILER)
    )
    found = git.out(
        "log",
        f"--format=%H%x1e{values}%x1d",
        "--no-show-signature",
        "--fixed-strings",
        f"--grep={MERGED_TIP_TRAILER}: {tip}",
        f"^{tip}",
        span,
        "--",
    )
    for record in found.split("\x1d"):
        sha, _, rest = record.strip("\n").partition("\x1e")
        tickets, _, tips = rest.partition("\x1e")
        if ticket in tickets.split("\x1f") and tip in tips.split("\x1f"):
            return sha
    return None


def merge_of(git: Git, tip: str, base: str, since: str | None = None) -> str | None:
    """The commit of `base` (a commit) that holds `tip`'s work, whoever merged it: one whose
    `Tf-Merged-Tip` trailer names it (a squash leaves no other trace), else, when the tip is
    in the base's history, the commit of its first-parent line that brought it in. What a
    branch may be deleted after (tf_fsm.workspace.worktree); whether the merge queue merged
    the ticket is `merged_commit`'s question."""
    span = f"{since}..{base}" if since else base
    found = git.out(
        "log",
        "-z",
        "--max-count=1",
        "--format=%H",
        "--no-show-signature",
        "--fixed-strings",
        f"--grep={MERGED_TIP_TRAILER}: {tip}",
        f"^{tip}",
        span,
        "--",
    )
    if found:
        return paths_of(found)[0]
    if base == tip or not git.is_ancestor(tip, base):
        return None
    lines = git.out(
        "rev-list", "--first-parent", "--ancestry-path", "--parents", f"{tip}..{base}"
    ).splitlines()
    oldest = lines[-1].split() if lines else [tip, tip]
    # a first parent that is the tip: the base was fast-forwarded to it
    return tip if oldest[1] == tip else oldest[0]


# -- the merge -----------------------------------------------------------------------------


def merge(ws: Workspace, *, strategy: Strategy, message: str, tk_file: str, tk_text: str) -> Merged:
    """Merge the ticket's branch, which must hold the base branch's tip (`rebase_onto_base`
    first), into the base branch, in one commit with the tk ticket file `tk_file` (relative to
    the root) written as `tk_text`: `merge` a merge commit, `squash` one commit, `rebase` a
    fast-forward to the ticket's commits plus one commit. Nothing is done when the queue
    merged the tip already (`merged_commit`; `Merged.already`)."""
    if strategy not in _BEGIN:
        raise ValueError(f"unknown merge strategy {strategy!r}")
    _check_tk_file(tk_file)
    tip, base = branch_tips(ws)
    # One question answers both whether the branch holds the base tip (the base is one of
    # their common ancestors) and, when it does, that the queue never merged it: its merge
    # would be a commit of the base after the tip.
    bases = ws.root_git.run("merge-base", "--all", tip, base, check=False).stdout.split()
    holds_base = base in bases
    found = None if holds_base else _queue_merge(ws.root_git, ws.ticket_id, tip, base, None)
    if found is not None:
        return Merged(found, base, already=True)
    if (noted := note_path(ws.root, ws.ticket_id)).exists():
        raise WorkspaceError(
            f"the merge of {ws.ticket_id} that {noted} describes did not finish and was not "
            "recovered: recover it before merging again"
        )
    if not holds_base:
        raise WorkspaceError(
            f"{ws.branch} does not hold the tip of {ws.base_branch} ({base[:12]}): rebase it "
            f"onto {ws.base_branch} before merging"
        )
    text = commit_message(message, ws.ticket_id, {MERGED_TIP_TRAILER: tip})
    job = _Job(ws, strategy, tip, base, text, tk_file, tk_text)
    checkout = _checkout_of(ws)
    commit = _merge_at(job, Git(checkout)) if checkout else _merge_detached(job)
    return Merged(commit, base, already=False)


def _check_tk_file(tk_file: str) -> None:
    path = PurePosixPath(tk_file)
    if not tk_file or path.is_absolute() or ".." in path.parts:
        raise WorkspaceError(
            f"the tk ticket file {tk_file!r} must be a path inside the project, relative to "
            "its root"
        )


def _checkout_of(ws: Workspace) -> Path | None:
    """The working tree that has the base branch checked out, or None: the root, when its
    HEAD says so (read from its file: the usual case asks git nothing), else as git lists
    them (the main working tree first)."""
    own, common = ws.root_git.dirs()
    if own == common and ws.root_git.head_branch() == ws.base_branch:
        return ws.root
    listing = ws.root_git.out("worktree", "list", "--porcelain", "-z")
    ref, tree = f"refs/heads/{ws.base_branch}", None
    for field in listing.split("\0"):
        key, _, value = field.partition(" ")
        if key == "worktree":
            tree = Path(value)
        elif key == "branch" and value == ref and tree is not None:
            if not tree.is_dir():
                raise WorkspaceError(
                    f"{ws.base_branch} is checked out in {tree}, which does not exist any "
                    "more: remove that worktree (git worktree prune), then merge again"
                )
            return tree
    return None


def _merge_at(job: _Job, git: Git) -> str:
    """The merge in the checkout that has the base branch: begun, concluded by a commit with
    the tk file, and undone when the commit is refused (a hook)."""
    own = _refuse_unready(job, git)
    _write_note(job, git.cwd)
    try:
        _begin(job, git)
        commit = _conclude(job, git, own)
    except WorkspaceError:  # git refused to begin: it changed nothing
        note_path(job.ws.root, job.ws.ticket_id).unlink()
        raise
    except TfFsmError as exc:
        forwarded = job.strategy == "rebase" and git.rev("HEAD") == job.tip
        notes = undo_merge(git, own, job.tip, [job.tk_file])
        note_path(job.ws.root, job.ws.ticket_id).unlink()
        raise _failed(job, git, exc, forwarded, notes) from None
    note_path(job.ws.root, job.ws.ticket_id).unlink()
    return commit


def _merge_detached(job: _Job) -> str:
    """The merge in a temporary detached worktree of the base tip; the base branch is then
    moved to its commit only if it still is where it was (compare-and-swap)."""
    ws, git = job.ws, job.ws.root_git
    tmp = temp_tree(ws.root, ws.ticket_id)
    common = git.dirs()[1]
    discard_worktree(git, common, tmp, ws.root)
    make_dirs(tmp.parent, within=ws.root)
    with worktree_registry(common):
        git.run("worktree", "add", "--quiet", "--force", "--detach", str(tmp), job.base)
    try:
        there = Git(tmp, git.env)
        try:
            _begin(job, there)
            commit = _conclude(job, there, there.git_dir())
        except GitError as exc:
            raise _failed(job, there, exc, False, []) from None
        moved = git.run(
            "update-ref",
            "-m",
            f"tf-fsm: merge {ws.branch}",
            f"refs/heads/{ws.base_branch}",
            commit,
            job.base,
            check=False,
        )
        if moved.exit_code != 0:
            raise WorkspaceError(
                f"{ws.base_branch} moved while {ws.branch} was being merged into it "
                f"({said(moved)}); it was left as it is: merge again"
            )
        return commit
    finally:
        discard_worktree(git, common, tmp, ws.root)


def _refuse_unready(job: _Job, git: Git) -> Path:
    """The checkout's git directory, once it is sure the merge can begin there: no operation
    of somebody else's unfinished, nothing staged (the merge's commit would take it)."""
    own = git.git_dir()
    for name, (operation, end) in _UNFINISHED.items():
        if (own / name).exists():
            raise WorkspaceError(
                f"{git.cwd} has an unfinished {operation} ({own / name}): finish it or end it "
                f"({end}), then merge {job.ws.ticket_id} again"
            )
    staged = paths_of(git.out("diff", "--cached", "--name-only", "-z", "--no-renames"))
    if staged:
        raise WorkspaceError(
            f"{git.cwd} has staged changes ({listing(staged)}): the commit merging "
            f"{job.ws.branch} would take them in; commit them or unstage them "
            "(git restore --staged <file>), then merge again"
        )
    return own


def _begin(job: _Job, git: Git) -> None:
    """Begin the strategy's merge of the tip. WorkspaceError when git refuses because the
    user's local changes would be overwritten (it changed nothing then)."""
    result = git.run(*_BEGIN[job.strategy], job.tip, check=False)
    if result.exit_code == 0:
        return
    files = overwritten(result)
    if files:
        raise WorkspaceError(
            f"cannot merge {job.ws.branch} into {job.ws.base_branch} in {git.cwd}: it would "
            f"overwrite local changes in {listing(files)}; commit, stash or move them, then "
            "merge again"
        )
    raise GitError(result.argv[1:], git.cwd, result.exit_code, said(result))


def _conclude(job: _Job, git: Git, own: Path) -> str:
    """Write and stage the tk file and commit, with the user's hooks (docs/workspaces.md,
    "Hooks"); the new commit. A merge commit's `pre-merge-commit` hook is run first, as `git
    merge` runs it before a merge commit it makes itself (`git commit` does not)."""
    if job.strategy == "squash":  # so that a squash in progress is known as this merge's
        atomic_write_text(own / "SQUASH_MSG", job.text, within=own)
    atomic_write_text(git.cwd / job.tk_file, job.tk_text, within=git.cwd)
    git.run("add", "--", *literal([job.tk_file]))
    users = git.with_hooks()
    if job.strategy == "merge" and users.hook_present("pre-merge-commit"):
        users.run("hook", "run", "--ignore-missing", "pre-merge-commit")
    users.run(
        "commit",
        "--quiet",
        "--allow-empty",
        "--cleanup=whitespace",
        "-F",
        "-",
        stdin=job.text,
        env=git.commit_env(),
    )
    return git.rev("HEAD") or git.out("rev-parse", "HEAD")


def _failed(
    job: _Job, git: Git, exc: TfFsmError, forwarded: bool, notes: list[str]
) -> WorkspaceError:
    """What the user is told when the merge failed once begun: git's words (a hook's), and
    where the base branch is (`forwarded`: a rebase merge's fast-forward, never undone)."""
    what = exc.said if isinstance(exc, GitError) and exc.said else str(exc)
    if forwarded:
        after = (
            f"{job.ws.base_branch} was fast-forwarded to {job.ws.branch}'s commits; only the "
            f"commit of {job.tk_file} is missing: merging again makes it"
        )
    else:
        after = f"the merge was undone: {job.ws.base_branch} is unchanged"
    lines = [f"merging {job.ws.branch} into {job.ws.base_branch} in {git.cwd} failed: {what}"]
    return WorkspaceError("\n  ".join([*lines, after, *notes]))


def _write_note(job: _Job, checkout: Path) -> None:
    """Note, before the checkout is touched, what `recover` needs to undo this merge."""
    note = {
        "ticket": job.ws.ticket_id,
        "tip": job.tip,
        "base": job.base,
        "checkout": str(checkout),
        "strategy": job.strategy,
        "tkFile": job.tk_file,
    }
    write_note(job.ws.root, job.ws.ticket_id, note)
