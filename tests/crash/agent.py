#!/usr/bin/env python3
"""The crash scenario's agent: blocks attempts 1 and 2 with one Major finding, closes attempt 3.

Deterministic (its output depends only on the phase and the attempt), so a rerun after a crash
writes what the uninterrupted run wrote. Standalone (stdlib only): `tf-fsm run` runs it as the
command executor's agent (TF_PHASE, TF_ATTEMPT, TF_OUTPUT from the environment, the prompt on
stdin); the in-process agent of tests/crash/lifecycle.py calls `write_output` itself. It
writes through os.open/os.write, never fsyncing, as an agent (another process) does.
"""

from __future__ import annotations

import os
import sys

BLOCKED_ATTEMPTS = 2
REVIEW = "# Review: {ticket}\n\n## Major (should fix)\n{major}\n\n## Summary Statistics\n"
REVIEW += "- Major: {n}\n"


def output_text(ticket: str, phase: str, attempt: int) -> str:
    if phase not in ("review", "verify"):
        return f"# {phase}\n\nDone for attempt {attempt}.\n"
    n = 1 if attempt <= BLOCKED_ATTEMPTS else 0
    major = "- `a.py:1` - still wrong" if n else "No issues found."
    return REVIEW.format(ticket=ticket, major=major, n=n)


def write_output(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


def main() -> None:
    sys.stdin.read()
    env = os.environ
    text = output_text(env["TF_TICKET_ID"], env["TF_PHASE"], int(env["TF_ATTEMPT"]))
    write_output(env["TF_OUTPUT"], text)


if __name__ == "__main__":
    main()
