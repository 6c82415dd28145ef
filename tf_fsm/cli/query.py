"""The CLI's read-only query commands: settings, status, tickets and prompts (`gate` is
tf_fsm.cli.gate). They read the settings, ticket state, artifacts, the backlog or the
templates and change nothing on disk. Heavy modules are imported inside each command so
`tf-fsm --help` and `status` on an empty project start fast; only `tf_fsm.cli.exits` maps
errors to exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tf_fsm.cli.common import console, print_json, project_root, ticket_ids
from tf_fsm.cli.exits import EXIT_OK
from tf_fsm.errors import (
    EXIT_BAD_INPUT,
    CorruptStateError,
    ProjectNotFoundError,
    TicketError,
    UsageError,
)
from tf_fsm.views.terminal import terminal_safe

if TYPE_CHECKING:
    from tf_fsm.tk.backlog import TkRecord


def cmd_settings(args: argparse.Namespace) -> int:
    from tf_fsm.core.curve import TIERED_CURVE
    from tf_fsm.core.escalation import resolve
    from tf_fsm.engine.prompts import PromptLibrary
    from tf_fsm.settings.load import load_settings

    root = project_root(args)
    loaded = load_settings(root)
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    wf = loaded.workflow
    # A template's frontmatter model outranks the settings mapping, as in a run.
    frontmatter = PromptLibrary(root).frontmatter()
    tiers = {n: resolve(n, loaded, frontmatter=frontmatter) for n in TIERED_CURVE.tiers}
    if args.json:
        out: dict[str, Any] = {
            "path": str(loaded.path) if loaded.path else None,
            "failOn": wf.failOn,
            "escalation": wf.escalation.model_dump(),
            "roles": {
                role: {
                    "model": rm.model,
                    "thinking": rm.thinking,
                    "source": rm.source,
                    "frontmatter": frontmatter.get(role, (None, None))[0],
                    "byAttempt": {str(n): tiers[n].roles[role].model for n in tiers},
                }
                for role, rm in loaded.roles.items()
            },
            "warnings": list(loaded.warnings),
        }
        print_json(out, indent=2)
        return EXIT_OK
    print(f"settings: {loaded.path or 'none (package defaults)'}")
    print(f"failOn: {', '.join(wf.failOn) or '(empty: nothing blocks)'}")
    esc = wf.escalation
    print(f"escalation: {'enabled' if esc.enabled else 'disabled'}, maxRetries {esc.maxRetries}")
    from rich.table import Table

    marks = {"escalated": " *", "frontmatter": " ^"}
    caption = "* escalated, ^ model or thinking from the role's template frontmatter"
    columns = [f"attempt {TIERED_CURVE.attempts_of(n)}" for n in tiers]
    table = Table("role", *columns, caption=caption)
    for role in loaded.roles:
        cells = [tiers[n].roles[role] for n in tiers]
        table.add_row(role, *(f"{c.model}{marks.get(c.source, '')}" for c in cells))
    console().print(table)
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    from tf_fsm.settings.project import nothing_run

    root = project_root(args)
    if args.all and args.tickets:
        raise UsageError("--all shows every ticket of the backlog; drop the TICKET names")
    if not args.tickets and not args.all and nothing_run(root):
        # No ticket state, and settings that need no validation (none, or bytes that passed
        # before): answered without the settings models (pydantic), which would take longer
        # than the rest of the command.
        return _no_rows(args.json)
    from tf_fsm.settings.load import load_settings
    from tf_fsm.views.status import BLOCKED_ATTEMPTS, status_row

    settings = load_settings(root)
    rows, corrupt = [], 0
    for ticket in _status_tickets(args, root, settings):
        try:
            rows.append(status_row(root, settings, ticket))
        except CorruptStateError as exc:  # the other tickets are still shown; exit 2 at the end
            print(f"tf-fsm: error: {terminal_safe(exc.message)}", file=sys.stderr)
            corrupt += 1
            rows.append(_corrupt_row(ticket if isinstance(ticket, str) else ticket.id, exc))
    if not rows:
        return _no_rows(args.json, args.all)
    columns = ("ticket", "state", "attempt", BLOCKED_ATTEMPTS, "escalated", "last failure", "next")
    _print_rows(rows, args.json, columns, _status_cells)
    if not args.json:
        _print_workspaces(rows)
    return EXIT_BAD_INPUT if corrupt else EXIT_OK


def _print_workspaces(rows: list[dict[str, Any]]) -> None:
    """After the table, one line per ticket that has a git workspace (docs/workspaces.md)."""
    from tf_fsm.views.workspace_status import workspace_line

    for row in rows:
        if row.get("workspace"):
            line = workspace_line(row["ticket"], row["workspace"], row["attempt"])
            print(terminal_safe(line))


def _status_tickets(args: argparse.Namespace, root: Path, settings: Any) -> list[TkRecord | str]:
    """The named tickets, the whole backlog (`--all`, with what its scan found wrong on
    stderr), or every ticket with state."""
    from tf_fsm.views.status import tracked_tickets, whole_backlog

    if args.all:
        tickets, problems = whole_backlog(root, settings)
        for problem in problems:
            print(f"tf-fsm: warning: {terminal_safe(problem)}", file=sys.stderr)
        return tickets
    if args.tickets:
        return list(known_tickets(root, settings, ticket_ids(args.tickets)))
    return list(tracked_tickets(root, settings))


def _status_cells(row: dict[str, Any]) -> list[str]:
    """One status row: `-` where a ticket has no state (never run), and the blocked attempts
    in words that a close cannot make contradict the attempt number."""
    from tf_fsm.views.status import blocked_attempts

    no_state = row.get("status") is None and row["state"] != "corrupt"
    count, cap = row["retryCount"], row["maxRetries"]
    return [
        row["ticket"],
        "-" if no_state else row["state"],
        str(row["attempt"] or "-"),
        "-" if count is None else blocked_attempts(count, cap, row["state"] == "closed"),
        ", ".join(row["escalatedRoles"]) or "-",
        row["lastFailure"] or "-",
        row["next"],
    ]


def _corrupt_row(ticket_id: str, exc: CorruptStateError) -> dict[str, Any]:
    return {
        "ticket": ticket_id,
        "state": "corrupt",
        "error": exc.message,
        "attempt": None,
        "retryCount": None,
        "maxRetries": None,
        "escalatedRoles": [],
        "lastFailure": None,
        "next": f"nothing until {exc.path.name} is fixed (see the error above)",
        "workspace": None,
    }


def _print_rows(
    rows: list[dict[str, Any]],
    as_json: bool,
    columns: Sequence[str],
    cells: Callable[[dict[str, Any]], list[str]],
) -> None:
    """One JSON object per row with --json, else a table of `cells(row)` under `columns`."""
    if as_json:
        for row in rows:
            print_json(row)
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(*columns)
    for row in rows:  # Text, escaped: a title or an agent's text is neither markup nor control
        table.add_row(*(Text(terminal_safe(cell)) for cell in cells(row)))
    console().print(table)


def known_tickets(root: Path, settings: Any, ticket_ids: list[str]) -> list[str]:
    """The named tickets, each with a ticket file or a state directory (a ticket deleted after
    it ran still has its state); a name with neither is a typo, refused as `run` refuses it."""
    from tf_fsm.settings.load import knowledge_dir
    from tf_fsm.tk.tickets import ticket_path

    state_dirs = knowledge_dir(root, settings) / "tickets"
    for ticket_id in ticket_ids:
        path = ticket_path(root, ticket_id)
        if not path.is_file() and not (state_dirs / ticket_id).is_dir():
            raise TicketError(
                path, f"ticket {ticket_id} not found, nor its state {state_dirs / ticket_id}"
            )
    return ticket_ids


def _no_rows(as_json: bool, whole_backlog: bool = False) -> int:
    if not as_json:  # --json prints one line per ticket: none
        print("the backlog has no tickets" if whole_backlog else "no tickets have been run yet")
    return EXIT_OK


def cmd_tickets(args: argparse.Namespace) -> int:
    import gc

    if args.action in ("create", "edit"):
        from tf_fsm.cli.ticket_write import cmd_write

        return cmd_write(args)
    from tf_fsm.tk import selection
    from tf_fsm.tk.backlog import scan, tickets_dir

    # A short-lived process that makes no garbage cycles: the cyclic collector would only walk
    # the records of a large backlog again and again (39 passes, about 10 ms at 10k tickets).
    gc.disable()
    backlog = scan(tickets_dir(project_root(args)))
    for problem in backlog.problems:  # tf_fsm's own line: a file name is escaped (stdout is tk's)
        print(f"tf-fsm: warning: {terminal_safe(str(problem))}", file=sys.stderr)
    if args.action == "show":
        if not args.ticket:
            raise UsageError("tf-fsm tickets show needs a TICKET")
        path = selection.find_ticket_file(backlog.directory, args.ticket)
        text = selection.show(backlog, path)
    else:
        pick, line = (
            (selection.ready, selection.ready_line)
            if args.action == "ready"
            else (selection.blocked, selection.blocked_line)
        )
        text = "".join(line(ln) + "\n" for ln in pick(backlog, args.assignee, args.tag))
    sys.stdout.flush()  # tk's bytes, invalid UTF-8 included
    sys.stdout.buffer.write(text.encode("utf-8", "surrogateescape"))
    sys.stdout.flush()
    return EXIT_OK


def cmd_prompts(args: argparse.Namespace) -> int:
    from tf_fsm.views.prompt_examples import template_table

    root = _optional_root(args)
    if args.action == "list":
        columns = ("phase", "role", "template", "origin", "model", "thinking", "path")
        _print_rows(
            template_table(root),
            args.json,
            columns,
            lambda r: [
                r["phase"],
                r["role"],
                r["template"],
                r["origin"],
                r["model"] or "-",
                r["thinking"] or "-",
                r["path"],
            ],
        )
        return EXIT_OK
    from tf_fsm.views.prompt_examples import render_example

    if not args.phase:
        raise UsageError(
            "tf-fsm prompts show needs a PHASE (research, implement, review, fix, verify, close)"
        )
    _check_role(args.phase, args.role)
    ticket = ticket_ids([args.ticket])[0] if args.ticket else None
    sys.stdout.write(render_example(root, args.phase, args.role, args.attempt, ticket))
    return EXIT_OK


def _check_role(phase: str, role: str | None) -> None:
    """`prompts show --role`: only a role the phase runs (as `prompts list` shows them)."""
    if role is None:
        return
    from tf_fsm.core.artifacts import roles as roles_of
    from tf_fsm.settings.load import REVIEWER_ROLES

    roles = roles_of(phase, REVIEWER_ROLES, closer=True, rereview=True)
    if role in roles:
        return
    import difflib

    near = difflib.get_close_matches(role, roles, n=1)
    hint = f" (did you mean {near[0]}?)" if near else ""
    raise UsageError(
        f"--role {role}: the {phase} phase does not use this role{hint}; "
        f"{phase} accepts: {', '.join(roles)}"
    )


def _optional_root(args: argparse.Namespace) -> Path | None:
    """The project root if there is one (`prompts` also works outside a project); a --root or
    $TF_FSM_ROOT that is not a directory is still an error."""
    try:
        return project_root(args)
    except ProjectNotFoundError:
        return None
