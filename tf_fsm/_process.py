"""The one function through which tf_fsm starts a subprocess.

Each child leads its own process group, so a timeout (or Ctrl-C) ends everything it started,
not just the direct child. On Linux each child also dies with tf_fsm (the parent-death
signal), so an orphaned agent never writes into a ticket another run has resumed.
"""

from __future__ import annotations

import errno
import functools
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

KILL_GRACE_SECONDS = 2.0
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


def _program(name: str, cwd: Path, env: Mapping[str, str] | None) -> str:
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


def _with_parent_death(
    argv: Sequence[str], cwd: Path, env: Mapping[str, str] | None
) -> tuple[list[str], Callable[[], None] | None]:
    """The argv to start, and the preexec_fn if one is needed, so the child dies with us."""
    if sys.platform != "linux" or not argv:
        return list(argv), None
    setpriv = _setpriv()
    if setpriv is not None:
        return [setpriv, "--pdeathsig", "KILL", "--", _program(argv[0], cwd, env), *argv[1:]], None
    if _prctl() is not None:
        return list(argv), _die_with_parent
    return list(argv), None  # no prctl: the process group timeout still applies


def parent_death() -> str:
    """How the processes tf_fsm starts are tied to its life, in words (`tf-fsm doctor`)."""
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


@dataclass(frozen=True)
class ProcessResult:
    argv: tuple[str, ...]
    exit_code: int | None  # None when it was killed at its timeout
    timed_out: bool
    duration: float
    stdout: str
    stderr: str


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, KILL_GRACE_SECONDS), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        if grace is None:
            return
        try:
            proc.wait(timeout=grace)
            # The leader is gone; make sure nothing it spawned lingers in the group.
            os.killpg(proc.pid, signal.SIGKILL)
        except (subprocess.TimeoutExpired, ProcessLookupError, PermissionError):
            continue
        return


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str] | None = None,
    stdin: str | None = None,
    timeout: float | None = None,
) -> ProcessResult:
    """Run `argv` (no shell), feed `stdin`, capture both streams, kill the group on timeout."""
    started = time.monotonic()
    command, preexec = _with_parent_death(argv, cwd, env)
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=preexec,
    )
    data = stdin.encode() if stdin is not None else None
    timed_out = False
    try:
        out, err = proc.communicate(data, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc)
        out, err = proc.communicate()
    except BaseException:  # Ctrl-C: take the agent down with us, then let the caller see it
        _kill_group(proc)
        proc.communicate()
        raise
    return ProcessResult(
        argv=tuple(argv),
        exit_code=None if timed_out else proc.returncode,
        timed_out=timed_out,
        duration=time.monotonic() - started,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
    )


def tail(text: str, lines: int = 20, limit: int = 2000) -> str:
    """The last lines of a stream, bounded, for one-line error reports."""
    if lines <= 0 or limit <= 0:
        return ""
    kept = "\n".join(text.rstrip().splitlines()[-lines:])
    return kept[-limit:]
