"""`tf-fsm workspaces [--json]`, `tf-fsm workspaces pool [--json]` and `tf-fsm workspaces
prune [ID...] [--force] [--dry-run] [--pool]`: the tickets' git branches and worktrees, the
pool of finished tickets' worktrees, and their removal (docs/workspaces.md)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tf_fsm.cli.common import console, print_json, project_root, ticket_ids
from tf_fsm.cli.exits import EXIT_OK
from tf_fsm.errors import EXIT_BAD_INPUT, UsageError
from tf_fsm.views.terminal import terminal_safe

EPILOG = """\
without an action: one row per ticket workspace (a branch tf/<id>, a directory under
.tf/ralph/worktrees, or both): its base branch, commits ahead/behind it, uncommitted changes,
the ticket's state and the worktree's size on disk; then a line on the pool (finished
tickets' worktrees waiting for the next tickets), which `pool` lists. prune removes the
workspaces of closed tickets and of abandoned ones (retries exhausted, never run, ticket file
gone), or only the named ones; a branch with commits its base lacks and uncommitted changes
are kept unless --force, which keeps them under refs/tf/<id>/; --pool also removes the
pooled worktrees (docs/workspaces.md)

exit codes:
  0   listed (none, or not a git repository, is not an error); prune: done, each
      ticket's line says what was done or why it was left
  1   unexpected internal error (traceback with --verbose)
  2   bad input: usage, ticket id, settings file, no project found; prune: a named
      ticket has no workspace, or a removal failed (its line says why)
  75  prune: a named ticket is being run by another process (nothing was removed)
"""


def add_workspaces_parser(p: argparse.ArgumentParser) -> None:
    """`workspaces`' arguments (the parser registers the command with them)."""
    p.epilog = EPILOG
    p.add_argument(
        "action",
        nargs="?",
        choices=["prune", "pool"],
        help="prune: remove workspaces; pool: list the pooled worktrees (see below)",
    )
    p.add_argument("tickets", nargs="*", metavar="ID", help="prune: only these tickets' workspaces")
    p.add_argument(
        "--force",
        action="store_true",
        help="prune: also unmerged branches and uncommitted changes (kept under refs/tf/<id>/), "
        "and named tickets whose work may go on",
    )
    p.add_argument("--dry-run", action="store_true", help="prune: say what it would do, do nothing")
    p.add_argument("--pool", action="store_true", help="prune: also the pooled worktrees")
    p.add_argument("--json", action="store_true", help="the list (or prune's results) as JSON")
    p.set_defaults(func=cmd_workspaces)


def cmd_workspaces(args: argparse.Namespace) -> int:
    from tf_fsm.settings.load import load_settings

    root = project_root(args)
    if args.action != "prune" and (args.tickets or args.force or args.dry_run or args.pool):
        raise UsageError("ID, --force, --dry-run and --pool go with `tf-fsm workspaces prune`")
    names = ticket_ids(args.tickets)
    settings = load_settings(root)
    if args.action == "prune":
        return _prune(root, settings, names, args)
    from tf_fsm.views.workspace_pool import pool_line, pool_rows
    from tf_fsm.views.workspaces import workspace_rows

    if args.action == "pool":
        pooled = pool_rows(root, settings)
        if not _said(root, pooled, args.json, "no worktree pool", "no worktree in the pool"):
            _print_pool(pooled or [])
        return EXIT_OK
    rows = workspace_rows(root, settings)
    none = "no ticket workspaces (no tf/<id> branch, no directory under the worktrees dir)"
    if not _said(root, rows, args.json, "no ticket has a workspace", none):
        _print_table(rows or [])
    if not args.json and (line := pool_line(root, settings)) is not None:
        print(line)
    return EXIT_OK


def _said(
    root: Path, found: list[dict[str, Any]] | None, as_json: bool, outside: str, none: str
) -> bool:
    """`found` as JSON, or the one line for a project outside git (`outside`) or for nothing
    found (`none`): whether that said it all (else the caller prints the rows)."""
    from tf_fsm.views.workspaces import no_repository

    if as_json:
        print_json(found or [], indent=2)
    elif found is None:
        print(f"{no_repository(root)}: {outside}")
    elif not found:
        print(none)
    else:
        return False
    return True


def _prune(root: Path, settings: Any, names: list[str], args: argparse.Namespace) -> int:
    from tf_fsm.views.workspace_prune import OUTCOMES, prune

    results = prune(root, settings, names, force=args.force, dry_run=args.dry_run)
    if args.pool and results is not None:
        from tf_fsm.views.workspace_pool import empty_pool

        if done := empty_pool(root, settings, dry_run=args.dry_run):
            results.append(
                {
                    "ticket": None,
                    "outcome": "removed",
                    "reason": "the pool",
                    "done": done,
                    "dryRun": args.dry_run,
                }
            )
    said = _said(root, results, args.json, "no workspace to prune", "no ticket workspaces to prune")
    for result in [] if said else results or []:
        outcome = OUTCOMES[result["outcome"]]
        if args.dry_run and result["done"]:
            outcome = f"would be {outcome} (dry run)"
        who = result["ticket"] or "pool"
        line = "; ".join([f"{who}: {outcome}: {result['reason']}", *result["done"]])
        print(terminal_safe(line))
    return EXIT_BAD_INPUT if any(r["outcome"] == "failed" for r in results or []) else EXIT_OK


def _print_table(rows: list[dict[str, Any]]) -> None:
    from rich.table import Table
    from rich.text import Text

    from tf_fsm.views.workspaces import human_size

    table = Table("ticket", "branch", "base", "ahead/behind", "dirty", "worktree", "state", "size")
    for row in rows:
        ahead = "-" if row["ahead"] is None else f"{row['ahead']}/{row['behind']}"
        dirty = {None: "-", False: "no"}.get(row["dirty"], f"yes ({row['changes']})")
        tree = "yes" if row["worktree"] else "-"
        if not row["worktree"] and Path(row["path"]).exists():
            tree = "not a worktree"
        state = row["state"] + (f" (locked by pid {row['lockedBy']})" if row["lockedBy"] else "")
        cells = [
            row["ticket"],
            row["branch"] or "-",
            row["base"] or "-",
            ahead,
            dirty,
            tree,
            state,
            human_size(row["size"]),
        ]
        table.add_row(*(Text(terminal_safe(c)) for c in cells))
    console().print(table)


def _print_pool(rows: list[dict[str, Any]]) -> None:
    from tf_fsm.views.workspaces import human_size

    for row in rows:
        head = (row["head"] or "-")[:12]
        print(terminal_safe(f"{row['path']}  at {head}  {human_size(row['size'])}"))
