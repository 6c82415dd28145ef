"""One exception root. Each error keeps its context as attributes, builds its own message and
carries its exit code, so the CLI prints it and exits with it without knowing how it was
raised (tf_fsm.cli.exits is the one place that turns an error into an exit)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, NamedTuple

#: the exit codes errors carry (tf_fsm.cli.exits has the whole table, with what each means)
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
#: a Temporal server did not answer (sysexits' EX_UNAVAILABLE; tf_fsm.temporal.connect)
EXIT_UNAVAILABLE = 69
EXIT_STORAGE = 74
EXIT_LOCKED = 75
#: also how the backlog loop tells an interrupted worker (tf_fsm.loop.ralph)
EXIT_INTERRUPTED = 130


class TfFsmError(Exception):
    """Root of every error tf_fsm raises on purpose."""

    #: how `tf-fsm` exits when this error ends a command
    exit_code: ClassVar[int] = EXIT_BAD_INPUT

    def __init__(self) -> None:
        super().__init__(self.message)

    @property
    def message(self) -> str:  # pragma: no cover - every subclass overrides it
        return type(self).__name__

    def __str__(self) -> str:
        return self.message


class SettingsProblem(NamedTuple):
    """One thing wrong in a settings file: where (dotted key path) and what."""

    key: str
    problem: str
    suggestion: str | None = None

    def render(self) -> str:
        hint = f" (did you mean {self.suggestion}?)" if self.suggestion else ""
        where = self.key or "<top level>"
        return f"{where}: {self.problem}{hint}"


class SettingsError(TfFsmError):
    """The settings file cannot be used as it is."""

    def __init__(self, path: Path | None, problems: Sequence[SettingsProblem]) -> None:
        self.path = path
        self.problems = tuple(problems)
        super().__init__()

    @property
    def message(self) -> str:
        source = str(self.path) if self.path else "settings"
        if len(self.problems) == 1:
            return f"{source}: {self.problems[0].render()}"
        lines = [f"{source}: {len(self.problems)} problems"]
        lines += [f"  - {p.render()}" for p in self.problems]
        return "\n".join(lines)


class InvalidTicketIdError(TfFsmError):
    """A ticket id that must not be turned into a path."""

    def __init__(self, ticket_id: str, reason: str) -> None:
        self.ticket_id = ticket_id
        self.reason = reason
        super().__init__()

    @property
    def message(self) -> str:
        return f"invalid ticket id {self.ticket_id!r}: {self.reason}"


class CorruptStateError(TfFsmError):
    """A persisted file exists but cannot be trusted. It is never silently replaced."""

    def __init__(self, path: Path, problem: str, remedy: str | None = None) -> None:
        self.path = path
        self.problem = problem
        self.remedy = remedy
        super().__init__()

    @property
    def message(self) -> str:
        text = f"{self.path}: {self.problem}"
        return f"{text}\n  {self.remedy}" if self.remedy else text


class ProjectNotFoundError(TfFsmError):
    """No tf_fsm project above the working directory."""

    def __init__(self, start: Path) -> None:
        self.start = start
        super().__init__()

    @property
    def message(self) -> str:
        return (
            f"no tf_fsm project found at or above {self.start} "
            "(looked for .tf/ or .tickets/; run `tf-fsm init` or pass --root)"
        )


class InvalidArtifactNameError(TfFsmError):
    """An artifact name that would leave the ticket directory or clobber a file the store owns."""

    def __init__(self, name: str, reason: str) -> None:
        self.name = name
        self.reason = reason
        super().__init__()

    @property
    def message(self) -> str:
        return f"invalid artifact name {self.name!r}: {self.reason}"


class TicketLockedError(TfFsmError):
    """Another live process holds the ticket's lock. The lock is an OS lock, so it is never stale:
    it disappears when its holder exits, however it exits."""

    exit_code = EXIT_LOCKED

    def __init__(self, ticket_id: str, holder_pid: int | None, lock_path: Path) -> None:
        self.ticket_id = ticket_id
        self.holder_pid = holder_pid
        self.lock_path = lock_path
        super().__init__()

    @property
    def message(self) -> str:
        holder = f"pid {self.holder_pid}" if self.holder_pid is not None else "holder pid unknown"
        return (
            f"ticket {self.ticket_id} is locked by another tf-fsm process "
            f"({holder}; lock {self.lock_path})\n"
            "  wait for it to finish or stop it; the lock is released as soon as that process exits"
        )


class TicketError(TfFsmError):
    """A ticket that is missing or cannot be parsed."""

    def __init__(self, path: Path, problem: str, line: int | None = None) -> None:
        self.path, self.problem, self.line = path, problem, line
        super().__init__()

    @property
    def message(self) -> str:
        where = f"{self.path}:{self.line}" if self.line else str(self.path)
        return f"{where}: {self.problem}"


class ExecutorError(TfFsmError):
    """The executor cannot run at all (e.g. its program is missing). Raised before any phase."""

    def __init__(self, problem: str, setting: str = "executor") -> None:
        self.problem, self.setting = problem, setting
        super().__init__()

    @property
    def message(self) -> str:
        return f"{self.setting}: {self.problem}"


class PromptTemplateError(TfFsmError):
    """A template that cannot be loaded or rendered, with where and why."""

    def __init__(self, template: Path | str, problem: str, line: int | None = None) -> None:
        self.template, self.problem, self.line = template, problem, line
        super().__init__()

    @property
    def message(self) -> str:
        where = f"{self.template}:{self.line}" if self.line else str(self.template)
        return f"prompt template {where}: {self.problem}"


class UnsafePathError(TfFsmError):
    """A write that a symlink would lead out of where tf_fsm may write (the project, or a
    knowledge directory configured outside it). Nothing is written."""

    def __init__(self, link: Path, target: str, boundary: Path, problem: str = "") -> None:
        self.link, self.target, self.boundary = link, target, boundary
        self.problem = problem or f"is a symlink to {target}, outside {boundary}"
        super().__init__()

    @property
    def message(self) -> str:
        return f"{self.link}: {self.problem}; tf-fsm does not write through it (docs/safety.md)"


class StorageError(TfFsmError):
    """The disk refused a write: full, read-only, or not permitted. Raised before anything
    half-written is left: the file tf_fsm was replacing keeps its old content."""

    exit_code = EXIT_STORAGE

    def __init__(self, path: Path, operation: str, reason: str) -> None:
        self.path, self.operation, self.reason = path, operation, reason
        super().__init__()

    @property
    def message(self) -> str:
        return f"cannot {self.operation} {self.path}: {self.reason}"


class GitError(TfFsmError):
    """A git command tf_fsm ran failed: the command, where, and what git said."""

    def __init__(self, argv: Sequence[str], cwd: Path, code: int | None, said: str) -> None:
        self.argv, self.cwd, self.code, self.said = tuple(argv), cwd, code, said.strip()
        super().__init__()

    @property
    def message(self) -> str:
        how = "timed out" if self.code is None else f"exited {self.code}"
        said = f": {self.said.splitlines()[-1]}" if self.said else ""
        return f"git {' '.join(self.argv)} (in {self.cwd}) {how}{said}"


class _SaidError(TfFsmError):
    """An error whose one sentence, given where it is raised, is the whole message."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__()

    @property
    def message(self) -> str:
        return self.problem


class WorkspaceError(_SaidError):
    """A ticket's workspace cannot be made or used as asked (not a git repository, no base
    branch, a worktree directory that is not the ticket's): its own words say what to do."""


class UsageError(_SaidError):
    """The command line asks for something that cannot be done (its own words say what)."""


class ShowError(UsageError):
    """`tf-fsm tickets show` cannot pick one file, in tk's words ("ticket 'x' not found")."""


class GraphvizError(UsageError):
    """`dot` is missing (the message says how to install it) or failed."""


class TransitionError(TfFsmError):
    """A trigger the lifecycle machine refuses in the ticket's current state: a bug in tf_fsm,
    never bad input."""

    exit_code = EXIT_INTERNAL

    def __init__(self, ticket_id: str, state: str, trigger: str, refused_by: Sequence[str]) -> None:
        self.ticket_id, self.state, self.trigger = ticket_id, state, trigger
        self.refused_by = tuple(refused_by)
        super().__init__()

    @property
    def message(self) -> str:
        if not self.refused_by:
            return f"{self.ticket_id}: {self.trigger!r} is not possible from state {self.state!r}"
        guards = ", ".join(self.refused_by)
        return f"{self.ticket_id}: {self.trigger!r} from {self.state!r} refused by {guards}"


class TicketFieldError(TfFsmError):
    """A ticket field a person gave (`tickets create`/`edit`, the board's forms) that tk could
    not take: named, nothing written."""

    def __init__(self, field: str, problem: str) -> None:
        self.field, self.problem = field, problem
        super().__init__()

    @property
    def message(self) -> str:
        return f"{self.field}: {self.problem}"


class TicketChangedError(TfFsmError):
    """An edit of a ticket file that changed on disk since the editor read it (its content
    hash differs): refused, nothing written. Read it again and redo the edit."""

    exit_code = EXIT_LOCKED

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__()

    @property
    def message(self) -> str:
        return f"{self.path}: changed on disk since you opened it; nothing written (reload it)"
