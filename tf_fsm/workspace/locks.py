"""git's own lock files (`index.lock`, a ref's `.lock`) that a killed git left behind.

git takes `index.lock` for the length of a command and removes it when the command ends. When
tf_fsm is SIGKILLed, the git it was running dies with it (the parent-death signal) and the
lock stays: every later git command in that tree then fails with "Unable to create
'.../index.lock': File exists". Such a lock is removed, but only when no git process is
running in the repository's trees at all, so a lock a person's running git holds is never
taken away.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from tf_fsm.fs.atomic import exclusive


@contextmanager
def worktree_registry(common: Path) -> Iterator[None]:
    """Take turns with every other tf-fsm process on git's worktree registry (a flock on
    `<common git dir>/tf-fsm-worktrees.flock`; not named `*.lock`, which `stale_locks` takes
    for git's own). `git worktree add` makes its registry entry before it writes the entry's
    `locked` and `gitdir` files, and a `git worktree prune` or `remove` run by another worker
    in that instant deletes the entry under it ("could not open .../locked"): the workers of a
    loop make and remove worktrees at the same moments."""
    with exclusive(common / "tf-fsm-worktrees.flock", within=common):
        yield


def git_processes_in(trees: Sequence[Path]) -> list[int]:
    """The pids of running `git` processes whose working directory is in one of `trees`
    (Linux: /proc; elsewhere nothing is known, and the caller leaves locks alone)."""
    roots = [str(t.resolve()) for t in trees]
    found = []
    for name in _pids():
        try:
            if Path(f"/proc/{name}/comm").read_text().strip() != "git":
                continue
            cwd = str(Path(f"/proc/{name}/cwd").readlink())
        except OSError:  # gone meanwhile, or not ours to look at
            continue
        if any(cwd == r or cwd.startswith(r + os.sep) for r in roots):
            found.append(int(name))
    return found


def _pids() -> Iterable[str]:
    try:
        return [p.name for p in Path("/proc").iterdir() if p.name.isdigit()]
    except OSError:
        return []


def stale_locks(git_dirs: Sequence[Path], refs: Iterable[str] = ()) -> list[Path]:
    """git's lock files present in `git_dirs` (a repository's common directory first, then the
    private directories of its worktrees): every `*.lock` at the top of each (index.lock,
    HEAD.lock, the pseudo-refs a merge or rebase writes, packed-refs.lock...), and those of the
    `refs` named (e.g. `refs/heads/tf/pt-1`, or `refs/tf/pt-1` for every lock under it), which
    live in the common directory."""
    found = {lock for d in git_dirs for lock in d.glob("*.lock")}
    for ref in refs if git_dirs else ():
        path = git_dirs[0] / ref
        found.add(path.with_name(path.name + ".lock"))
        if path.is_dir():
            found.update(path.rglob("*.lock"))
    return sorted(p for p in found if p.is_file())


def clear_stale_locks(
    git_dirs: Sequence[Path], trees: Sequence[Path], refs: Iterable[str] = ()
) -> list[str]:
    """Remove the lock files of `git_dirs` and `refs` (see `stale_locks`) when no git process
    runs in `trees`; what was removed, as notes to show. Nothing is removed while any git runs
    there (a person's git may hold them: git then says so itself, and the run stops with its
    message)."""
    locks = stale_locks(git_dirs, refs)
    if not locks or not Path("/proc/self").exists() or git_processes_in(trees):
        return []
    notes = []
    for lock in locks:
        try:
            lock.unlink()
        except FileNotFoundError:
            continue  # its git ended meanwhile and removed it
        notes.append(f"removed {lock}, left by a git process that is no longer running")
    return notes
