"""Atomic, durable file writes: a temp file in the same directory, fsync, rename, and (unless
the caller groups it, see TicketStore.batch) an fsync of the directory. A crash leaves the
old content or the new, never a torn file.

Every write names its boundary (`within`): tf_fsm.fs.confine refuses one that a symlink would
lead out of it. `within=None` is only for a path the user named on the command line. A disk
that refuses a write (full, read-only, not permitted) raises StorageError naming the file and
the operation.
"""

from __future__ import annotations

import errno
import functools
import itertools
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from tf_fsm.errors import StorageError, UnsafePathError
from tf_fsm.fs.confine import check_within

#: errors that say the disk or its permissions refused the write, not that tf_fsm is wrong
REFUSED = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG}
)


@contextmanager
def disk_errors(path: Path, operation: str) -> Iterator[None]:
    """Turn the disk refusing `operation` on `path` into StorageError (a bad environment, not
    an internal error); any other OSError is left as it is."""
    try:
        yield
    except OSError as exc:
        if exc.errno not in REFUSED:
            raise
        reason = os.strerror(exc.errno) if exc.errno is not None else str(exc)
        raise StorageError(path, operation, reason) from None


def make_dirs(directory: Path, *, within: Path | None) -> None:
    """`mkdir -p` under the boundary rule."""
    if within is not None:
        check_within(directory, within)
    with disk_errors(directory, "create the directory"):
        directory.mkdir(parents=True, exist_ok=True)


def fsync_dir(directory: Path) -> None:
    # A rename or a new file is only durable once the directory entry is.
    fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@functools.cache
def _umask() -> int:
    # os.umask can only be read by setting it, so it is read once and put straight back.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_TEMP_COUNTER = itertools.count()
_PID = [os.getpid()]  # asked once (getpid is a system call), again in a forked child
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=lambda: _PID.__setitem__(0, os.getpid()))


def _open_temp(path: str, mode: int) -> tuple[int, str]:
    """A new `.<name>.<pid>.<n>.tmp` beside `path`. Cheaper than mkstemp's random names, and
    the same `.*.tmp` shape the lock's sweep removes after a crash."""
    head, _, name = path.rpartition(os.sep)
    while True:
        tmp = f"{head}{os.sep}.{name}.{_PID[0]}.{next(_TEMP_COUNTER)}.tmp"
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), tmp
        except FileExistsError:  # left by a dead process with our pid: take the next number
            continue


def atomic_write_bytes(
    path: Path,
    data: bytes,
    *,
    within: Path | None,
    sync_dir: bool = True,
    durable: bool = True,
) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new content.
    `sync_dir=False` skips the directory fsync that makes the rename itself durable: for copies
    kept for people to read (prompts, logs), where a crash may lose the newest copy but never
    leaves a torn one. `durable=False` skips every fsync, for a file that describes only the
    running process (the lock's owner note): readers still never see it half written."""
    if within is not None:
        check_within(path, within)
    with disk_errors(path, "write"):
        _replace(path, data, sync_dir=sync_dir, durable=durable)


def _replace(path: Path, data: bytes, *, sync_dir: bool, durable: bool) -> None:
    # Plain strings from here on: Path objects cost more than the system calls below.
    where = os.fspath(path)
    existed = True
    try:
        # keep the mode the file had, or what a plain open() would give
        mode = os.stat(where).st_mode & 0o7777  # noqa: PTH116 - strings, see above
    except FileNotFoundError:
        mode, existed = 0o666 & ~_umask(), False
    try:
        fd, tmp = _open_temp(where, mode)
    except FileNotFoundError:  # the directory is new: made only then, not checked every write
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _open_temp(where, mode)
    try:
        try:
            write_all(fd, data)
            if existed:  # O_CREAT's mode is filtered by the umask; a new file's is the umask's
                os.fchmod(fd, mode)
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if durable or not existed or not exchange(tmp, where):
            os.replace(tmp, where)  # noqa: PTH105
    except BaseException:
        with suppress(FileNotFoundError):
            os.unlink(tmp)  # noqa: PTH108
        raise
    if sync_dir and durable:
        fsync_dir(path.parent)
    elif existed and not durable:
        # the old content, swapped out by `exchange` (nothing if replaced)
        with suppress(FileNotFoundError):
            os.unlink(tmp)  # noqa: PTH108


_AT_FDCWD, _RENAME_EXCHANGE = -100, 2


@functools.cache
def _renameat2() -> Any:
    """libc's renameat2 (Linux, glibc 2.28+), looked up once; None where there is none."""
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).renameat2
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    return call


def exchange(new: Path | str, old: Path | str) -> bool:
    """Swap two existing names in one atomic step (renameat2 RENAME_EXCHANGE): readers see the
    old file or the new, as with a rename. Used for a write that is not fsynced: ext4 flushes
    the data of a file renamed over another at once (its `auto_da_alloc` guard for programs
    that never fsync), which costs a view several times its write; an exchange leaves the data
    to the kernel's writeback, and the journal rebuilds the view if a power cut takes it.
    False where the system or the file system cannot exchange (then the caller renames)."""
    call = _renameat2()
    if call is None:
        return False
    if call(_AT_FDCWD, os.fsencode(new), _AT_FDCWD, os.fsencode(old), _RENAME_EXCHANGE) == 0:
        return True
    import ctypes

    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOENT, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(old))


def atomic_write_text(
    path: Path,
    text: str,
    *,
    within: Path | None,
    sync_dir: bool = True,
    durable: bool = True,
) -> None:
    atomic_write_bytes(
        path, text.encode("utf-8"), within=within, sync_dir=sync_dir, durable=durable
    )


def json_text(obj: Any) -> str:
    """Pretty JSON (2-space indent, UTF-8) with a trailing newline. Encoded by pydantic-core,
    ten times faster than the json module's pure-Python indenting encoder. The text is the same
    but for small floats, where it agrees with JavaScript's JSON.stringify, pi-ticketflow's
    writer (1e-05 is written 0.00001). An object JSON has no form for is a TypeError."""
    from pydantic_core import PydanticSerializationError, to_json

    try:
        return to_json(obj, indent=2, inf_nan_mode="constants").decode("utf-8") + "\n"
    except PydanticSerializationError as exc:
        raise TypeError(str(exc)) from None


def atomic_write_json(path: Path, obj: Any, *, within: Path | None) -> None:
    """Pretty JSON (2-space indent, UTF-8, trailing newline), the way pi-ticketflow writes it.
    Serialized before the temp file exists, so an unserializable object leaves nothing behind."""
    atomic_write_text(path, json_text(obj), within=within)


def open_no_follow(path: Path, flags: int, *, within: Path | None, operation: str) -> int:
    """`os.open` for a file tf_fsm appends to or locks: checked against the boundary, and
    refused (UnsafePathError) when the file itself is a symlink, even one inside the boundary
    (the journal's append repairs a torn last line by truncating: through a link, it would cut
    a file of the user's)."""
    if within is not None:
        check_within(path, within)
    with disk_errors(path, operation):
        try:
            return os.open(path, flags | getattr(os, "O_NOFOLLOW", 0), 0o666)
        except OSError as exc:
            if exc.errno != errno.ELOOP:
                raise
    target = os.path.realpath(path)
    raise UnsafePathError(path, target, within or path.parent, appended_link(target))


def appended_link(target: str) -> str:
    """Why a file tf_fsm appends to or locks may not be a symlink, even one inside the project."""
    return f"is a symlink (to {target}), and tf-fsm appends to or locks this file"


@contextmanager
def exclusive(path: Path, *, within: Path | None) -> Iterator[None]:
    """Hold an exclusive flock(2) on the lock file `path` (created, never through a symlink)
    for the block: writers of one file take turns, across processes."""
    import fcntl

    fd = open_no_follow(path, os.O_RDWR | os.O_CREAT, within=within, operation="lock")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor drops the flock


def append_durably(path: Path, data: bytes, *, within: Path | None) -> None:
    """Append `data` to `path` (created if absent) and fsync it before returning."""
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
    fd = open_no_follow(path, flags, within=within, operation="append to")
    try:
        with disk_errors(path, "append to"):
            write_all(fd, data)
            os.fsync(fd)
    finally:
        os.close(fd)


@functools.cache
def _syncfs() -> Any:
    """libc's syncfs(2) (Linux), looked up once; None where there is none."""
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).syncfs  # the process's own libc
    except (OSError, AttributeError):
        return None


_gathering = threading.local()  # the paths `one_sync` blocks of this thread gather


@contextmanager
def one_sync() -> Iterator[None]:
    """Within the block, `sync_filesystems` only gathers its paths; when the block ends
    without an error, each file system among them is synced once. A durable point that
    covers a store's records and the caller's own files (the tk file) costs one syncfs
    when they share a file system, whoever asks for which."""
    outer = getattr(_gathering, "paths", None)
    gathered: list[Path] = []
    _gathering.paths = gathered
    try:
        yield
    finally:
        _gathering.paths = outer
    sync_filesystems(gathered)


def sync_filesystems(paths: list[Path]) -> None:
    """`sync_filesystem` once for each file system among `paths` (those that exist), or, in a
    `one_sync` block, at the block's end."""
    gathering: list[Path] | None = getattr(_gathering, "paths", None)
    if gathering is not None:
        gathering.extend(paths)
        return
    chosen: dict[int, Path] = {}
    for path in paths:
        with suppress(FileNotFoundError):
            chosen.setdefault(path.stat().st_dev, path)
    for path in chosen.values():
        with disk_errors(path, "sync"):
            sync_filesystem(path)  # looked up when called: a test may wrap it


def sync_filesystem(path: Path) -> None:
    """Make everything written on the file system that holds `path` durable: one syncfs(2)
    (one journal commit on ext4, where an fsync per file would each cost one), or a plain
    sync(2) where syncfs is missing. The durable point at the end of a run, not the hot path."""
    syncfs = _syncfs()
    if syncfs is None:
        os.sync()
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        if syncfs(fd) != 0:
            import ctypes

            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), str(path))
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
