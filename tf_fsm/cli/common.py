"""What the commands share: the project root they act on, ticket ids, JSON and table output."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tf_fsm.errors import UsageError


def print_json(obj: Any, *, indent: int | None = None) -> None:
    """`--json` output. The json module is imported here, not by every command."""
    import json

    print(json.dumps(obj, indent=indent))


def console() -> Any:
    import errno

    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:
            # rich's own handling exits 1; `main` handles a closed stdout for every command
            raise BrokenPipeError(errno.EPIPE, "standard output was closed")

    # Piped output keeps whole model ids rather than rich's 80-column ellipses.
    return _Console(width=None if sys.stdout.isatty() else 200)


def project_root(args: argparse.Namespace) -> Path:
    """The project root: `--root`, else `$TF_FSM_ROOT`, else found by walking up. A root given
    by option or variable must be an existing directory (only `init` creates one)."""
    import os

    from tf_fsm.settings.project import ROOT_ENV, find_project_root  # no pydantic to find it

    if args.root:
        return existing_dir(Path(args.root).resolve(), f"--root {args.root}")
    if os.environ.get(ROOT_ENV):
        return existing_dir(find_project_root(), f"${ROOT_ENV} {os.environ[ROOT_ENV]}")
    return find_project_root()


def existing_dir(path: Path, source: str) -> Path:
    if not path.exists():
        raise UsageError(f"{source}: no such directory (the project root must exist)")
    if not path.is_dir():
        raise UsageError(f"{source}: not a directory (the project root must be one)")
    return path


def ticket_ids(ids: Sequence[str]) -> list[str]:
    from tf_fsm.storage.ticket_id import validate_ticket_id

    return [validate_ticket_id(i) for i in ids]


ROOT_HELP = "project root (default: $TF_FSM_ROOT, else walk up to .tf/ or .tickets/)"
VERBOSE_HELP = "tracebacks for internal errors"


def add_global_arguments(parser: argparse.ArgumentParser, after_command: bool = False) -> None:
    """`--root` and `--verbose`, which every command takes before or after its name; after it,
    SUPPRESS keeps a value given before it."""
    default: dict[str, Any] = {"default": argparse.SUPPRESS} if after_command else {}
    parser.add_argument("--root", help=ROOT_HELP, **default)
    parser.add_argument("--verbose", action="store_true", help=VERBOSE_HELP, **default)


def add_ticket_command(p: argparse.ArgumentParser, epilog: str, json_help: str, func: Any) -> None:
    """A command on one ticket (`TICKET [--json]`), its exit codes in `epilog`."""
    p.epilog = epilog
    p.add_argument("ticket")
    p.add_argument("--json", action="store_true", help=json_help)
    p.set_defaults(func=func)


def add_store_argument(parser: argparse.ArgumentParser) -> None:
    """`--store files|memory`: where the ticket's records are kept, over `storage.backend`
    (docs/settings.md)."""
    parser.add_argument(
        "--store",
        choices=("files", "memory"),
        default=None,
        help="where the ticket's records are kept: files (pi-ticketflow's, the default) or "
        "memory (this process only: nothing is left on disk); default: storage.backend",
    )


def add_worktree_argument(parser: argparse.ArgumentParser) -> None:
    """`--worktree/--no-worktree`: run tickets in their own git worktree, or in the project's
    tree (default: the settings decide; docs/workspaces.md)."""
    parser.add_argument(
        "--worktree",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="each ticket on its own git branch and worktree (--no-worktree: in the project's "
        "tree); default: workspace.mode (auto: a worktree in a git repository with a commit; "
        "docs/workspaces.md)",
    )
