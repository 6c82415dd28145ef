"""Atomic, durable file writes: a temp file in the same directory, fsync, rename, and (unless
the caller groups it, see TicketStore.batch) an fsync of the directory. A crash leaves the
old content or the new, never a torn file."""

from __future__ import annotations

import functools
import itertools
import os
from contextlib import suppress
from pathlib import Path
from typing import Any


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


def _open_temp(path: Path, mode: int) -> tuple[int, Path]:
    """A new `.<name>.<pid>.<n>.tmp` beside `path`. Cheaper than mkstemp's random names, and
    the same `.*.tmp` shape the lock's sweep removes after a crash."""
    while True:
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{next(_TEMP_COUNTER)}.tmp")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), tmp
        except FileExistsError:  # left by a dead process with our pid: take the next number
            continue


def atomic_write_bytes(
    path: Path, data: bytes, *, sync_dir: bool = True, durable: bool = True
) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new content.
    `sync_dir=False` skips the directory fsync that makes the rename itself durable: for copies
    kept for people to read (prompts, logs), where a crash may lose the newest copy but never
    leaves a torn one. `durable=False` skips every fsync, for a file that describes only the
    running process (the lock's owner note): readers still never see it half written."""
    try:
        # keep the mode the file had, or what a plain open() would give
        mode = path.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    try:
        fd, tmp = _open_temp(path, mode)
    except FileNotFoundError:  # the directory is new: made only then, not checked every write
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = _open_temp(path, mode)
    try:
        try:
            write_all(fd, data)
            os.fchmod(fd, mode)  # O_CREAT's mode is filtered by the umask
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        tmp.replace(path)
    except BaseException:
        with suppress(FileNotFoundError):
            tmp.unlink()
        raise
    if sync_dir and durable:
        fsync_dir(path.parent)


def atomic_write_text(
    path: Path, text: str, *, sync_dir: bool = True, durable: bool = True
) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), sync_dir=sync_dir, durable=durable)


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


def atomic_write_json(path: Path, obj: Any) -> None:
    """Pretty JSON (2-space indent, UTF-8, trailing newline), the way pi-ticketflow writes it.
    Serialized before the temp file exists, so an unserializable object leaves nothing behind."""
    atomic_write_text(path, json_text(obj))


def append_durably(path: Path, data: bytes) -> None:
    """Append `data` to `path` (created if absent) and fsync it before returning."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
