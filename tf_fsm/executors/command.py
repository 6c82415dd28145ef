"""The `command` executor: the configured agent CLI, run as a process for each invocation.

The argv is `executor.command` when set (it overrides the preset's argv), else the preset's
(tf_fsm/executors/presets.py). With a preset, its parser reads the CLI's JSON output for
usage, cost and provider errors either way; a command whose output is not that JSON simply
reports none.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

from tf_fsm.executors.base import ExecutorError, Invocation, InvocationResult
from tf_fsm.executors.failures import TIMEOUT, classify
from tf_fsm.executors.live_log import LiveLog
from tf_fsm.executors.presets import Preset
from tf_fsm.executors.usage import AgentReport
from tf_fsm.process.door import run_process, tail
from tf_fsm.storage.redact import Redactor


class CommandExecutor:
    def __init__(
        self,
        argv: Sequence[str] | None,
        root: Path,
        environ: Mapping[str, str] | None = None,
        preset: Preset | None = None,
        program: str | None = None,
        extra_args: Sequence[str] = (),
    ):
        self.argv = list(argv or [])
        self.root = root
        self.environ = dict(os.environ if environ is None else environ)
        self.preset = preset
        self.program = program or (preset.program if preset else None)
        self.extra_args = list(extra_args)

    @functools.cached_property
    def redactor(self) -> Redactor:
        """The secrets of the agent's environment (built on first use: compiling costs ms)."""
        return Redactor.from_environ(self.environ)

    @property
    def setting(self) -> str:
        return "executor.command" if self.argv or self.preset is None else "executor.program"

    def program_path(self) -> str | None:
        """Where the program is (absolute), or None when it cannot be found."""
        program = self.argv[0] if self.argv else self.program
        if not program:
            return None
        if os.sep in program:
            path = Path(program) if Path(program).is_absolute() else self.root / program
            return str(path) if path.is_file() and os.access(path, os.X_OK) else None
        return shutil.which(program, path=self.environ.get("PATH"))

    def check(self) -> None:
        if not self.argv and self.preset is None:
            raise ExecutorError(
                "executor.command is not set, nor executor.preset: name your agent CLI "
                '("preset": "pi", "claude" or "codex") or give its argv, e.g. '
                '["my-agent", "--model", "{model}"] (see docs/agents.md)',
                "executor.command",
            )
        if self.program_path() is None:
            program = self.argv[0] if self.argv else str(self.program)
            where = "not an executable file" if os.sep in program else "not found on PATH"
            hint = ""
            if not self.argv and self.preset is not None:
                hint = f" (install it: npm install -g {self.preset.package})"
            raise ExecutorError(f"{program}: {where}{hint}", self.setting)

    def command_line(self, invocation: Invocation) -> tuple[list[str], list[str]]:
        """The argv this invocation runs, and the settings the preset could not map."""
        values = invocation.variables()
        if self.argv:
            return [arg.format(**values) for arg in self.argv], []
        if self.preset is None:
            raise ExecutorError("no agent CLI configured", "executor.preset")
        extra = [arg.format(**values) for arg in self.extra_args]
        return self.preset.argv(invocation.model, invocation.thinking, self.program, extra)

    def _live_log(self, invocation: Invocation) -> AbstractContextManager[LiveLog | None]:
        """The agent's output on disk while it runs, if the invocation names a file for it."""
        if invocation.live_log is None:
            return nullcontext()
        within = invocation.live_log_within or invocation.root
        return LiveLog(invocation.live_log, within=within, redact=self.redactor)

    def invoke(self, invocation: Invocation) -> InvocationResult:
        argv, unmapped = self.command_line(invocation)
        if os.sep in argv[0] and not Path(argv[0]).is_absolute():
            # a program named relative to the project root, wherever the agent runs
            argv = [str(self.root / argv[0]), *argv[1:]]
        with self._live_log(invocation) as live:
            result = run_process(
                argv,
                cwd=invocation.workdir,
                env={**self.environ, **invocation.environment()},
                stdin=invocation.prompt,
                timeout=invocation.timeout,
                on_output=live.write if live is not None else None,
            )
        stopped = live.stopped if live is not None else None
        log = (
            f"$ {shlex.join(argv)}\n"
            # what doctor reports, said where the run's evidence is: the CLI's default applied
            + "".join(f"# not mapped (tf-fsm doctor): {problem}\n" for problem in unmapped)
            + f"# exit code: {result.exit_code}  duration: {result.duration:.2f}s"
            f"{'  TIMED OUT' if result.timed_out else ''}\n"
            # the live view failed, not the agent: said, not raised
            + (f"# live log stopped: {stopped}\n" if stopped is not None else "")
            + f"## stdout\n{result.stdout}\n## stderr\n{result.stderr}\n"
        )
        report = self.preset.parse(result.stdout) if self.preset else AgentReport()
        verdict = classify(timed_out=result.timed_out, exit_code=result.exit_code, report=report)
        failure = failure_class = None
        if verdict is not None:
            failure_class, failure = verdict
            if failure_class == TIMEOUT:
                failure = f"timed out after {invocation.timeout:g}s (process group killed)"
        return InvocationResult(
            ok=verdict is None,
            duration=result.duration,
            failure=failure,
            exit_code=result.exit_code,
            # redacted before it is cut: a secret the cut would halve is still recognised
            stderr_tail=tail(result.stderr, redact=self.redactor)
            or tail(report.error or "", lines=10**6, redact=self.redactor),
            log=log,
            failure_class=failure_class,
            usage=report.usage,
        )
