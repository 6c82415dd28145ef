"""`tf-fsm`: parse the command line, run the command, exit with its code. The parser is in
tf_fsm.cli.parser, the commands in tf_fsm.cli.run (init, run, resume), tf_fsm.cli.reset
(reset), tf_fsm.cli.merge (merge), tf_fsm.cli.query (settings, status, gate, tickets,
prompts), tf_fsm.cli.ui (ui) and tf_fsm.cli.tools; errors become exit codes in
tf_fsm.cli.exits only. Heavy modules are imported inside the command functions so
`tf-fsm --help` stays fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from tf_fsm.cli.exits import drop_stdout, run_command
from tf_fsm.errors import EXIT_BAD_INPUT


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
        code = drop_stdout()
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
    return run_command(func, args), args
