"""Whole-file reads on the hot path of a run, with plain descriptors: a Python file object
costs four more system calls per read (a terminal check, two seeks, a second fstat), and a
run reads its ticket's artifacts a few times per phase."""

from __future__ import annotations

import os
from pathlib import Path

_CHUNK = 64 * 1024


def read_bytes(path: Path | str) -> bytes:
    """The file's content, as `Path.read_bytes` gives it (and its errors)."""
    return read_with_mtime(path)[0]


def read_with_mtime(path: Path | str) -> tuple[bytes, int]:
    """The file's content and its mtime in nanoseconds, from the one open file (what is read
    and the time it is stamped with belong to the same inode)."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        chunks = []
        size = max(st.st_size + 1, 1)  # one byte more: a file that grew is read to its end
        while chunk := os.read(fd, size):
            chunks.append(chunk)
            size = _CHUNK
        return b"".join(chunks), st.st_mtime_ns
    finally:
        os.close(fd)
