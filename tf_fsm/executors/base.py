"""What every executor receives and returns. An executor runs one agent invocation: one role
in one phase, told (by prompt and environment) which artifact to write."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from tf_fsm.errors import ExecutorError
from tf_fsm.executors.usage import Usage

__all__ = ["ExecutorError", "Invocation", "InvocationResult", "OutputMark"]


@dataclass(frozen=True)
class Invocation:
    ticket_id: str
    phase: str  # research, implement, review, fix, verify, close
    role: str
    model: str
    thinking: str | None
    attempt: int
    root: Path
    artifact_dir: Path
    output: Path  # absolute path of the artifact this invocation must write
    prompt: str
    prompt_file: Path
    chain_context: Path
    log_file: Path
    timeout: float | None = None
    #: where the agent runs: the ticket's worktree, or (None) the project root
    cwd: Path | None = None
    #: where an executor that runs a process shows its output while it runs (redacted, removed
    #: at the end: tf_fsm.executors.live_log); None: nowhere. Others ignore it.
    live_log: Path | None = None
    #: what no write of `live_log` may be led out of by a symlink (the ticket's directory, as
    #: for its other logs); None: `root`
    live_log_within: Path | None = None

    @property
    def workdir(self) -> Path:
        return self.cwd or self.root

    def variables(self) -> dict[str, str]:
        """The invocation's facts by name: TF_<NAME> in the environment, {name} in argv."""
        return {
            "ticket_id": self.ticket_id,
            "phase": self.phase,
            "role": self.role,
            "model": self.model,
            "thinking": self.thinking or "",
            "attempt": str(self.attempt),
            "artifact_dir": str(self.artifact_dir),
            "output": str(self.output),
            "prompt_file": str(self.prompt_file),
            "chain_context": str(self.chain_context),
        }

    def environment(self) -> dict[str, str]:
        return {f"TF_{name.upper()}": value for name, value in self.variables().items()}


@dataclass(frozen=True)
class InvocationResult:
    ok: bool
    duration: float
    failure: str | None = None  # one line: what went wrong
    exit_code: int | None = None
    stderr_tail: str = ""
    log: str = ""  # the invocation's whole output; tf_fsm writes it (redacted) to log_file
    waiting: bool = False  # hand-off: the artifact is not there yet (not a failure)
    accepted_existing: bool = False  # the executor checked the artifact itself (hand-off)
    failure_class: str | None = None  # tf_fsm/executors/failures.py; None when ok
    usage: Usage | None = None  # what the agent CLI reported, if it did


class Executor(Protocol):
    def check(self) -> None:
        """Raise ExecutorError if invocations cannot possibly run (checked before phase 1)."""

    def invoke(self, invocation: Invocation) -> InvocationResult: ...


@dataclass(frozen=True)
class OutputMark:
    """An artifact's identity before an invocation, to tell whether the invocation wrote it."""

    exists: bool
    mtime_ns: int = 0
    size: int = 0
    inode: int = 0

    @classmethod
    def of(cls, path: Path) -> OutputMark:
        try:
            st = path.stat()
        except FileNotFoundError:
            return cls(False)
        return cls(True, st.st_mtime_ns, st.st_size, st.st_ino)

    def written_since(self, path: Path) -> bool:
        now = OutputMark.of(path)
        return now.exists and now != self
