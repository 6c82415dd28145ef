"""A ticket's branch rebased onto the base branch before its merge (docs/workspaces.md,
"Merging"), and the git state a killed rebase or merge left half done, undone again without
losing anything (tf_fsm.workspace.merge.recover puts these together).

The rebase runs in the ticket's worktree with the user's own `git rebase`, and never picks a
side of a conflict (no `-X ours/theirs`, no rerere auto-staging): a conflict aborts the rebase,
so the branch stays exactly where it was, and its paths are returned; or, when asked, the
rebase is left stopped there for the resolution step (tf_fsm.workspace.conflicts). Other
branches are never moved with it (`--no-update-refs`).
"""

from __future__ import annotations

import glob
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tf_fsm.errors import WorkspaceError
from tf_fsm.fs.confine import check_within
from tf_fsm.process.door import ProcessResult
from tf_fsm.workspace.checkpoint import excluded, keep_uncommitted
from tf_fsm.workspace.conflicts import Stop, stop_here
from tf_fsm.workspace.git import (
    Git,
    literal,
    paths_of,
    pathspec_excluding,
    rebase_in_progress,
    said,
    under,
    unmerged,
)
from tf_fsm.workspace.locks import worktree_registry
from tf_fsm.workspace.model import Workspace


@dataclass(frozen=True)
class Rebased:
    """What `rebase_onto_base` did."""

    moved: bool  # the branch was rebased (False: it already held the base tip, or a conflict)
    conflict: list[str]  # the conflicting paths; the branch was left where it was
    base: str  # the base branch's tip
    old_tip: str  # the ticket branch's tip before
    new_tip: str  # and after (old_tip unless moved)
    #: asked to stop at a conflict: the rebase is left in progress there, for a resolution
    #: (tf_fsm.workspace.conflicts); None when it did not stop
    stopped: Stop | None = None


def rebase_onto_base(ws: Workspace, upstream: str | None = None, *, stop: bool = False) -> Rebased:
    """Rebase the ticket's branch onto the base branch's tip. `upstream`: the base commit the
    branch was made from (or last rebased onto), as recorded: only the branch's commits after
    it are replayed, so a commit a person dropped from the base branch since is never brought
    back; a branch already on the base's tip is left alone without asking git anything more.
    Without it (or when it is not in the branch's history any more: a person rebased the
    branch), git's own merge-base decides, and a branch that holds the base tip stays.

    A conflict aborts the rebase (nothing is dropped) and returns the conflicting paths; with
    `stop`, the rebase is left stopped at the conflict instead (`Rebased.stopped`). Uncommitted
    changes in the worktree raise WorkspaceError naming them: the engine commits a checkpoint
    before it merges, so they are a person's edits, never swept away."""
    tip, base = branch_tips(ws)
    git = ws.git
    if upstream == base:
        return Rebased(False, [], base, tip, tip)
    if git.is_ancestor(base, tip):
        # It holds the base tip already, unless the base moved back behind where the branch
        # began (a person dropped commits from it): those must not come back with the merge.
        dropped = upstream is not None and git.is_ancestor(base, upstream)
        if not dropped or not git.is_ancestor(str(upstream), tip):
            return Rebased(False, [], base, tip, tip)
        onto = True
    else:
        onto = upstream is not None and (upstream == tip or git.is_ancestor(upstream, tip))
    _require_clean(ws)
    args = ("--onto", base, str(upstream)) if onto else (base,)
    result = git.run(
        "rebase",
        "--no-autostash",
        "--no-update-refs",
        "--no-rerere-autoupdate",
        *args,
        env=git.commit_env(),
        check=False,
    )
    if result.exit_code == 0:
        return Rebased(True, [], base, tip, git.out("rev-parse", "HEAD"))
    conflict = unmerged(git)
    own = git.git_dir()
    if conflict and stop and rebase_in_progress(own):
        return Rebased(False, conflict, base, tip, tip, stopped=stop_here(ws, result))
    if rebase_in_progress(own):
        git.run("rebase", "--abort")
    if conflict:
        return Rebased(False, conflict, base, tip, tip)
    files = overwritten(result)
    named = f" (it would overwrite {listing(files)}, not on the branch)" if files else ""
    raise WorkspaceError(
        f"cannot rebase {ws.branch} onto {ws.base_branch} ({base[:12]}) in {ws.tree}{named}: "
        f"{said(result)}; the branch was left at {tip[:12]}"
    )


def abort_rebase(ws: Workspace, own: Path) -> tuple[list[str], str | None]:
    """Abort a rebase left in progress in the ticket's worktree (`own` is its git directory):
    git puts the branch back at its tip from before the rebase, so nothing is lost. Files a
    killed checkout wrote before its index are in the way of that: they are kept under a ref
    first (checkpoint.keep_uncommitted). A rebase killed before it moved anything, or after
    it moved the branch, may have left its state unreadable: HEAD is then still on the
    branch, and the state is only removed. Notes on what was done, and the ref made."""
    if not rebase_in_progress(own):
        return [], None
    git, notes, ref = ws.git, [], None
    result = git.run("rebase", "--abort", check=False)
    in_the_way = [p for p in overwritten(result) if not under(p, excluded(ws))]
    if result.exit_code != 0 and in_the_way:
        ref = keep_uncommitted(ws, "interrupted-rebase")
        if ref is not None:  # else git ignores them, and the abort fails as before
            for path in in_the_way:
                (ws.tree / path).unlink(missing_ok=True)
            notes.append(
                f"kept what a killed rebase left in {ws.tree} under {ref}, then "
                f"removed {listing(in_the_way)}, in the way of aborting it"
            )
            result = git.run("rebase", "--abort", check=False)
    if result.exit_code == 0:
        return [
            *notes,
            f"aborted an unfinished rebase in {ws.tree}: {ws.branch} is back at "
            "its tip from before that rebase",
        ], ref
    branch = git.head_branch()
    if branch is None:
        raise WorkspaceError(
            f"an unfinished rebase in {ws.tree} cannot be aborted: {said(result)}; finish or "
            "abort it by hand (git rebase --abort), then run again"
        )
    git.run("rebase", "--quit")
    return [
        *notes,
        f"removed the state of an unfinished rebase in {ws.tree} (HEAD was still "
        f"on {branch}, so nothing had moved)",
    ], ref


def reattach_branch(ws: Workspace) -> list[str]:
    """A rebase killed at the wrong instant can leave the ticket's worktree on a detached HEAD
    with no rebase state for `git rebase --abort` to read. When that HEAD holds nothing the
    branch or the base branch does not (the rebase had not committed yet) and no tracked file
    is changed, the worktree is put back on the ticket's branch; anything else is left as it
    is (the merge then refuses, naming it)."""
    git = ws.git
    if git.head_branch() is not None:
        return []
    head = git.rev("HEAD")
    tip, base = branch_tips(ws)
    if head is None or not any(git.is_ancestor(head, ref) for ref in (tip, base)):
        return []
    if not git.ok("diff-index", "--quiet", "HEAD", "--"):
        return []
    git.run("checkout", "--quiet", ws.branch)
    return [
        f"put {ws.tree} back on {ws.branch}: a killed rebase had left it on a detached "
        f"HEAD at {head[:12]}"
    ]


def branch_tips(ws: Workspace) -> tuple[str, str]:
    """(the ticket branch's tip, the base branch's tip)."""
    tips = []
    for name in (ws.branch, ws.base_branch):
        tip = ws.root_git.rev(f"refs/heads/{name}")
        if tip is None:
            raise WorkspaceError(f"the repository at {ws.root} has no branch {name}")
        tips.append(tip)
    return tips[0], tips[1]


def listing(paths: Sequence[str], shown: int = 10) -> str:
    """`paths` for a message: the first `shown`, and how many more."""
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(paths[:shown]) + more


def overwritten(result: ProcessResult) -> list[str]:
    """The files git refused to overwrite ("Your local changes to the following files would
    be overwritten", "untracked working tree files would be overwritten"): the tab-indented
    lines after its message."""
    files, named = [], False
    for line in result.stderr.splitlines():
        if line.startswith("\t") and named:
            files.append(line[1:])
        else:
            named = "would be overwritten by" in line or "would be removed by" in line
    return files


def _require_clean(ws: Workspace) -> None:
    """The worktree has the ticket's branch checked out and no uncommitted change to a
    tracked file (untracked files do not stop a rebase unless git says so itself)."""
    out = ws.git.out("status", "--porcelain", "-z", "--branch", "--untracked-files=no")
    items = out.split("\0")
    head = items[0][3:].split("...")[0] if items and items[0].startswith("## ") else ""
    if head != ws.branch:
        raise WorkspaceError(
            f"the worktree {ws.tree} does not have {ws.branch} checked out ({head or 'no branch'})"
            ", so tf-fsm will not rebase it"
        )
    changed, skip = [], False
    for item in items[1:]:
        if skip or not item:
            skip = False
            continue
        changed.append(item[3:])
        skip = "R" in item[:2] or "C" in item[:2]  # a rename's or copy's old path follows
    if changed:
        raise WorkspaceError(
            f"the worktree {ws.tree} has uncommitted changes ({listing(changed)}); tf-fsm "
            f"does not rebase {ws.branch} over them: commit or remove them, then run again"
        )


# -- undoing what a killed merge left in a checkout ----------------------------------------


def undo_merge(git: Git, own: Path, tip: str, keep: Sequence[str]) -> list[str]:
    """Undo a merge of `tip` begun in the checkout of `git` (`own`: its git directory) and not
    committed, when the index holds nothing but that merge's result outside `keep` (the tk
    file, whose content stays in its file, unstaged, as before the merge). Files a killed
    `git merge` wrote before its index are put back (their content is the tip's: nothing is
    lost). A merge already committed only has git's leftover state removed. An index holding
    anything else is left as it is, with a note."""
    _unstage(git, keep)
    outside = pathspec_excluding(keep)
    head = git.rev("HEAD") or ""
    merging = (own / "MERGE_HEAD").exists()
    if git.ok("diff", "--cached", "--quiet", "--", *outside):
        notes = _undo_half_checkout(git, head, tip, outside)
        if merging or (own / "SQUASH_MSG").exists():
            _end_merge(git, merging)
            notes.append(f"ended an unfinished merge of {tip[:12]} in {git.cwd}")
        return notes
    if (
        head != tip
        and git.is_ancestor(head, tip)
        and git.ok("diff-index", "--cached", "--quiet", tip, "--", *outside)
    ):
        _end_merge(git, merging)
        return [f"undid an unfinished merge of {tip[:12]} in {git.cwd}: it is back at {head[:12]}"]
    return [
        f"left {git.cwd} as it is: its index holds changes that are not tf-fsm's merge of "
        f"{tip[:12]} (git status shows them); merging there waits until they are "
        "committed or unstaged"
    ]


def _end_merge(git: Git, merging: bool) -> None:
    if merging:
        git.run("merge", "--abort")
    else:  # a squash or a fast-forward: no MERGE_HEAD to abort
        git.run("reset", "--quiet", "--merge")


def _unstage(git: Git, keep: Sequence[str]) -> None:
    """Unstage the changes to `keep` (their files are left as they are)."""
    args = ("diff", "--cached", "--name-only", "-z", "--no-renames", "--", *literal(keep))
    staged = paths_of(git.out(*args))
    if staged:
        git.run("reset", "--quiet", "--", *literal(staged))


def _undo_half_checkout(git: Git, head: str, tip: str, outside: Sequence[str]) -> list[str]:
    """The files of the merge a killed `git merge` had written before it wrote the index:
    those holding the tip's content or the beginning of it (or missing) are put back from the
    index, those it created are removed. A file with any other content is a person's, and
    stays."""
    if not head or head == tip:
        return []
    # HEAD itself when the merge was cut short; the fork point when the base moved since
    # (another ticket merged first): the files are those the ticket's branch changed
    fork = git.run("merge-base", head, tip, check=False).stdout.strip()
    if not fork:
        return []
    diff = ("diff", "--name-only", "-z", "--no-renames", fork, tip, "--", *outside)
    touched = [p for p in paths_of(git.out(*diff)) if "\n" not in p]
    if not touched:
        return []
    status = git.out(
        "status",
        "--porcelain",
        "-z",
        "--untracked-files=all",
        "--no-renames",
        "--",
        *literal(touched),
    )
    changed = {item[3:]: item[:2] for item in paths_of(status)}
    if not changed:
        return []
    theirs = _blobs(git, tip, list(changed))
    files = [p for p in changed if (git.cwd / p).is_file() and not (git.cwd / p).is_symlink()]
    hashes = git.out("hash-object", "--", *files).split() if files else []
    mine = dict(zip(files, hashes, strict=True))
    back = sorted(p for p, xy in changed.items() if xy == " D" or _holds(git, p, mine, theirs))
    gone = [p for p in back if changed[p] == "??"]
    if restore := [p for p in back if changed[p] != "??"]:
        git.run("checkout", "--quiet", "--", *literal(restore))
    for path in gone:
        (git.cwd / path).unlink()
    if not back:
        return []
    return [
        f"put back {len(back)} file(s) a killed merge had half written in {git.cwd} (they "
        f"held the content of {tip[:12]}): {listing(back)}"
    ]


def _holds(git: Git, path: str, mine: dict[str, str], theirs: dict[str, str]) -> bool:
    """Whether the file at `path` holds its blob in `theirs`, or the beginning of it (a write
    cut short by the kill): the blob has all of it, so putting the file back loses nothing."""
    if path not in mine or path not in theirs:
        return False
    if mine[path] == theirs[path]:
        return True
    text = (git.cwd / path).read_bytes().decode("utf-8", errors="replace")
    return git.run("cat-file", "blob", theirs[path]).stdout.startswith(text)


def _blobs(git: Git, commit: str, paths: list[str]) -> dict[str, str]:
    """The blob of each of `paths` in `commit` (absent ones are left out), in one process."""
    query = "".join(f"{commit}:{p}\n" for p in paths)
    answers = git.out("cat-file", "--batch-check=%(objectname) %(objecttype)", stdin=query)
    pairs = zip(paths, answers.splitlines(), strict=True)
    return {p: a.split()[0] for p, a in pairs if a.endswith(" blob")}


# -- git's own leftovers -------------------------------------------------------------------


def sweep_temp_files(paths: Sequence[Path]) -> None:
    """The temporary files of atomic writes a kill interrupted (`.<name>.<pid>.<n>.tmp`
    beside each of `paths`): the tk file's would show as an untracked file of the user's."""
    for path in paths:
        for tmp in path.parent.glob(f".{glob.escape(path.name)}.*.tmp"):
            tmp.unlink(missing_ok=True)


def discard_worktree(git: Git, common: Path, tree: Path, within: Path) -> bool:
    """Remove the temporary worktree tf-fsm made at `tree` (git's entry for it included),
    whatever state a kill left it in; whether there was one. `within`: the project's root."""
    with worktree_registry(common):
        admin = _admin_of(common, tree)
        if admin is None and not os.path.lexists(tree):
            return False
        removed = git.run("worktree", "remove", "--force", "--force", str(tree), check=False)
        if removed.exit_code != 0:  # git no longer knows it as a worktree: files and entry go
            check_within(tree, within)
            if tree.is_symlink():
                tree.unlink()
            elif tree.exists():
                shutil.rmtree(tree)
            if admin is not None:
                shutil.rmtree(admin, ignore_errors=True)
    return True


def _admin_of(common: Path, tree: Path) -> Path | None:
    """git's entry for the linked worktree at `tree` (`<common>/worktrees/<name>`), if any."""
    target = os.path.realpath(tree / ".git")
    try:
        entries = list((common / "worktrees").iterdir())
    except OSError:
        return None
    for entry in entries:
        try:
            gitdir = (entry / "gitdir").read_text(encoding="utf-8").strip()
        except OSError:
            continue
        if os.path.realpath(gitdir) == target:
            return entry
    return None
