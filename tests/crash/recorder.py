"""Records, in order, every file-system operation a process makes under a project directory.

The os functions are wrapped (pytest's monkeypatch; the real call still runs, on real files)
and each call that can change what a power loss leaves is noted as an `Op`, its path relative
to the project root. Files outside the root (pytest's own) are ignored. pathlib's
`replace/rename/unlink/mkdir/rmdir` go through the os functions in Python 3.11, so they are
recorded too. `tf_fsm.fs.atomic.sync_filesystem` (syncfs: everything durable) is recorded as
one `sync` op. Descriptors are followed from `os.open` to `os.close` so that a write, a
truncate or an fsync is known by its file (or directory).

Op kinds and their fields:
    create   path                    O_CREAT made a new directory entry (and a new empty file)
    trunc    path, size              O_TRUNC (size 0) or ftruncate
    write    path, offset, data      bytes written at `offset`
    fsync    path                    a file's content (or, for a directory, its entries) durable
    rename   path, dst               os.replace / os.rename: atomic
    exchange path, dst               tf_fsm.fs.atomic.exchange (renameat2 RENAME_EXCHANGE):
                                     the two names swap their files, atomically
    unlink   path
    mkdir    path
    rmdir    path
    sync     -                       sync_filesystem: everything durable
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tf_fsm.fs import atomic


@dataclass(frozen=True)
class Op:
    kind: str
    path: str = ""
    dst: str = ""
    offset: int = 0
    size: int = 0
    data: bytes = b""
    is_dir: bool = False  # for fsync: the path is a directory

    def __str__(self) -> str:
        extra = {"rename": f" -> {self.dst}", "trunc": f" to {self.size}"}.get(self.kind, "")
        if self.kind == "write":
            extra = f" {len(self.data)} bytes at {self.offset}"
        return f"{self.kind} {self.path}{'/' if self.is_dir else ''}{extra}"


@dataclass
class _Open:
    path: str
    is_dir: bool


class Recorder:
    """Wraps the os functions while `install`ed; `ops` grows with every recorded call."""

    def __init__(self, root: Path) -> None:
        self.root = os.path.realpath(root)
        self.ops: list[Op] = []
        self._fds: dict[int, _Open] = {}

    def relative(self, path: Any, dir_fd: int | None = None) -> str | None:
        """`path` relative to the root, None when it is outside (or relative to a dir_fd)."""
        if dir_fd is not None:
            return None
        full = os.path.abspath(os.fsdecode(path))
        parent = os.path.realpath(os.path.dirname(full))
        full = os.path.join(parent, os.path.basename(full))
        if full == self.root:
            return "."
        if not full.startswith(self.root + os.sep):
            return None
        return full[len(self.root) + 1 :]

    def note(self, op: Op) -> None:
        self.ops.append(op)

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        real = {name: getattr(os, name) for name in _WRAPPED}
        for name in _WRAPPED:
            monkeypatch.setattr(os, name, _wrapper(self, name, real))
        real_sync, real_exchange = atomic.sync_filesystem, atomic.exchange

        def sync_filesystem(path: Path) -> None:
            real_sync(path)
            self.note(Op("sync"))

        def exchange(new: Path, old: Path) -> bool:
            swapped = real_exchange(new, old)
            src, dst = self.relative(new), self.relative(old)
            if swapped and src is not None and dst is not None:
                self.note(Op("exchange", src, dst=dst))
            return swapped

        monkeypatch.setattr(atomic, "sync_filesystem", sync_filesystem)
        monkeypatch.setattr(atomic, "exchange", exchange)


_WRAPPED = (
    "open",
    "write",
    "ftruncate",
    "fsync",
    "close",
    "replace",
    "rename",
    "unlink",
    "remove",
    "mkdir",
    "rmdir",
)


def _wrapper(rec: Recorder, name: str, real: dict[str, Any]) -> Any:
    fn = real[name]

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if name == "open":
            return _open(rec, fn, *args, **kwargs)
        if name in ("write", "ftruncate", "fsync", "close"):
            return _on_fd(rec, name, fn, real, *args, **kwargs)
        return _on_path(rec, name, fn, *args, **kwargs)

    return wrapped


def _open(rec: Recorder, fn: Any, path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
    rel = rec.relative(path, kwargs.get("dir_fd"))
    existed = rel is not None and os.path.lexists(path)
    fd: int = fn(path, flags, *args, **kwargs)
    if rel is None:
        return fd
    is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
    rec._fds[fd] = _Open(rel, is_dir)
    if flags & os.O_CREAT and not existed:
        rec.note(Op("create", rel))
    elif flags & os.O_TRUNC and not is_dir:
        rec.note(Op("trunc", rel, size=0))
    return fd


def _on_fd(rec: Recorder, name: str, fn: Any, real: dict[str, Any], fd: int, *args: Any) -> Any:
    opened = rec._fds.get(fd)
    if name == "close":
        rec._fds.pop(fd, None)
        return fn(fd)
    result = fn(fd, *args)
    if opened is None:
        return result
    if name == "write":
        data = bytes(memoryview(args[0])[:result])
        end = os.lseek(fd, 0, os.SEEK_CUR)  # after the write, with or without O_APPEND
        rec.note(Op("write", opened.path, offset=end - len(data), data=data))
    elif name == "ftruncate":
        rec.note(Op("trunc", opened.path, size=args[0]))
    else:
        rec.note(Op("fsync", opened.path, is_dir=opened.is_dir))
    return result


def _on_path(rec: Recorder, name: str, fn: Any, path: Any, *args: Any, **kwargs: Any) -> Any:
    rel = rec.relative(path, kwargs.get("dir_fd") or kwargs.get("src_dir_fd"))
    result = fn(path, *args, **kwargs)
    if rel is None:
        return result
    if name in ("replace", "rename"):
        dst = rec.relative(args[0], kwargs.get("dst_dir_fd"))
        if dst is None:
            raise AssertionError(f"a rename out of the project: {path} -> {args[0]}")
        rec.note(Op("rename", rel, dst=dst))
    else:
        rec.note(Op({"remove": "unlink"}.get(name, name), rel))
    return result
