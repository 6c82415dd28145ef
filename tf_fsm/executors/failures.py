"""Failure classes: what went wrong with an agent invocation, and whether trying again helps.

A *transient* failure is the infrastructure's, not the work's: the agent process crashed, ran
past its timeout, was killed, or its model provider answered with a rate limit, a 5xx or a
network error. The phase restarts the invocation (`executor.maxRestarts`, exponential backoff
with jitter); it never counts as a blocked attempt and never escalates. The quality gate's
verdict is the only failure that does (class `quality`).

Pure: no clock, no process; randomness comes in as an argument.
"""

from __future__ import annotations

import random
from collections.abc import Callable

# the quality gate blocked the attempt; workflow.escalation.maxCostUsd is spent: classes the
# read model decides (tf_fsm.core.ticket_rules), named here with the executors' own
from tf_fsm.core.ticket_rules import BUDGET as BUDGET
from tf_fsm.core.ticket_rules import QUALITY as QUALITY
from tf_fsm.executors.usage import AgentReport, is_transient_error

CRASH = "crash"  # the agent exited nonzero
TIMEOUT = "timeout"  # killed at executor.timeoutSeconds
KILLED = "killed"  # ended by a signal from outside (OOM killer, kill -9, a person)
PROVIDER = "provider"  # the model provider: rate limit, 5xx, network
AGENT_ERROR = "agent_error"  # the CLI reported an error a retry will meet again (401, bad model)
NO_OUTPUT = "no_output"  # exited 0 without writing its artifact
UNCOUNTABLE = "uncountable"  # a reviewer's file with no severity sections or statistics
#: the merge queue: the rebase onto the moved base conflicts, or a gate fails after it
MERGE_CONFLICT = "merge_conflict"
#: the merge queue: the base branch's checkout cannot take the merge now (its own staged
#: changes, a person's merge in progress, a hook refusing the commit)
MERGE_REFUSED = "merge_refused"

TRANSIENT: frozenset[str] = frozenset({CRASH, TIMEOUT, KILLED, PROVIDER})
#: exit codes a shell reports for a child killed by SIGKILL / SIGTERM (128 + signal number)
_SIGNAL_EXITS = frozenset({128 + 9, 128 + 15})
MAX_BACKOFF_SECONDS = 300.0


def classify(
    *, timed_out: bool, exit_code: int | None, report: AgentReport
) -> tuple[str, str] | None:
    """(class, one-line failure) of a finished agent process, or None if it succeeded.
    The CLI's own error report wins over its exit code: pi exits 0 after a 429."""
    if timed_out:
        return TIMEOUT, ""
    if exit_code is not None and (exit_code < 0 or exit_code in _SIGNAL_EXITS):
        signal = -exit_code if exit_code < 0 else exit_code - 128
        return KILLED, f"killed by signal {signal}"
    if report.error is not None:
        first_line = report.error.strip().splitlines()[0] if report.error.strip() else "error"
        kind = PROVIDER if is_transient_error(report.error) else AGENT_ERROR
        return kind, f"the agent reported {'a provider' if kind == PROVIDER else 'an'} error: " + (
            first_line[:300]
        )
    if exit_code not in (0, None):
        return CRASH, f"exit code {exit_code}"
    return None


def backoff_delay(restart: int, base: float, rng: Callable[[], float] = random.random) -> float:
    """Seconds before restart number `restart` (1, 2, ...): exponential, with "equal jitter"
    (half fixed, half random) so parallel tickets hitting one rate limit spread out."""
    if base <= 0:
        return 0.0
    ceiling = min(MAX_BACKOFF_SECONDS, base * 2.0 ** (restart - 1))
    return ceiling / 2 + rng() * ceiling / 2
