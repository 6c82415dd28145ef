"""Reading a directory's worth of small files, in order: one by one, or, for a large set read
once, mostly by a forked reader process while the caller parses (tf_fsm.tk.backlog's scan)."""

from __future__ import annotations

import contextlib
import marshal
import os
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from signal import Signals

FileKey = tuple[int, int, int, int]  # inode, size, mtime, ctime: what tells a changed file


def file_key(st: os.stat_result) -> FileKey:
    return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


#: a file's key and its bytes, or its key (if any) and why it could not be read
Read = tuple[FileKey | None, bytes | str]


def read_file(path: str, keyed: bool) -> Read:
    # os.open/os.read: a third cheaper than open().read() in the hot loop of a 10k scan; the
    # key comes from the descriptor read, so it describes the bytes read
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            key = file_key(os.fstat(fd)) if keyed else None
            chunks = []
            while chunk := os.read(fd, 65536):
                chunks.append(chunk)
            return key, b"".join(chunks)
        finally:
            os.close(fd)
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}"


#: below this many files to read, a reader process costs more than it saves
FORK_MIN_FILES = 2000
_BATCH = 256  # files per message from the reader
#: the share of the files this process reads itself, first, while the reader starts on the
#: rest: reading takes longer than parsing, so the reader alone would keep this process waiting
_OWN_SHARE = 0.2
_PIPE_BYTES = 1 << 20  # the reader runs ahead meanwhile, instead of stalling every 64 KB


def _may_fork() -> bool:
    # Linux only (macOS frameworks are not fork-safe), never beside other threads (a lock one
    # of them holds would stay held in the child), and only with a second core to run on.
    threading = sys.modules.get("threading")
    return (
        sys.platform == "linux"
        and (threading is None or threading.active_count() == 1)
        and len(os.sched_getaffinity(0)) > 1
    )


def _fork_reader(rfd: int, wfd: int, paths: list[str]) -> int:
    """Fork the reader; returns its pid. SIGINT and SIGTERM are held back across the fork, so
    that neither can raise in the child before it has left this process's code for good."""
    import signal  # here: the module costs every other command a little start-up time

    held = {signal.SIGINT, signal.SIGTERM}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, held)
    try:
        pid = os.fork()
        if pid == 0:
            try:
                _reader(rfd, wfd, paths, previous)
            finally:  # whatever happens, the child never goes back to this process's code
                os._exit(1)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)  # the parent; the child never is
    return pid


def _reader(rfd: int, wfd: int, paths: list[str], mask: set[int | Signals]) -> None:
    """The forked reader: reads the files in order and sends them in batches, then exits
    without running this process's cleanups (it never returns)."""
    import signal

    code = 1
    try:
        os.close(rfd)
        for number in (signal.SIGINT, signal.SIGTERM):  # not the parent's handlers
            signal.signal(number, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        with os.fdopen(wfd, "wb") as out:
            for start in range(0, len(paths), _BATCH):
                out.write(
                    marshal.dumps([read_file(p, False) for p in paths[start : start + _BATCH]])
                )
                out.flush()
        code = 0
    finally:
        os._exit(code)


def read_files(paths: list[str], keyed: bool) -> Iterator[Read]:
    """`read_file` for each path, in order. For a large backlog read once (`tf-fsm tickets`),
    a forked reader reads most of the files while this process reads the first _OWN_SHARE and
    parses everything: reading and parsing then each get a core. If the reader fails, this
    process reads the rest. A keyed read is the loop's, whose process keeps the records of its
    earlier passes: after a fork, each page of them it touched would be copied, which cost more
    than the reader saved."""
    if keyed or len(paths) < FORK_MIN_FILES or not _may_fork():
        yield from (read_file(path, keyed) for path in paths)
        return
    own = int(len(paths) * _OWN_SHARE)
    rfd, wfd = os.pipe()
    _widen(wfd)
    stream, sink = os.fdopen(rfd, "rb"), os.fdopen(wfd, "wb")  # each closed once, on any path
    done = pid = 0
    try:
        pid = _fork_reader(rfd, wfd, paths[own:])
        sink.close()  # the reader's end: once the reader is gone, reading here ends
        yield from (read_file(path, False) for path in paths[:own])
        done = own
        while done < len(paths):
            try:
                batch: list[Read] = marshal.load(stream)  # noqa: S302 (our own reader's)
            except (EOFError, ValueError, TypeError):
                break
            yield from batch
            done += len(batch)
    finally:
        sink.close()
        stream.close()  # before the wait: a reader blocked on a full pipe then fails
        if pid:  # (an interrupt may come before it is known: that reader fails on the pipe)
            os.waitpid(pid, 0)
    yield from (read_file(path, False) for path in paths[done:])


def _widen(fd: int) -> None:
    """Let the pipe hold _PIPE_BYTES (Linux's F_SETPIPE_SZ). Only speed depends on it: a
    smaller pipe, as a user over their pipe-buffer quota gets, only makes the reader wait."""
    import fcntl

    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)
