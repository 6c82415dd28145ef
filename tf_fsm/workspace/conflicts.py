"""A rebase stopped at a conflict, as the merge queue's resolution step sees it (docs/workspaces.md,
"Conflicts"): what conflicts and how, the resolver's result checked and the rebase carried on,
and a resolution that failed kept under a ref while the branch goes back to its old tip.

The resolver edits files; tf_fsm does the git: it checks that no conflict marker is left in
the files that conflicted, stages the tree (tf_fsm's bookkeeping and the copied agent files
left out, as a checkpoint does) and continues the rebase, which may stop again at a later
commit of the ticket. A resolver that ran git itself (staged, continued or even finished the
rebase) is checked the same way: by the state it left, never by what it says.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from tf_fsm.core.conflicts import UNMERGED, conflict_kind, marker_lines, said_conflicts
from tf_fsm.process.door import ProcessResult
from tf_fsm.workspace.checkpoint import (
    excluded,
    head,
    keep_uncommitted,
    on_branch,
    reset_to,
    save_ref,
    stage,
)
from tf_fsm.workspace.git import literal, paths_of, rebase_in_progress, said, unmerged
from tf_fsm.workspace.model import Workspace

#: a file larger than this is not read for conflict markers (git's own markers are in text
#: files, which are never this large in a source tree)
MARKER_SCAN_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Conflict:
    path: str
    kind: str  # content, modify/delete, rename/delete, add/add, ... (git's words)
    base_side: str  # what the base branch's side did to the path ("changed it", "deleted it")
    ticket_side: str  # and what the ticket's commit did
    #: the file as git left it at the stop (sha256 of its bytes; None: absent): a path the
    #: resolver neither changed nor staged is unresolved, even without a marker in it
    left: str | None = None


@dataclass(frozen=True)
class Stop:
    """Where the rebase stands: stopped replaying `commit` of the ticket's branch."""

    commit: str
    subject: str
    conflicts: tuple[Conflict, ...]
    said: tuple[str, ...]  # git's CONFLICT lines

    @property
    def paths(self) -> list[str]:
        return [c.path for c in self.conflicts]


@dataclass(frozen=True)
class Carried:
    """What `carry_on` found: the rebase done (`tip`), stopped again (`stop`), or a `problem`
    with the resolution (the rebase is left as it is, for `set_aside`)."""

    tip: str | None = None
    stop: Stop | None = None
    problem: str | None = None


def stop_here(ws: Workspace, result: ProcessResult) -> Stop:
    """The stop of the rebase in progress in the ticket's worktree; `result`: the git command
    that stopped (its CONFLICT lines name the kinds)."""
    git = ws.git
    said_lines = said_conflicts(result.stdout + "\n" + result.stderr)
    status = git.out("status", "--porcelain=v2", "-z", "--untracked-files=no")
    conflicts = []
    for entry in paths_of(status):
        if not entry.startswith("u "):
            continue
        fields = entry.split(" ", 10)
        xy, path = fields[1], fields[10]
        _kind, base_side, ticket_side = UNMERGED.get(xy, ("", "changed it", "changed it"))
        kind = conflict_kind(path, xy, said_lines)
        conflicts.append(Conflict(path, kind, base_side, ticket_side, _digest(ws.tree / path)))
    commit = git.rev("REBASE_HEAD") or ""
    subject = git.out("show", "--no-patch", "--format=%s", commit) if commit else ""
    text = tuple(f"CONFLICT ({kind}): {what}" for kind, what in said_lines)
    return Stop(commit, subject, tuple(conflicts), text)


def marked(ws: Workspace, paths: list[str]) -> dict[str, list[int]]:
    """The files among `paths` (present in the worktree) that still hold conflict markers, and
    their marker lines."""
    found = {}
    for path in paths:
        file = ws.tree / path
        try:
            if file.is_symlink() or not file.is_file() or file.stat().st_size > MARKER_SCAN_BYTES:
                continue
            text = file.read_bytes().decode("utf-8", errors="replace")
        except OSError:
            continue
        if lines := marker_lines(text):
            found[path] = lines
    return found


def carry_on(ws: Workspace, stop: Stop, onto: str, resolved: list[str]) -> Carried:
    """After the resolver: check the files that conflicted so far (`resolved`) hold no marker
    and that none of this `stop`'s paths is left exactly as git left it (a modify/delete
    conflict has no marker: the file git leaves is one side whole), then stage the tree and
    continue the rebase (it may stop at the next commit). A path the resolver staged itself is
    its decision. A rebase the resolver ended itself must have completed: the ticket's branch
    checked out, holding `onto` (the base tip)."""
    git = ws.git
    own = git.git_dir()
    if left := marked(ws, resolved):
        shown = ", ".join(f"{p} (line {', '.join(map(str, n[:5]))})" for p, n in left.items())
        return Carried(problem=f"conflict markers are left in {shown}")
    if not rebase_in_progress(own):
        return _ended_by_resolver(ws, own, onto)
    unstaged = set(unmerged(git))
    untouched = [
        f"{c.path} ({c.kind})"
        for c in stop.conflicts
        if c.path in unstaged and _digest(ws.tree / c.path) == c.left
    ]
    if untouched:
        return Carried(problem=f"{', '.join(untouched)} left as git left it at the conflict")
    stage(git, excluded(ws), keep_bookkeeping=False)
    if still := unmerged(git):
        return Carried(problem=f"{', '.join(still)} still unmerged in git's index")
    result = git.run("rebase", "--continue", env=git.commit_env(), check=False)
    if not rebase_in_progress(own):
        if result.exit_code != 0:
            return Carried(problem=f"git rebase --continue failed: {said(result)}")
        return _ended_by_resolver(ws, own, onto)
    if unmerged(git):
        return Carried(stop=stop_here(ws, result))
    return Carried(problem=f"git rebase --continue stopped without a conflict: {said(result)}")


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest() if not path.is_symlink() else "link"
    except OSError:
        return None


def _ended_by_resolver(ws: Workspace, own: Path, onto: str) -> Carried:
    if not on_branch(ws.git, own, ws.branch):
        return Carried(problem=f"the worktree no longer has {ws.branch} checked out")
    tip = head(ws)
    if not ws.git.is_ancestor(onto, tip):
        return Carried(
            problem=f"the rebase did not complete: {ws.branch} does not hold "
            f"{ws.base_branch}'s tip {onto[:12]} (was it aborted?)"
        )
    return Carried(tip=tip)


def keeps_the_ticket(ws: Workspace, onto: str, upstream: str, old_tip: str) -> bool:
    """Does the resolved branch still change anything against the base tip, when the ticket's
    own commits did (`upstream..old_tip`)? A resolution that kept nothing of the ticket
    dropped its side whole."""
    git = ws.git
    return git.ok("diff", "--quiet", upstream, old_tip) or not git.ok(
        "diff", "--quiet", onto, "HEAD"
    )


def set_aside(ws: Workspace, name: str, old_tip: str) -> str | None:
    """Keep what the resolver made under `refs/tf/<id>/<name>` (a rebase still in progress:
    its tree as a commit on the rebase's HEAD; a completed one: the rebased tip), then put the
    branch and the worktree back at `old_tip`, as before the rebase. The ref, or None when
    there was nothing to keep."""
    git = ws.git
    own = git.git_dir()
    if rebase_in_progress(own):
        ref = keep_uncommitted(ws, name)
        if ref is None:  # nothing uncommitted: what the rebase replayed so far is the work
            ref = save_ref(ws, name, head(ws))
        git.run("rebase", "--abort")
        return ref
    if not on_branch(git, own, ws.branch):
        git.run("checkout", "--quiet", "--force", ws.branch)
    # what the gates left in the tree is kept too, under `<name>-uncommitted`
    return reset_to(ws, old_tip, keep_as=name, bookkeeping=True)


@dataclass(frozen=True)
class Sides:
    """What each side of the conflict meant, for the resolver's prompt: the ticket's own change
    (`upstream..old_tip`), and the base's commits since the branch point with the tickets
    they merged, and their change to the conflicting paths."""

    ticket_diff: str
    base_commits: list[tuple[str, str, str]]  # (short sha, subject, ticket or "")
    base_diff: str


def sides(ws: Workspace, upstream: str, onto: str, old_tip: str, paths: list[str]) -> Sides:
    git = ws.git
    ticket_diff = git.out("diff", "--stat", "--patch", upstream, old_tip, "--")
    log = git.out(
        "log",
        "--first-parent",
        "-z",
        "--max-count=50",
        "--format=%h%x1f%s%x1f%(trailers:key=Tf-Ticket,valueonly,separator=%x2c)",
        f"{upstream}..{onto}",
        "--",
    )
    commits = []
    for record in paths_of(log):
        short, subject, ticket = ([*record.split("\x1f"), "", ""])[:3]
        commits.append((short.strip(), subject, ticket.strip()))
    base_diff = git.out("diff", upstream, onto, "--", *literal(paths)) if paths else ""
    return Sides(ticket_diff, commits, base_diff)
