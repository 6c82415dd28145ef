"""The CLI's read-only query commands: status, gate, tickets and prompts. They read ticket
state, artifacts, the backlog or the templates and change nothing on disk (`gate --run` runs
the gate commands but records nothing). Heavy modules are imported inside each command so
`tf-fsm --help` and `status` on an empty project start fast; only `tf_fsm.cli` maps errors to
exit codes."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tf_fsm.cli import EXIT_BLOCKED, EXIT_OK, UsageError, _console, _root, _ticket_ids
from tf_fsm.errors import ProjectNotFoundError


def cmd_status(args: argparse.Namespace) -> int:
    from tf_fsm.project import nothing_run

    root = _root(args)
    if not args.tickets and nothing_run(root):
        # No ticket state, and settings that need no validation (none, or bytes that passed
        # before): answered without the settings models (pydantic), which would take longer
        # than the rest of the command.
        return _no_rows(args.json)
    from tf_fsm.config import load_settings
    from tf_fsm.status import ticket_status, tracked_tickets

    settings = load_settings(root)
    ids = _ticket_ids(args.tickets) if args.tickets else tracked_tickets(root, settings)
    rows = [ticket_status(root, settings, ticket_id) for ticket_id in ids]
    if not rows:
        return _no_rows(args.json)
    columns = ("ticket", "state", "attempt", "retries", "escalated", "last failure", "next")
    _print_rows(rows, args.json, columns, lambda row: [
        row["ticket"],
        row["state"],
        str(row["attempt"] or "-"),
        f"{row['retryCount']}/{row['maxRetries']}",
        ", ".join(row["escalatedRoles"]) or "-",
        row["lastFailure"] or "-",
        row["next"],
    ])  # fmt: skip
    return EXIT_OK


def _print_rows(
    rows: list[dict[str, Any]],
    as_json: bool,
    columns: Sequence[str],
    cells: Callable[[dict[str, Any]], list[str]],
) -> None:
    """One JSON object per row with --json, else a table of `cells(row)` under `columns`."""
    if as_json:
        for row in rows:
            print(json.dumps(row))
        return
    from rich.table import Table

    table = Table(*columns)
    for row in rows:
        table.add_row(*cells(row))
    _console().print(table)


def _no_rows(as_json: bool) -> int:
    if not as_json:  # --json prints one line per ticket: none
        print("no tickets have been run yet")
    return EXIT_OK


def cmd_gate(args: argparse.Namespace) -> int:
    from tf_fsm.config import load_settings
    from tf_fsm.status import gate_report

    root = _root(args)
    settings = load_settings(root)
    if args.run:
        return _run_gates_now(root, settings, _ticket_ids(args.tickets), args.json)
    for ticket_id in _ticket_ids(args.tickets):
        row = gate_report(root, settings, ticket_id)
        if args.json:
            print(json.dumps(row))
            continue
        verdict = "BLOCKED" if row["blocked"] else "not blocked"
        counts = ", ".join(f"{k} {v}" for k, v in row["counts"].items())
        print(
            f"{ticket_id}: {verdict} (status {row['status']}, from {row['source']}): "
            f"{row['reason']}"
        )
        print(f"  counts: {counts}")
        for note in row["notes"]:
            print(f"  note: {note}")
    return EXIT_OK


def _run_gates_now(root: Path, settings: Any, ticket_ids: list[str], as_json: bool) -> int:
    """`gate --run`: the configured gate commands, now, outside any lifecycle. Writes nothing."""
    import os

    from tf_fsm.gates import run_gate
    from tf_fsm.redact import Redactor

    gates = settings.workflow.qualityGates
    if not gates:
        raise UsageError("no workflow.qualityGates are configured (see docs/gates.md)")
    redact = Redactor.from_environ(os.environ)
    failed_required = False
    for ticket_id in ticket_ids:
        for gate in gates:
            result = run_gate(gate, root, {"TF_TICKET_ID": ticket_id})
            failed_required |= result.required and not result.passed
            row = {
                "ticket": ticket_id,
                "name": result.name,
                "required": result.required,
                "passed": result.passed,
                "exitCode": result.exit_code,
                "durationMs": round(result.duration * 1000),
                "summary": result.summary,
                "outputTail": "" if result.passed else redact(result.output_tail()),
            }
            if as_json:
                print(json.dumps(row))
                continue
            kind = "required" if result.required else "optional"
            print(
                f"{ticket_id}  {result.name:<16} {kind:<9} {result.summary} "
                f"({result.duration:.1f}s)"
            )
            if not result.passed:
                for line in str(row["outputTail"]).splitlines()[-10:]:
                    print(f"    | {line}")
    return EXIT_BLOCKED if failed_required else EXIT_OK


def cmd_tickets(args: argparse.Namespace) -> int:
    from tf_fsm import selection, tickets

    backlog = tickets.scan(tickets.tickets_dir(_root(args)))
    for problem in backlog.problems:
        print(f"tf-fsm: warning: {problem}", file=sys.stderr)
    if args.action == "show":
        if not args.ticket:
            raise UsageError("tf-fsm tickets show needs a TICKET")
        try:
            path = selection.find_ticket_file(backlog.directory, args.ticket)
            text = selection.show(backlog, path)
        except selection.ShowError as exc:
            raise UsageError(str(exc)) from None
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
    from tf_fsm.planning import template_table

    root = _optional_root(args)
    if args.action == "list":
        columns = ("phase", "role", "template", "origin", "model", "thinking", "path")
        _print_rows(template_table(root), args.json, columns, lambda r: [
            r["phase"], r["role"], r["template"], r["origin"], r["model"] or "-",
            r["thinking"] or "-", r["path"],
        ])  # fmt: skip
        return EXIT_OK
    from tf_fsm.planning import render_example

    if not args.phase:
        raise UsageError(
            "tf-fsm prompts show needs a PHASE (research, implement, review, fix, verify, close)"
        )
    ticket = _ticket_ids([args.ticket])[0] if args.ticket else None
    sys.stdout.write(render_example(root, args.phase, args.role, args.attempt, ticket))
    return EXIT_OK


def _optional_root(args: argparse.Namespace) -> Path | None:
    from tf_fsm.project import find_project_root

    if args.root:
        return Path(args.root).resolve()
    try:
        return find_project_root()
    except ProjectNotFoundError:
        return None
