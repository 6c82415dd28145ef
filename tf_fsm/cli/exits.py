"""Exit codes: the one table of what each means, and the one place where an error, or how a
run ended, becomes the exit code of `tf-fsm`. Errors carry their own code (tf_fsm.errors)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from tf_fsm.errors import (
    EXIT_BAD_INPUT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_STORAGE,
    EXIT_UNAVAILABLE,
    StorageError,
    TfFsmError,
)

EXIT_OK = 0
EXIT_BLOCKED = 3
EXIT_EXHAUSTED = 4
EXIT_ERROR = 5
EXIT_WAITING = 6
#: `tf-fsm stop`: no run holds the ticket
EXIT_NOT_RUNNING = 7
#: standard output was closed early (`tf-fsm tickets ready | head -1`): 128 + SIGPIPE, what a
#: shell reports for a program that SIGPIPE killed
EXIT_STDOUT_CLOSED = 141

#: every exit code of `tf-fsm` and what it means (the help's epilog; the README's table)
EXIT_TABLE: tuple[tuple[int, str], ...] = (
    (
        EXIT_OK,
        "success (run: the ticket is closed, or its gate passed and its merge waits for\n"
        "`tf-fsm merge`; merge: merged and closed)",
    ),
    (EXIT_INTERNAL, "unexpected internal error (traceback with --verbose)"),
    (
        EXIT_BAD_INPUT,
        "bad input: usage, settings file, ticket id, missing project or ticket,\n"
        "missing agent program, corrupt state file (left untouched), a prompt template\n"
        "the sandbox refuses, a symlink that would lead a write out of the project;\n"
        "merge: nothing to merge",
    ),
    (EXIT_BLOCKED, "run: blocked by the quality gate, retries left"),
    (
        EXIT_EXHAUSTED,
        "run: blocked, retries exhausted, the ticket's budget spent, or the same\n"
        "failure repeated (same-failure; later runs are refused before any agent runs)",
    ),
    (
        EXIT_ERROR,
        "run: a phase failed, or the merge queue refused the ticket (merge_conflict);\n"
        "the attempt is in error and resumable with `run` again; merge: refused so",
    ),
    (EXIT_WAITING, 'run: waiting for a hand-off artifact (executor kind "handoff"); resumable'),
    (EXIT_NOT_RUNNING, "stop: no run holds the ticket, nothing to stop"),
    (
        EXIT_UNAVAILABLE,
        "no Temporal server answered at the address (named), or it refused the\n"
        "connection; nothing was started",
    ),
    (EXIT_STORAGE, "the disk refused a write: full, read-only or not permitted (names the file)"),
    (
        EXIT_LOCKED,
        "the ticket is being run by another process (ralph: every ready ticket was, so\n"
        "nothing ran)",
    ),
    (
        EXIT_INTERRUPTED,
        "interrupted (Ctrl-C; run, resume, ralph and watch also on SIGTERM): resumable",
    ),
    (
        EXIT_STDOUT_CLOSED,
        "standard output was closed early (e.g. piped into `head`); the rest of the output\n"
        "is dropped quietly",
    ),
)


def epilog(table: tuple[tuple[int, str], ...] = EXIT_TABLE) -> str:
    """`exit codes:` and the table, as the help prints it."""
    rows = [f"  {code:<3} {text.replace(chr(10), chr(10) + ' ' * 6)}" for code, text in table]
    return "exit codes:\n" + "\n".join(rows) + "\n"


#: How a run ended -> exit code.
OUTCOME_CODES = {
    "closed": EXIT_OK,
    "already_closed": EXIT_OK,
    "blocked": EXIT_BLOCKED,
    "exhausted": EXIT_EXHAUSTED,
    "error": EXIT_ERROR,
    "waiting": EXIT_WAITING,
    "awaiting_merge": EXIT_OK,
    "paused": EXIT_OK,
}


#: How the backlog loop ended -> exit code (any other end, a drain or the iteration bound, is 0).
LOOP_CODES = {"interrupted": EXIT_INTERRUPTED, "locked": EXIT_LOCKED}


def run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    try:
        return func(args)
    except TfFsmError as exc:
        print(f"tf-fsm: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tf-fsm: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:
        if isinstance(exc, BrokenPipeError) and stdout_closed():
            return drop_stdout()
        if (refused := storage_error(exc)) is not None:
            print(f"tf-fsm: error: {refused}", file=sys.stderr)
            return EXIT_STORAGE
        if args.verbose:
            raise
        print(
            f"tf-fsm: internal error: {type(exc).__name__}: {exc} (rerun with --verbose)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL


def storage_error(exc: Exception) -> StorageError | None:
    """An OSError raised outside the write door (tf_fsm.fs.atomic) that still says the disk
    refused: a bad environment, exit 74, naming the file, not an internal error."""
    from tf_fsm.fs.atomic import REFUSED

    if not isinstance(exc, OSError) or exc.errno not in REFUSED:
        return None
    where = Path(exc.filename) if exc.filename else Path("?")
    return StorageError(where, "access", exc.strerror or str(exc))


def stdout_closed() -> bool:
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


def drop_stdout() -> int:
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
