"""Children the door starts itself, tied to tf_fsm's life by the parent-death signal: where
there is no launcher (tf_fsm.process.launcher: no pidfds, not Linux), and for a long-lived
server tf_fsm starts and ends itself (`start_process`). docs/executors.md, "Agents die with
tf_fsm".
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from tf_fsm.process import launcher

_PR_SET_PDEATHSIG = 1


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's prctl, looked up once in the parent: the child, between fork and exec, then
    only calls it (importing ctypes there cost milliseconds per agent)."""
    try:
        import ctypes

        prctl: Callable[..., int] = ctypes.CDLL(None, use_errno=True).prctl
        return prctl
    except (OSError, AttributeError):  # not Linux: the process group timeout still applies
        return None


def _die_with_parent() -> None:
    """In the child, before exec: if tf_fsm is killed (even SIGKILL), take the child down too."""
    prctl = _prctl()
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@functools.cache
def _setpriv() -> str | None:
    """util-linux's `setpriv`, if it sets the parent-death signal (2.33 and later). It sets
    the signal and execs the command, so Python starts the child with vfork; a `preexec_fn`
    makes it fork the whole interpreter (3-4 ms more per agent) and is unsafe in a process
    with threads, such as `tf-fsm watch`. Probed once per process."""
    found = shutil.which("setpriv")
    if found is None:
        return None
    try:
        probe = subprocess.run(
            [found, "--pdeathsig", "KILL", "--", found, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return found if probe.returncode == 0 else None


def find_program(name: str, cwd: Path, env: Mapping[str, str] | None) -> str:
    """The file `name` runs, found as Popen would find it (the child's PATH, or relative to
    `cwd`), or the FileNotFoundError Popen would raise: `setpriv` is what execs it."""
    if os.sep in name:
        path = cwd / name
        if path.is_file():
            if not os.access(path, os.X_OK):
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), name)
            return str(path)
    else:
        search = (env if env is not None else os.environ).get("PATH", os.defpath)
        found = shutil.which(name, path=search)
        if found is not None:
            return str(cwd / found)
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), name)


def with_parent_death(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str] | None
) -> tuple[list[str], Callable[[], None] | None]:
    """The argv to start, and the preexec_fn if one is needed, so the child dies with us."""
    if sys.platform != "linux" or not argv:
        return list(argv), None
    setpriv = _setpriv()
    if setpriv is not None:
        program = find_program(argv[0], cwd, env)
        return [setpriv, "--pdeathsig", "KILL", "--", program, *argv[1:]], None
    if _prctl() is not None:
        return list(argv), _die_with_parent
    return list(argv), None  # no prctl: the process group timeout still applies


def parent_death() -> str:
    """How the processes tf_fsm starts are tied to its life, in words (`tf-fsm doctor`)."""
    if launcher.available():  # asked, not started: the door starts it at its first child
        return "agents die with tf_fsm (started and ended by its launcher process)"
    if sys.platform != "linux":
        return "agents are ended by their process group at a timeout or Ctrl-C (not Linux)"
    if (found := _setpriv()) is not None:
        return f"agents die with tf_fsm (parent-death signal set by {found})"
    if _prctl() is not None:
        return (
            "agents die with tf_fsm (parent-death signal set by a hook before exec; "
            "util-linux setpriv 2.33+ on PATH would save a few ms per agent)"
        )
    return "agents are ended by their process group at a timeout or Ctrl-C (no prctl)"


def start_process(
    argv: Sequence[str], *, cwd: Path, stdout: int | IO[Any] | None, stderr: int | IO[Any] | None
) -> subprocess.Popen[bytes]:
    """A long-lived child (a server) of tf_fsm's: it leads its own process group, dies with
    tf_fsm (the parent-death signal, on Linux) and is the caller's to wait for and to end."""
    command, preexec = with_parent_death(argv, cwd, None)
    return subprocess.Popen(
        command,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        start_new_session=True,
        preexec_fn=preexec,
    )
