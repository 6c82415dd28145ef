"""git's own lock files (`index.lock`, a ref's `.lock`) that a killed git left behind.

git takes `index.lock` for the length of a command and removes it when the command ends. When
tf_fsm is SIGKILLed, the git it was running dies with it (the parent-death signal) and the
lock stays: every later git command in that tree then fails with "Unable to create
'.../index.lock': File exists". Such a lock is removed, and a lock a running git holds never
is: a lock is stale only when it was there before an instant at which no git process ran in
any working tree of the repository (a git holding it then would have been seen), and it is
still the same file (held open from before, so that its inode cannot be reused) when it is
removed. A new git cannot take a lock file that exists, so the file seen before that instant
can only be the dead git's.

The locks an operation's git commands take are swept before it, not once a command failed on
one: a rebase or a merge that met a stale lock half-way would stop half-done. The sweep costs
a look at a few paths when there is no lock, which is nearly always.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from tf_fsm.fs.atomic import exclusive
from tf_fsm.process.strays import is_git
from tf_fsm.workspace.agent_files import read_if_present

#: how long a sweep that found a lock waits for an instant when no git runs in the
#: repository; the workers' own git commands last milliseconds, a person's may last longer
#: (git then says the lock exists, and the run stops with its message)
PATIENCE_SECONDS = 3.0
_POLL_SECONDS = 0.02


@contextmanager
def worktree_registry(common: Path) -> Iterator[None]:
    """Take turns with every other tf-fsm process on git's worktree registry (a flock on
    `<common git dir>/tf-fsm-worktrees.flock`; not named `*.lock`, which `lock_files` takes
    for git's own). `git worktree add` makes its registry entry before it writes the entry's
    `locked` and `gitdir` files, and a `git worktree prune` or `remove` run by another worker
    in that instant deletes the entry under it ("could not open .../locked"): the workers of a
    loop make and remove worktrees at the same moments."""
    with exclusive(common / "tf-fsm-worktrees.flock", within=common):
        yield


def git_processes_in(trees: Sequence[Path], running: Mapping[int, str] | None = None) -> list[int]:
    """The pids of running `git` processes whose working directory is in one of `trees`
    (Linux: /proc; elsewhere nothing is known, and the caller leaves locks alone), of
    `running` when given (`running_git`: one look at /proc for several questions)."""
    roots = [str(t.resolve()) for t in trees]
    return [
        pid
        for pid, cwd in (running_git() if running is None else running).items()
        if any(cwd == r or cwd.startswith(r + os.sep) for r in roots)
    ]


def running_git() -> dict[int, str]:
    """Every running `git` process: pid -> its working directory. Read with plain system
    calls: /proc holds hundreds of processes on a busy machine, and this is asked before
    every worktree is made or removed."""
    found = {}
    for name in _pids():
        if is_git(name):
            try:
                found[int(name)] = os.readlink(f"/proc/{name}/cwd")  # noqa: PTH115 - a hot loop
            except OSError:  # gone meanwhile, or not ours to look at
                continue
    return found


def _pids() -> Iterable[str]:
    try:
        return [name for name in os.listdir("/proc") if name.isdigit()]  # noqa: PTH208
    except OSError:
        return []


def registered_tree(admin: Path) -> Path | None:
    """The working tree the entry `admin` of git's worktree registry (`<common git
    dir>/worktrees/<name>/`) names in its `gitdir` file; None before git wrote it."""
    gitdir = (read_if_present(admin / "gitdir") or "").strip()
    return Path(os.path.realpath(admin / gitdir)).parent if gitdir else None


def repository_trees(common: Path, root: Path, *more: Path) -> list[Path]:
    """Where a git that may hold one of the repository's locks runs: the project root, the
    common git directory, every worktree in git's registry, and `more`."""
    try:
        admins = [p for p in (common / "worktrees").iterdir() if p.is_dir()]
    except OSError:
        admins = []
    registered = [tree for admin in admins if (tree := registered_tree(admin)) is not None]
    return [root, common, *more, *registered]


def lock_files(common: Path, git_dirs: Sequence[Path], refs: Iterable[str] = ()) -> list[Path]:
    """git's lock files present in `git_dirs`: every `*.lock` at the top of each (index.lock,
    HEAD.lock, the pseudo-refs a merge or rebase writes, packed-refs.lock...), and those of
    the `refs` named (e.g. `refs/heads/tf/pt-1`, or `refs/tf/pt-1` for every lock under it;
    `packed-refs`), which live in the `common` git directory."""
    found = {lock for d in git_dirs for lock in d.glob("*.lock")}
    for ref in refs:
        path = common / ref
        found.add(path.with_name(path.name + ".lock"))
        if path.is_dir():
            found.update(path.rglob("*.lock"))
    return sorted(p for p in found if p.is_file())


def clear_stale_locks(
    common: Path,
    root: Path,
    git_dirs: Sequence[Path],
    refs: Iterable[str] = (),
    *,
    tree: Path | None = None,
    patience: float = PATIENCE_SECONDS,
) -> list[str]:
    """Remove the lock files of `git_dirs` and `refs` (see `lock_files`) that a git no longer
    running left; what was removed, as notes to show. The repository is the one whose common
    git directory is `common` and whose main tree is `root` (`tree`: a worktree that may not
    be registered yet). When a lock is there while some git runs in the repository, the
    sweep waits up to `patience` seconds for an instant when none does; a lock released
    meanwhile was a live git's, and is left alone."""
    if not Path("/proc/self").exists():
        return []  # no way to see the running gits: a lock may be anybody's
    pinned = _pin(lock_files(common, git_dirs, refs))
    try:
        deadline = time.monotonic() + patience
        while True:
            for path in [p for p, fd in pinned.items() if not _unchanged(p, fd)]:
                os.close(pinned.pop(path))  # released, or replaced: a live git's
            if not pinned:
                return []
            if not git_processes_in(repository_trees(common, root, *([tree] if tree else []))):
                return _remove_unchanged(common, pinned)
            if time.monotonic() >= deadline:
                return []
            time.sleep(_POLL_SECONDS)
    finally:
        for fd in pinned.values():
            os.close(fd)


def _pin(locks: Sequence[Path]) -> dict[Path, int]:
    """Each lock file held open, so that its inode stays its own while it is looked at: an
    inode freed and reused by a new lock at the same path would otherwise look the same."""
    pinned = {}
    for lock in locks:
        try:
            fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:  # gone meanwhile (its git ended), or not a file git makes
            continue
        if stat.S_ISREG(os.fstat(fd).st_mode):
            pinned[lock] = fd
        else:
            os.close(fd)
    return pinned


def _unchanged(lock: Path, fd: int) -> bool:
    """Is the file at `lock` still the one held open as `fd`?"""
    try:
        now = os.lstat(lock)
    except OSError:
        return False
    held = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino)


def _remove_unchanged(common: Path, pinned: dict[Path, int]) -> list[str]:
    """Unlink each pinned lock that is still the same file, taking turns with the other
    tf-fsm processes (a flock on `<common>/tf-fsm-locks.flock`): between one sweep's look and
    its unlink, another's unlink and a new git's lock would otherwise fit."""
    notes = []
    with exclusive(common / "tf-fsm-locks.flock", within=common):
        for lock, fd in pinned.items():
            if not _unchanged(lock, fd):
                continue  # another sweep removed it, and a live git may hold the new one
            try:
                lock.unlink()
            except FileNotFoundError:
                continue
            notes.append(f"removed {lock}, left by a git process that is no longer running")
    return notes
