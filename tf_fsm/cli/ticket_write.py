"""`tf-fsm tickets create` and `tf-fsm tickets edit ID`: a tk ticket written as `tk create` and
`tk edit` write it (tf_fsm.engine.ticket_edit, the code path the board's forms run too)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tf_fsm.cli.common import print_json, project_root, ticket_ids
from tf_fsm.cli.exits import EXIT_OK
from tf_fsm.errors import TicketFieldError, UsageError

WRITE_EPILOG = """\
create: writes .tickets/<id>.md as `tk create` does (id by tk's rule: the project directory's
initials and 4 hex digits, never an existing file's; assignee by default git's user.name),
with --deps as `tk dep` adds them; prints the new id
edit ID: changes only the fields given, as `tk edit` (and `tk dep`) change them, keeping every
other byte; under the ticket's lock when it has records (docs/ralph.md#creating-and-editing-tickets)

exit codes (create, edit):
  0   written (edit: also when nothing changed)
  2   bad input: a field tk would not take (named: title, type, priority, assignee, tags,
      deps: a missing ticket or a cycle, named), missing ticket, no project found
  74  the disk refused the write (names the file)
  75  edit: a run holds the ticket (its pid named), or the file's content hash is not
      --if-hash (it changed since you read it); nothing written
"""


def add_write_arguments(p: argparse.ArgumentParser) -> None:
    """The options of `tickets create|edit` (`-a` is shared with ready/blocked's filter)."""
    p.add_argument("--title", help="create/edit: the title (the `# ` line)")
    p.add_argument("-d", "--description", help="create/edit: the description (tk edit -d)")
    p.add_argument(
        "--description-file",
        metavar="FILE",
        help="create/edit: the description from FILE (- for standard input)",
    )
    p.add_argument("-t", "--type", dest="type_", help="create: the type (default task)")
    p.add_argument("-p", "--priority", help="create/edit: 0 to 4 (default 2)")
    p.add_argument("--tags", help="create/edit: comma-separated tags (edit: '' clears them)")
    p.add_argument("--deps", help="create/edit: comma-separated ticket ids it depends on")
    p.add_argument(
        "--if-hash",
        metavar="SHA256",
        help="edit: refuse (exit 75) unless the file's sha256 is this (printed by --json)",
    )
    p.add_argument("--json", action="store_true", help="create/edit: {ticket, path, hash, changed}")


def cmd_write(args: argparse.Namespace) -> int:
    from tf_fsm.engine import ticket_edit

    args.teardown = True  # a write: the interpreter's normal end, whatever `tickets` says
    root = project_root(args)
    description = _description(args)
    if args.action == "create":
        if args.ticket:
            raise UsageError("tf-fsm tickets create takes no TICKET: give the title as --title")
        if args.title is None:
            raise TicketFieldError("title", "required (--title)")
        assignee = args.assignee
        draft = ticket_edit.Draft(
            title=args.title,
            description=description or "",
            type_=args.type_ or "task",
            priority=args.priority or "2",
            assignee=ticket_edit.default_assignee(root) if assignee is None else assignee,
            tags=args.tags or "",
            deps=args.deps or "",
        )
        done = ticket_edit.create_ticket(root, draft)
        line = done.ticket_id
    else:
        if not args.ticket:
            raise UsageError("tf-fsm tickets edit needs a TICKET")
        (ticket_id,) = ticket_ids([args.ticket])
        if args.type_ is not None or args.assignee is not None:
            raise UsageError("tf-fsm tickets edit changes title, description, priority, tags, deps")
        changes = ticket_edit.Changes(
            title=args.title,
            description=description,
            priority=args.priority,
            tags=args.tags,
            deps=args.deps,
        )
        done = ticket_edit.edit_ticket(root, ticket_id, changes, args.if_hash)
        line = f"{done.ticket_id}: " + (
            f"changed {', '.join(done.changed)}" if done.changed else "nothing changed"
        )
    if args.json:
        print_json(
            {
                "ticket": done.ticket_id,
                "path": str(done.path),
                "hash": done.hash,
                "changed": done.changed,
            }
        )
    else:
        print(line)
    return EXIT_OK


def _description(args: argparse.Namespace) -> str | None:
    if args.description_file is None:
        return str(args.description) if args.description is not None else None
    if args.description is not None:
        raise UsageError("give -d/--description or --description-file, not both")
    if args.description_file == "-":
        return sys.stdin.read()
    try:
        return Path(args.description_file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TicketFieldError(
            "description", f"cannot read {args.description_file}: {exc}"
        ) from None
