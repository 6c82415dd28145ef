"""The `handoff` executor: a person, or an agent in another terminal or IDE, does the phase.

tf_fsm writes the rendered prompt (`prompts/attempt-<n>/<phase>-<role>.md`) and waits for the
phase's artifact. A `run` that does not see it within `executor.waitSeconds` leaves the ticket
waiting (exit 6); `tf-fsm watch` resumes it when the file lands, or `tf-fsm run` again does.
An artifact counts once it is newer than its prompt and has stopped changing for
`executor.stableSeconds`, so a file still being written is not taken half-done.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tf_fsm.executors.base import Invocation, InvocationResult


def ready(
    output_mtime_ns: int | None, prompt_mtime_ns: int, quiet_for: float, stable: float
) -> bool:
    """Pure: is the artifact there, written after its prompt, and quiet long enough?"""
    return (
        output_mtime_ns is not None and output_mtime_ns >= prompt_mtime_ns and quiet_for >= stable
    )


class HandoffExecutor:
    def __init__(
        self,
        wait_seconds: float = 0.0,
        stable_seconds: float = 0.5,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.wait_seconds, self.stable_seconds = wait_seconds, stable_seconds
        self.clock, self.sleep = clock, sleep

    def check(self) -> None:
        """Nothing to check: the work happens outside tf_fsm."""

    def invoke(self, invocation: Invocation) -> InvocationResult:
        started = time.monotonic()
        deadline = started + self.wait_seconds
        prompt_mtime = invocation.prompt_file.stat().st_mtime_ns
        while True:
            try:
                st = invocation.output.stat()
                mtime: int | None = st.st_mtime_ns
                quiet = self.clock() - st.st_mtime_ns / 1e9
            except FileNotFoundError:
                mtime, quiet = None, 0.0
            if ready(mtime, prompt_mtime, quiet, self.stable_seconds):
                return InvocationResult(
                    ok=True,
                    duration=time.monotonic() - started,
                    exit_code=0,
                    log=f"hand-off: {invocation.output.name} arrived\n",
                    accepted_existing=True,
                )
            if time.monotonic() >= deadline:
                return InvocationResult(
                    ok=False,
                    duration=time.monotonic() - started,
                    failure=f"waiting for {invocation.output} (prompt: {invocation.prompt_file})",
                    log=f"hand-off: waiting for {invocation.output.name}\n",
                    waiting=True,
                )
            self.sleep(min(0.1, max(0.01, self.stable_seconds / 5)))
