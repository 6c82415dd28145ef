"""The one function through which tf_fsm starts a subprocess.

Each child leads its own process group, so a timeout (or Ctrl-C) ends everything it started,
not just the direct child.
"""

from __future__ import annotations

import functools
import os
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
    """In the child, before exec: if tf_fsm is killed (even SIGKILL), take the child down too,
    so an orphaned agent never writes into a ticket another run has resumed."""
    prctl = _prctl()
    if prctl is not None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


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
    linux = sys.platform == "linux" and _prctl() is not None
    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=_die_with_parent if linux else None,
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
