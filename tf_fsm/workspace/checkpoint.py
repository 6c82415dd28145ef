"""The commits tf_fsm makes on a ticket's branch: a checkpoint after each phase that changed
the worktree, and the refs that keep work reachable when the branch or the worktree is moved
back (an interrupted phase's half-made edits, a blocked attempt's commits).

Nothing here commits tf_fsm's own state or tk's ticket files (`BOOKKEEPING`), nor the agent
files copied into the worktree from the project root (`Workspace.copied`).
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from tf_fsm.errors import GitError, WorkspaceError
from tf_fsm.fs.atomic import atomic_write_bytes
from tf_fsm.workspace.git import (
    Git,
    literal,
    paths_of,
    pathspec_excluding,
    said,
    under,
)
from tf_fsm.workspace.locks import clear_stale_locks
from tf_fsm.workspace.model import BOOKKEEPING, TICKET_TRAILER, Workspace

#: a trailer key as git's interpret-trailers reads one: a token of letters, digits and dashes
_TRAILER_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]*")
#: the temporary index a set-aside commit is built in, in the worktree's own git directory
_ASIDE_INDEX = "tf-fsm-aside.index"


def checkpoint(ws: Workspace, message: str, trailers: Mapping[str, str]) -> str | None:
    """Commit every change in the worktree (new, modified, deleted, renamed files) on the
    ticket's branch, except the bookkeeping and copied paths; the new commit's sha, or None
    when nothing changed. A merge in progress in the worktree is completed by the commit.
    It runs no hook (git.Git): a checkpoint is tf_fsm's own record, the project's checks are
    the gates."""
    git = ws.git
    own, _common = _clear_locks(ws)
    merging = (own / "MERGE_HEAD").exists()
    # A merge's own result in the bookkeeping paths stays in the merge commit.
    if not stage(git, excluded(ws), keep_bookkeeping=merging) and not merging:
        return None
    _require_branch(ws, own, "commit a checkpoint")
    text = commit_message(message, ws.ticket_id, trailers)
    git.run(
        "commit",
        "--quiet",
        "--cleanup=whitespace",
        "-F",
        "-",
        stdin=text,
        env=git.commit_env(),
    )
    return head(ws)


def head(ws: Workspace) -> str:
    """The commit checked out in the ticket's worktree (git's own error when there is none)."""
    return ws.git.rev("HEAD") or ws.git.out("rev-parse", "--verify", "HEAD^{commit}")


def save_ref(ws: Workspace, name: str, sha: str) -> str:
    """Point `refs/tf/<id>/<name>` at `sha` and return the ref. A ref of that name that holds
    another commit is never overwritten: `<name>-2`, `<name>-3`... is used instead."""
    git = ws.root_git  # refs are shared by every worktree; the ticket's may be gone
    taken = _ticket_refs(git, ws.ref(""))
    for n in itertools.count(1):
        ref = ws.ref(name if n == 1 else f"{name}-{n}")
        held = taken.get(ref)
        if held == sha:
            return ref
        if held is not None:
            continue
        # "" as the old value: create only, so a ref another process made meanwhile is kept
        args = ("update-ref", "-m", f"tf-fsm: keep {name}", ref, sha, "")
        result = git.run(*args, check=False)
        if result.exit_code == 0:
            return ref
        if git.rev(ref) is None:  # not taken meanwhile: the name itself is refused
            raise GitError(args, git.cwd, result.exit_code, said(result))
    raise AssertionError("unreachable")  # pragma: no cover


def set_aside(ws: Workspace, name: str) -> str | None:
    """Save the worktree's uncommitted changes (tracked changes and untracked files that are
    not ignored, bookkeeping and copied paths left out) as a commit on HEAD kept under
    `save_ref(name)`, without moving the branch; then reset the worktree to HEAD. The ref, or
    None when there was nothing to save (nothing is touched then)."""
    ref = keep_uncommitted(ws, name)
    if ref is not None:
        reset_tree(ws, "HEAD")
    return ref


def reset_to(ws: Workspace, sha: str, keep_as: str, *, bookkeeping: bool = False) -> str | None:
    """Move the ticket's branch and worktree to `sha` (a blocked attempt's rollback; the undo
    of a failed resolution; a rerun from the base's tip). Uncommitted changes are kept first
    under `<keep_as>-uncommitted`, the branch's tip under `keep_as`; the ref keeping the old
    tip is returned, None when the branch was at `sha`. `bookkeeping`: see `reset_tree`."""
    git = ws.git
    _require_branch(ws, git.git_dir(), f"move it back to {sha[:12]}")
    target = git.rev(sha)
    if target is None:
        raise WorkspaceError(f"cannot reset {ws.branch} to {sha}: no such commit")
    tip = head(ws)
    keep_uncommitted(ws, f"{keep_as}-uncommitted")
    kept = save_ref(ws, keep_as, tip) if tip != target else None
    reset_tree(ws, target, bookkeeping=bookkeeping)
    return kept


def keep_uncommitted(ws: Workspace, name: str) -> str | None:
    """The uncommitted changes of the worktree as a commit on HEAD under `save_ref(name)`,
    built in a temporary index: the branch, the index and the files stay as they are."""
    git = ws.git
    own, _common = _clear_locks(ws)
    if not _uncommitted(ws):
        return None
    index = own / _ASIDE_INDEX
    try:
        # Start from the worktree's own index: its stat data spares hashing every file again.
        # Its age goes with it (taken first: an index written meanwhile only looks older):
        # git re-reads each file not older than the index, whose stat data cannot tell.
        age = (own / "index").stat()
        data: bytes | None = (own / "index").read_bytes()
    except FileNotFoundError:
        data = None
    aside = Git(ws.tree, {**git.env, "GIT_INDEX_FILE": str(index)})
    try:
        if data is None:
            aside.run("read-tree", "HEAD")
        else:
            atomic_write_bytes(index, data, within=own, durable=False)
            os.utime(index, ns=(age.st_atime_ns, age.st_mtime_ns))
        if not stage(aside, excluded(ws), keep_bookkeeping=False):
            return None
        tree = aside.out("write-tree")
    finally:
        index.unlink(missing_ok=True)
    text = commit_message(f"tf-fsm: uncommitted changes kept as {name}", ws.ticket_id, {})
    # Dated as the commit it sits on: the same changes kept twice (a run killed after keeping
    # them and before resetting the tree) make the same commit, kept under the same ref.
    when = git.out("show", "--no-patch", "--format=%cI", "HEAD")
    env = {**git.commit_env(), "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when}
    sha = git.run("commit-tree", tree, "-p", "HEAD", "-F", "-", stdin=text, env=env).stdout
    return save_ref(ws, name, sha.strip())


def _uncommitted(ws: Workspace) -> bool:
    """Could the worktree hold a change outside the bookkeeping and copied paths? One
    read-only look (no index refresh written): untracked files that are not ignored, and
    tracked files changed in the tree or the index. A yes may still come to nothing kept
    (a change staged and then undone in the tree); a no is sure."""
    listed = ws.git.run(
        "status",
        "--porcelain",
        "-z",
        "--untracked-files=all",
        "--ignore-submodules=none",
        "--",
        *pathspec_excluding(excluded(ws)),
        env={"GIT_OPTIONAL_LOCKS": "0"},
    )
    return listed.stdout != ""


def reset_tree(ws: Workspace, target: str, *, bookkeeping: bool = False) -> None:
    """Point HEAD (the ticket's branch) and the index at `target`, restore the tracked files
    and remove untracked files that are not ignored; the bookkeeping and copied paths are
    left as they are, unless `bookkeeping`: their tracked files go back as `target` has them
    too (after the merge queue moved the branch, the worktree's tk files and committed
    settings are the moved commit's, nobody's edits: tk edits made in the worktree were set
    aside before the merge began). Ends a merge in progress."""
    git, spec = ws.git, pathspec_excluding(excluded(ws))
    if bookkeeping:
        git.run("reset", "--quiet", "--hard", target)
    else:
        git.run("reset", "--quiet", target)
        restored = git.run("restore", "--worktree", "--", *spec, check=False)
        # a tree with no file outside the excluded paths has nothing to restore: git says so
        if restored.exit_code != 0 and "did not match any file" not in restored.stderr:
            raise GitError(restored.argv[1:], git.cwd, restored.exit_code, said(restored))
    git.run("clean", "-f", "-d", "--quiet", "--", *spec)


def stage(git: Git, paths_out: Sequence[str], *, keep_bookkeeping: bool) -> list[str]:
    """Stage every change of the tree but `paths_out`; what the index now changes against
    HEAD. Changes somebody else staged in `paths_out` are unstaged (the files stay), unless
    `keep_bookkeeping` (a merge in progress staged them)."""
    git.run("add", "--all", "--", *pathspec_excluding(paths_out))
    staged = paths_of(git.run("diff", "--cached", "--name-only", "-z", "HEAD").stdout)
    inside = [p for p in staged if under(p, paths_out)]
    if inside and not keep_bookkeeping:
        git.run("reset", "--quiet", "--", *literal(paths_out))
        staged = [p for p in staged if p not in inside]
    return staged


def commit_message(message: str, ticket_id: str, trailers: Mapping[str, str]) -> str:
    """`message`, a blank line and the trailers (`Key: value` lines), `Tf-Ticket` first."""
    lines = [f"{TICKET_TRAILER}: {ticket_id}"]
    for key, value in trailers.items():
        if not _TRAILER_KEY.fullmatch(key):
            raise ValueError(f"{key!r} cannot be a git trailer key")
        if key.lower() != TICKET_TRAILER.lower():
            lines.append(f"{key}: {' '.join(value.split())}")  # a trailer is one line
    return f"{message.strip() or 'tf-fsm checkpoint'}\n\n" + "\n".join(lines) + "\n"


def excluded(ws: Workspace) -> list[str]:
    """What tf_fsm never commits in a ticket's worktree."""
    return [*BOOKKEEPING, *ws.copied]


def _require_branch(ws: Workspace, own: Path, doing: str) -> None:
    """HEAD must be the ticket's branch: a commit on a detached HEAD (a rebase cut off) would
    be dropped when the rebase is aborted, and no other branch is tf_fsm's to move."""
    if not on_branch(ws.git, own, ws.branch):
        raise WorkspaceError(
            f"the worktree {ws.tree} does not have the branch {ws.branch} checked out (a "
            f"rebase or a checkout of somebody's?), so tf-fsm will not {doing} there"
        )


def on_branch(git: Git, own: Path, branch: str) -> bool:
    """Is `branch` checked out in the tree of `git`, whose own git directory is `own`?"""
    try:
        if (own / "HEAD").read_text().strip() == f"ref: refs/heads/{branch}":
            return True  # git's own answer costs a process; the file says it for the usual refs
    except OSError:
        pass
    return git.head_branch() == branch


def _clear_locks(ws: Workspace) -> tuple[Path, Path]:
    """The worktree's own git directory and the common one, after removing the lock files a
    killed git left there and on the ticket's refs (`clear_locks`)."""
    own, common = ws.git.dirs()
    clear_locks(common, [own], ws.root, ws.tree, ws.branch, ws.ticket_id)
    return own, common


def clear_locks(
    common: Path,
    git_dirs: Sequence[Path],
    root: Path,
    tree: Path,
    branch: str,
    ticket_id: str,
    more_refs: Sequence[str] = (),
) -> list[str]:
    """`clear_stale_locks` of the git directories `git_dirs` (the ticket worktree's own; the
    common one, which holds the root checkout's, only for an operation at the root), of the
    ticket's own refs (its branch, moved by every checkpoint, and its refs/tf/<id>/ refs),
    of `packed-refs` (a ref's deletion takes it) and of `more_refs`: the locks the
    operation's own git commands take, so a checkpoint in a worktree never looks at the
    root's index.lock, which the other workers' git commands there take all the time."""
    refs = [f"refs/heads/{branch}", f"refs/tf/{ticket_id}", "packed-refs", *more_refs]
    return clear_stale_locks(common, root, git_dirs, refs, tree=tree)


def _ticket_refs(git: Git, prefix: str) -> dict[str, str]:
    out = git.out("for-each-ref", "--format=%(refname) %(objectname)", prefix)
    return dict(line.rsplit(" ", 1) for line in out.splitlines() if " " in line)
