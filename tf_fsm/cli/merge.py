"""`tf-fsm merge TICKET`: a passed ticket merged through the merge queue, when
`ralph.parallelAutoMerge` is false (docs/workspaces.md, "The merge queue"). It is `run` asked
for the ticket's merge alone (tf_fsm.core.next_step, `merge_requested`): the attempt resumes
at its merge, on the code path of an automatic merge, and never runs a phase or a new one."""

from __future__ import annotations

import argparse

from tf_fsm.cli.common import add_ticket_command, project_root, ticket_ids

MERGE_EPILOG = """\
merges a ticket whose quality gate passed and whose merge waits (ralph.parallelAutoMerge is
false), or whose merge was refused and has been fixed since: through the merge queue, as an
automatic merge: rebased onto the base branch, the required gate commands run again, one
commit merging it with its tk close; then it is closed, and its worktree and branch removed.
No agent runs; see docs/workspaces.md

exit codes:
  0   merged and closed
  1   unexpected internal error (traceback with --verbose)
  2   nothing to merge (no attempt of the ticket passed its gate and waits for its merge:
      the message says what `tf-fsm run` would do), or bad input: usage, ticket id, missing
      ticket file, settings file, no project found
  5   the merge queue refused it: a rebase conflict or a gate failing after the rebase
      (merge_conflict), or staged changes at the base's checkout or a hook (merge_refused);
      nothing merged, its worktree and branch kept; `tf-fsm merge` again once it is fixed
  74  the disk refused a write (names the file)
  75  the ticket is being run by another process (named by its pid); nothing was done
  130 interrupted (Ctrl-C or SIGTERM): `tf-fsm merge` again finishes it
"""


def add_merge_parser(p: argparse.ArgumentParser) -> None:
    add_ticket_command(
        p, MERGE_EPILOG, "print the outcome as JSON on stdout, as `run --json` does", cmd_merge
    )


def cmd_merge(args: argparse.Namespace) -> int:
    from tf_fsm.cli.run import _answer, _run, _run_settings
    from tf_fsm.engine.api import RunOptions

    root = project_root(args)
    (ticket_id,) = ticket_ids([args.ticket])
    settings = _run_settings(root, None)
    return _answer(_run(root, ticket_id, RunOptions(merge=True), settings), args.json)
