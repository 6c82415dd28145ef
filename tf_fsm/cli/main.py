"""Command line: `main`, the exit codes, and the commands that set up and run tickets
(init, run, resume, with `run --plan`'s output).

This is the only module that turns errors into exit codes. The parser is in
tf_fsm.cli.parser, the read-only queries (settings, status, gate, tickets, prompts) in
tf_fsm.cli.query, the tool commands in tf_fsm.cli.tools. Heavy modules are imported inside
the command functions so `tf-fsm --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from tf_fsm.errors import (
    CorruptStateError,
    ExecutorError,
    InvalidArtifactNameError,
    InvalidTicketIdError,
    ProjectNotFoundError,
    PromptTemplateError,
    SettingsError,
    StorageError,
    TfFsmError,
    TicketError,
    TicketLockedError,
    UnsafePathError,
)


class UsageError(TfFsmError):
    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__()

    @property
    def message(self) -> str:
        return self.problem


EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_BAD_INPUT = 2
EXIT_BLOCKED = 3
EXIT_EXHAUSTED = 4
EXIT_ERROR = 5
EXIT_WAITING = 6
#: the disk refused a write: full, read-only, not permitted (sysexits' EX_IOERR)
EXIT_STORAGE = 74
EXIT_LOCKED = 75
EXIT_INTERRUPTED = 130
#: standard output was closed early (`tf-fsm tickets ready | head -1`): 128 + SIGPIPE, what a
#: shell reports for a program that SIGPIPE killed
EXIT_STDOUT_CLOSED = 141

#: Error class -> exit code. Checked in order; the first match wins.
EXIT_CODES: tuple[tuple[type[TfFsmError], int], ...] = (
    (TicketLockedError, EXIT_LOCKED),
    (SettingsError, EXIT_BAD_INPUT),
    (InvalidTicketIdError, EXIT_BAD_INPUT),
    (InvalidArtifactNameError, EXIT_BAD_INPUT),
    (CorruptStateError, EXIT_BAD_INPUT),
    (ProjectNotFoundError, EXIT_BAD_INPUT),
    (TicketError, EXIT_BAD_INPUT),
    (ExecutorError, EXIT_BAD_INPUT),
    (UsageError, EXIT_BAD_INPUT),
    (PromptTemplateError, EXIT_BAD_INPUT),
    (UnsafePathError, EXIT_BAD_INPUT),
    (StorageError, EXIT_STORAGE),
)
#: How a run ended -> exit code.
OUTCOME_CODES = {
    "closed": EXIT_OK,
    "already_closed": EXIT_OK,
    "blocked": EXIT_BLOCKED,
    "exhausted": EXIT_EXHAUSTED,
    "error": EXIT_ERROR,
    "waiting": EXIT_WAITING,
}


def print_json(obj: Any, *, indent: int | None = None) -> None:
    """`--json` output. The json module is imported here, not by every command."""
    import json

    print(json.dumps(obj, indent=indent))


def _console() -> Any:
    import errno

    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich's own handling exits 1; `main` handles a closed stdout for every command
            raise BrokenPipeError(errno.EPIPE, "standard output was closed")

    # Piped output keeps whole model ids rather than rich's 80-column ellipses.
    return _Console(width=None if sys.stdout.isatty() else 200)


def _root(args: argparse.Namespace) -> Path:
    """The project root: `--root`, else `$TF_FSM_ROOT`, else found by walking up. A root given
    by option or variable must be an existing directory (only `init` creates one)."""
    import os

    from tf_fsm.settings.project import ROOT_ENV, find_project_root  # no pydantic to find it

    if args.root:
        return _existing_dir(Path(args.root).resolve(), f"--root {args.root}")
    if os.environ.get(ROOT_ENV):
        return _existing_dir(find_project_root(), f"${ROOT_ENV} {os.environ[ROOT_ENV]}")
    return find_project_root()


def _existing_dir(path: Path, source: str) -> Path:
    if not path.exists():
        raise UsageError(f"{source}: no such directory (the project root must exist)")
    if not path.is_dir():
        raise UsageError(f"{source}: not a directory (the project root must be one)")
    return path


def _ticket_ids(ids: Sequence[str]) -> list[str]:
    from tf_fsm.storage.ticket_id import validate_ticket_id

    return [validate_ticket_id(i) for i in ids]


def cmd_init(args: argparse.Namespace) -> int:
    import os

    from tf_fsm.settings.load import ROOT_ENV, SETTINGS_RELPATH, init_settings, load_settings
    from tf_fsm.storage.store import atomic_write_json, make_dirs
    from tf_fsm.tk.tickets import tickets_dir

    # init creates the project, so it does not walk up: --root, else $TF_FSM_ROOT, else here;
    # a root that does not exist yet is created (with its parents), as `git init DIR` does.
    given = args.root or os.environ.get(ROOT_ENV)
    root = Path(given or Path.cwd()).resolve()
    source = f"--root {args.root}" if args.root else f"${ROOT_ENV} {given}" if given else str(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"{source}: not a directory (the project root must be one)") from None
    except OSError as exc:
        raise UsageError(f"{source}: cannot create the directory: {exc.strerror}") from None
    path = root / SETTINGS_RELPATH
    if path.exists():
        raise UsageError(f"{path} already exists; tf-fsm init never overwrites settings")
    atomic_write_json(path, init_settings(), within=root)
    load_settings(root, record=True)  # checks what init wrote, and records it for `status`
    make_dirs(tickets_dir(root), within=root)
    print(f"wrote {path}")
    print(f"tickets go in {tickets_dir(root)}/<id>.md; set executor.command, then: tf-fsm run <id>")
    return EXIT_OK


def _run_options(args: argparse.Namespace) -> Any:
    from tf_fsm.engine.api import RunOptions

    return RunOptions(
        once=args.once,
        retry_reset=args.retry_reset,
        research=args.research,
        auto=args.auto,
        create_followups=args.create_followups,
        simplify_tickets=args.simplify_tickets,
        final_review_loop=args.final_review_loop,
    )


def _report(outcome: Any) -> int:
    line = {
        "closed": "CLOSED",
        "already_closed": "already closed",
        "blocked": "BLOCKED (retries left)",
        "exhausted": "BLOCKED (retries exhausted)",
        "same-failure": "BLOCKED (the same failure repeated)",
        "error": "ERROR (resumable: run it again)",
        "waiting": "WAITING for a hand-off artifact (tf-fsm watch, or run again, picks it up)",
    }["same-failure" if outcome.reason.startswith("same-failure") else outcome.status]
    from tf_fsm.views.status import BLOCKED_ATTEMPTS, blocked_attempts
    from tf_fsm.views.terminal import terminal_safe

    closed = outcome.status in ("closed", "already_closed")
    count = blocked_attempts(outcome.retry_count, outcome.max_retries, closed)
    print(  # the reason may hold an agent's own words: escaped for the terminal
        f"{outcome.ticket_id}: {line} after attempt {outcome.attempt} "
        f"({BLOCKED_ATTEMPTS} {count}): {terminal_safe(outcome.reason)}",
        file=sys.stdout if closed else sys.stderr,
    )
    return OUTCOME_CODES[outcome.status]


def cmd_run(args: argparse.Namespace) -> int:
    from tf_fsm.engine.orchestrator import run_ticket
    from tf_fsm.loop.worker import run_interrupts
    from tf_fsm.views.progress import ConsoleObserver

    root = _root(args)
    (ticket_id,) = _ticket_ids([args.ticket])
    if args.plan:
        return _print_plan(root, ticket_id, args)
    _end_orphans()
    options = _worker_options(args, root, ticket_id)
    with run_interrupts():  # SIGTERM interrupts a run as Ctrl-C does
        outcome = run_ticket(root, ticket_id, options, observer=ConsoleObserver())
    if args.json:
        print_json(_outcome_json(outcome))
        return OUTCOME_CODES[outcome.status]
    return _report(outcome)


def cmd_resume(args: argparse.Namespace) -> int:
    """`run`, restricted to a ticket whose current attempt is in progress or in error."""
    from tf_fsm.settings.load import knowledge_dir, load_settings
    from tf_fsm.storage.store import TicketStore
    from tf_fsm.views.status import next_step

    root = _root(args)
    (ticket_id,) = _ticket_ids([args.ticket])
    settings = load_settings(root)
    store = TicketStore(knowledge_dir(root, settings), ticket_id)
    state = store.load_retry_state()
    if state is None or not state.has_open_attempt:
        raise UsageError(
            f"{ticket_id}: nothing to resume (no attempt in progress or in error); "
            f"next: {next_step(store, state, settings)}; use `tf-fsm run {ticket_id}`"
        )
    return cmd_run(args)


def _end_orphans() -> None:
    """Before a run: end what a killed run's agents left running (tf_fsm.process.strays)."""
    from tf_fsm.process.strays import end_orphans

    if ended := end_orphans():
        print(f"tf-fsm: {ended}", file=sys.stderr)


def _outcome_json(outcome: Any) -> dict[str, Any]:
    return {
        "ticket": outcome.ticket_id,
        "status": outcome.status,
        "attempt": outcome.attempt,
        "attemptsRun": outcome.attempts_run,
        "retryCount": outcome.retry_count,
        "maxRetries": outcome.max_retries,
        "reason": outcome.reason,
    }


def _print_plan(root: Path, ticket_id: str, args: argparse.Namespace) -> int:
    from tf_fsm.engine.orchestrator import QuietObserver, TicketRun
    from tf_fsm.executors import make_executor
    from tf_fsm.settings.load import load_settings
    from tf_fsm.views.plan import plan

    settings = load_settings(root)
    run = TicketRun(
        root,
        ticket_id,
        _run_options(args),
        settings,
        make_executor(settings, root),
        QuietObserver(),
    )
    data = plan(run)
    if args.json:
        print_json(data, indent=2)
        return EXIT_OK
    if "retryReset" in data:  # --retry-reset: what it would move aside first
        print(f"{ticket_id}: --retry-reset: {data['retryReset']['why']}")
    print(f"{ticket_id}: {data['action'].replace('_', ' ')}: {data['why']}")
    if "sameFailure" in data:
        repeat = data["sameFailure"]
        print(f"same failure ({repeat['action']}): {repeat['reason']}")
    if "budget" in data:
        money = data["budget"]
        need = money["nextAttemptUpToUsd"]
        more = f"; the next attempt may cost up to ${need:.4f}" if need is not None else ""
        print(f"budget: ${money['spentUsd']:.4f} of ${money['maxCostUsd']:.4f} spent{more}")
    if "phases" not in data:
        return EXIT_OK
    escalated = ", ".join(data["escalatedRoles"]) or "none"
    prior = "yes" if data["priorFailure"] else "no"
    print(
        f"attempt {data['attempt']} (trigger {data['trigger']}, tier {data['tier']}, "
        f"escalated: {escalated}, prior failure in prompts: {prior})"
    )
    for phase in data["phases"]:
        mark = "run " if phase["runs"] else "skip"
        print(f"  {mark} {phase['phase']:<9} {phase['reason']}")
        for call in phase["invocations"]:
            print(
                f"         {call['role']:<24} {call['model']} ({call['source']}) "
                f"{Path(call['template']).name} [{call['templateOrigin']}] {call['promptBytes']} B"
            )
    if data.get("qualityGates"):
        import shlex

        print("quality gates, run by verify in this order (workflow.qualityGates):")
        for gate in data["qualityGates"]:
            if not gate["required"]:
                kind = "optional (reported, never blocks)"
            elif not gate["blocks"]:
                kind = "required (reported, never blocks: workflow.enableQualityGate is false)"
            else:
                rounds = gate["feedbackRounds"]
                kind = f"required, {f'up to {rounds}' if rounds else 'no'} fix rounds"
            print(f"  {gate['name']:<8} {kind}; cwd {gate['cwd']}: {shlex.join(gate['argv'])}")
            if gate["cannotStart"]:
                print(f"    cannot start: {gate['cannotStart']} (run exits 2)")
    return EXIT_OK


def _worker_options(args: argparse.Namespace, root: Path, ticket_id: str) -> Any:
    """The run's options; with `run --ralph LOOP` (hidden), as the backlog loop's worker
    processes run a ticket."""
    options = _run_options(args)
    if args.ralph is None:
        return options
    import dataclasses

    return dataclasses.replace(options, retry_trigger="ralph_retry", loop=args.ralph or None)


def build_parser() -> argparse.ArgumentParser:
    from tf_fsm.cli.parser import build_parser as build

    return build()


def main(argv: Sequence[str] | None = None, *, whole_process: bool = False) -> int:
    """Run one command and return its exit code. `whole_process` is for the `tf-fsm` program
    itself (see `entry`): a command marked `teardown=False` then ends the process here."""
    args: argparse.Namespace | None = None
    try:
        code, args = _main(argv)
        sys.stdout.flush()  # here, not at interpreter exit, where a closed pipe cannot be handled
    except BrokenPipeError:  # writing argparse's --help, or the flush above: stdout's reader left
        code = _drop_stdout()
    if whole_process and args is not None and _skips_teardown(args):
        _end_process(code)
    return code


def _skips_teardown(args: argparse.Namespace) -> bool:
    """A command marked `teardown=False`, unless a tracer or profiler watches the process
    (coverage, `python -m cProfile`): they write what they found at the interpreter's exit."""
    return (
        not getattr(args, "teardown", True) and sys.gettrace() is None and sys.getprofile() is None
    )


def entry() -> int:
    """The `tf-fsm` program (its console script and `python -m tf_fsm`)."""
    return main(whole_process=True)


def _end_process(code: int) -> NoReturn:
    """End the process without the interpreter's teardown, which frees every object and module
    one by one: about 6 of the 110 ms of `tf-fsm tickets ready` over 10,000 tickets. Only for a
    command that leaves nothing to clean up: no atexit hook, temporary file, child process or
    lock of its own (`tickets`, which only reads)."""
    import contextlib
    import os

    with contextlib.suppress(OSError):  # its reader has gone too: nothing more can be said
        sys.stderr.flush()
    os._exit(code)


def _main(argv: Sequence[str] | None) -> tuple[int, argparse.Namespace | None]:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help/--version
        return int(exc.code or 0), None
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:  # no command: a usage error, like argparse's own
        parser.print_help(sys.stderr)
        print("tf-fsm: error: a COMMAND is required", file=sys.stderr)
        return EXIT_BAD_INPUT, args
    return _run_command(func, args), args


def _run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    try:
        return func(args)
    except TfFsmError as exc:
        print(f"tf-fsm: error: {exc}", file=sys.stderr)
        return next((code for cls, code in EXIT_CODES if isinstance(exc, cls)), EXIT_INTERNAL)
    except KeyboardInterrupt:
        print("tf-fsm: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and _stdout_closed():
            return _drop_stdout()
        if (refused := _storage_error(exc)) is not None:
            print(f"tf-fsm: error: {refused}", file=sys.stderr)
            return EXIT_STORAGE
        if args.verbose:
            raise
        print(
            f"tf-fsm: internal error: {type(exc).__name__}: {exc} (rerun with --verbose)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def _storage_error(exc: Exception) -> StorageError | None:
    """An OSError raised outside the write door (tf_fsm.fs.atomic) that still says the disk
    refused: a bad environment, exit 74, naming the file, not an internal error."""
    from tf_fsm.fs.atomic import REFUSED

    if not isinstance(exc, OSError) or exc.errno not in REFUSED:
        return None
    where = Path(exc.filename) if exc.filename else Path("?")
    return StorageError(where, "access", exc.strerror or str(exc))


def _stdout_closed() -> bool:
    """Whether standard output's reader has gone (`| head` exited), as opposed to some other
    pipe breaking (an agent's stdin, say), which stays an internal error."""
    import select

    try:
        fd = sys.stdout.fileno()
        poller = select.poll()
    except (AttributeError, OSError, ValueError):  # no poll(), or no real stdout
        return True  # cannot tell: trust the BrokenPipeError
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _drop_stdout() -> int:
    """The reader of standard output has gone: stop quietly, as the Python docs recommend
    (docs.python.org/3/library/signal.html#note-on-sigpipe): point stdout at devnull so that
    the flush at exit writes nowhere instead of failing again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout to redirect
        pass
    return EXIT_STDOUT_CLOSED
