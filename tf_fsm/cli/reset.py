"""`tf-fsm reset TICKET`: a ticket's retries reset without running it (tf_fsm.engine.reset,
the code path of `run --retry-reset`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from tf_fsm.cli.common import add_ticket_command, print_json, project_root, ticket_ids
from tf_fsm.cli.exits import EXIT_OK
from tf_fsm.storage.layout import RETRY_STATE

if TYPE_CHECKING:
    from tf_fsm.engine.reset import ResetResult

RESET_EPILOG = f"""\
moves the ticket's {RETRY_STATE} aside ({RETRY_STATE}.bak.<UTC time>, journaled as
RetryStateReset) under the ticket's lock, as `run --retry-reset` does, without running it:
the next run starts at attempt 1 with a fresh budget; see docs/retry-state.md

exit codes:
  0   reset, or nothing to reset (the ticket has no {RETRY_STATE})
  1   unexpected internal error (traceback with --verbose)
  2   bad input: usage, ticket id, missing ticket file, settings file, a corrupt journal
      line, no project found
  74  the disk refused the move (names the file)
  75  the ticket is being run by another process (named by its pid); nothing was moved
  130 interrupted (Ctrl-C)
  141 standard output was closed early (e.g. piped into `head`)
"""


def add_reset_parser(p: argparse.ArgumentParser) -> None:
    add_ticket_command(
        p,
        RESET_EPILOG,
        "print {ticket, backup, retryCountBefore, repaired} as JSON on stdout",
        cmd_reset,
    )


def cmd_reset(args: argparse.Namespace) -> int:
    from tf_fsm.engine.reset import reset_retries

    root = project_root(args)
    (ticket_id,) = ticket_ids([args.ticket])
    done = reset_retries(root, ticket_id)
    if args.json:
        print_json(reset_json(done))
    else:
        print("\n".join(reset_lines(done)))
    return EXIT_OK


def reset_json(done: ResetResult) -> dict[str, Any]:
    """`reset --json`: `backup` is the backup's path (null when nothing was moved)."""
    return {
        "ticket": done.ticket_id,
        "backup": done.backup_at,
        "retryCountBefore": done.retry_count_before,
        "repaired": done.repaired,
    }


def reset_lines(done: ResetResult) -> list[str]:
    from tf_fsm.engine.reset import rebuilt

    lines = [f"{done.ticket_id}: {rebuilt(done)}"] if done.repaired else []
    if done.backup is None:
        return [*lines, f"{done.ticket_id}: nothing to reset (no {RETRY_STATE})"]
    count = done.retry_count_before
    before = str(count) if count is not None else "unknown: the file was corrupt"
    return [
        *lines,
        f"{done.ticket_id}: retries reset: {RETRY_STATE} moved aside to {done.backup} "
        f"(blocked attempts were {before}); the next run starts at attempt 1",
    ]
