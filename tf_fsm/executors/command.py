"""The `command` executor: the configured agent CLI, run as a process for each invocation."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from tf_fsm._process import run_process, tail
from tf_fsm.executors.base import ExecutorError, Invocation, InvocationResult


class CommandExecutor:
    def __init__(
        self, argv: Sequence[str] | None, root: Path, environ: Mapping[str, str] | None = None
    ):
        self.argv = list(argv or [])
        self.root = root
        self.environ = dict(os.environ if environ is None else environ)

    def check(self) -> None:
        if not self.argv:
            raise ExecutorError(
                "executor.command is not set: give the agent CLI as an argv list, "
                'e.g. ["my-agent", "--model", "{model}"] (see docs/executors.md)',
                "executor.command",
            )
        program = self.argv[0]
        if os.sep in program:
            path = Path(program) if Path(program).is_absolute() else self.root / program
            if not (path.is_file() and os.access(path, os.X_OK)):
                raise ExecutorError(f"{program}: not an executable file", "executor.command")
        elif shutil.which(program, path=self.environ.get("PATH")) is None:
            raise ExecutorError(f"{program}: not found on PATH", "executor.command")

    def invoke(self, invocation: Invocation) -> InvocationResult:
        values = invocation.variables()
        argv = [arg.format(**values) for arg in self.argv]
        result = run_process(
            argv,
            cwd=invocation.root,
            env={**self.environ, **invocation.environment()},
            stdin=invocation.prompt,
            timeout=invocation.timeout,
        )
        log = (
            f"$ {' '.join(argv)}\n"
            f"# exit code: {result.exit_code}  duration: {result.duration:.2f}s"
            f"{'  TIMED OUT' if result.timed_out else ''}\n"
            f"## stdout\n{result.stdout}\n## stderr\n{result.stderr}\n"
        )
        failure = None
        if result.timed_out:
            failure = f"timed out after {invocation.timeout:g}s (process group killed)"
        elif result.exit_code != 0:
            failure = f"exit code {result.exit_code}"
        return InvocationResult(
            ok=failure is None,
            duration=result.duration,
            failure=failure,
            exit_code=result.exit_code,
            stderr_tail=tail(result.stderr),
            log=log,
        )
