"""Command line: argument parsing, output and exit codes.

This is the only module that turns errors into exit codes. Heavy modules are imported inside
the command functions so `tf-fsm --help` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tf_fsm import __version__
from tf_fsm.errors import (
    CorruptStateError,
    ExecutorError,
    InvalidArtifactNameError,
    InvalidTicketIdError,
    ProjectNotFoundError,
    SettingsError,
    TfFsmError,
    TicketError,
    TicketLockedError,
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
EXIT_LOCKED = 75

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
)
#: How a run ended -> exit code.
OUTCOME_CODES = {
    "closed": EXIT_OK,
    "already_closed": EXIT_OK,
    "blocked": EXIT_BLOCKED,
    "exhausted": EXIT_EXHAUSTED,
    "error": EXIT_ERROR,
}

EPILOG = """\
exit codes:
  0   success (run: the ticket is closed)
  1   unexpected internal error (traceback with --verbose)
  2   bad input: usage, settings file, ticket id, missing project or ticket,
      missing agent program, corrupt state file (left untouched)
  3   run: blocked by the quality gate, retries left
  4   run: blocked, retries exhausted (refused before any agent runs)
  5   run: a phase failed; the attempt is in error and resumable with `run` again
  75  the ticket is being run by another process
"""


def _console() -> Any:
    from rich.console import Console

    # Piped output keeps whole model ids rather than rich's 80-column ellipses.
    return Console(width=None if sys.stdout.isatty() else 200)


def _root(args: argparse.Namespace) -> Path:
    from tf_fsm.config import find_project_root

    return Path(args.root).resolve() if args.root else find_project_root()


def cmd_settings(args: argparse.Namespace) -> int:
    from tf_fsm.config import load_settings
    from tf_fsm.escalation import resolve

    loaded = load_settings(_root(args))
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    wf = loaded.workflow
    tiers = {n: resolve(n, loaded) for n in (1, 2, 3)}
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
                    "byAttempt": {str(n): tiers[n].roles[role].model for n in tiers},
                }
                for role, rm in loaded.roles.items()
            },
            "warnings": list(loaded.warnings),
        }
        print(json.dumps(out, indent=2))
        return EXIT_OK
    print(f"settings: {loaded.path or 'none (package defaults)'}")
    print(f"failOn: {', '.join(wf.failOn) or '(empty: nothing blocks)'}")
    esc = wf.escalation
    print(f"escalation: {'enabled' if esc.enabled else 'disabled'}, maxRetries {esc.maxRetries}")
    from rich.table import Table

    table = Table("role", "attempt 1", "attempt 2", "attempt 3+", caption="* escalated")
    for role in loaded.roles:
        cells = [tiers[n].roles[role] for n in (1, 2, 3)]
        table.add_row(role, *(f"{c.model}{' *' if c.escalated else ''}" for c in cells))
    _console().print(table)
    return EXIT_OK


def _ticket_ids(ids: Sequence[str]) -> list[str]:
    from tf_fsm.store import validate_ticket_id

    return [validate_ticket_id(i) for i in ids]


def cmd_init(args: argparse.Namespace) -> int:
    from tf_fsm.config import SETTINGS_RELPATH, init_settings
    from tf_fsm.store import atomic_write_text
    from tf_fsm.tickets import tickets_dir

    root = Path(args.root).resolve() if args.root else Path.cwd()
    path = root / SETTINGS_RELPATH
    if path.exists():
        raise UsageError(f"{path} already exists; tf-fsm init never overwrites settings")
    atomic_write_text(path, json.dumps(init_settings(), indent=2) + "\n")
    tickets_dir(root).mkdir(parents=True, exist_ok=True)
    print(f"wrote {path}")
    print(f"tickets go in {tickets_dir(root)}/<id>.md; set executor.command, then: tf-fsm run <id>")
    return EXIT_OK


def _run_options(args: argparse.Namespace) -> Any:
    from tf_fsm.orchestrator import RunOptions

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
        "error": "ERROR (resumable: run it again)",
    }[outcome.status]
    stream = sys.stdout if outcome.status in ("closed", "already_closed") else sys.stderr
    print(
        f"{outcome.ticket_id}: {line} after attempt {outcome.attempt} "
        f"(retries {outcome.retry_count}/{outcome.max_retries}): {outcome.reason}",
        file=stream,
    )
    return OUTCOME_CODES[outcome.status]


def cmd_run(args: argparse.Namespace) -> int:
    from tf_fsm.orchestrator import run_ticket
    from tf_fsm.progress import ConsoleObserver

    root = _root(args)
    (ticket_id,) = _ticket_ids([args.ticket])
    outcome = run_ticket(root, ticket_id, _run_options(args), observer=ConsoleObserver())
    return _report(outcome)


def cmd_status(args: argparse.Namespace) -> int:
    from tf_fsm.config import load_settings
    from tf_fsm.status import ticket_status, tracked_tickets

    root = _root(args)
    settings = load_settings(root)
    ids = _ticket_ids(args.tickets) if args.tickets else tracked_tickets(root, settings)
    rows = [ticket_status(root, settings, ticket_id) for ticket_id in ids]
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return EXIT_OK
    if not rows:
        print("no tickets have been run yet")
        return EXIT_OK
    from rich.table import Table

    table = Table("ticket", "state", "attempt", "retries", "escalated", "last failure")
    for row in rows:
        table.add_row(
            row["ticket"],
            row["state"],
            str(row["attempt"] or "-"),
            f"{row['retryCount']}/{row['maxRetries']}",
            ", ".join(row["escalatedRoles"]) or "-",
            row["lastFailure"] or "-",
        )
    _console().print(table)
    return EXIT_OK


def cmd_gate(args: argparse.Namespace) -> int:
    from tf_fsm.config import load_settings
    from tf_fsm.status import gate_report

    root = _root(args)
    settings = load_settings(root)
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


def cmd_demo(args: argparse.Namespace) -> int:
    from tf_fsm.demo import run_demo

    outcome, where = run_demo(Path(args.dir) if args.dir else None)
    print(f"\nthe demo project is in {where}")
    return OUTCOME_CODES[outcome.status]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tf-fsm",
        description="Drive AI coding agents over a tk ticket backlog: research -> implement -> "
        "review -> fix -> verify -> close, with quality gates and tiered model escalation.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tf-fsm {__version__}")
    parser.add_argument(
        "--root", help="project root (default: $TF_FSM_ROOT, else walk up to .tf/ or .tickets/)"
    )
    parser.add_argument("--verbose", action="store_true", help="tracebacks for internal errors")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser(
        "settings",
        help="validate .tf/config/settings.json and show each role's model per attempt",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_settings)

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=help_,
            description=help_,
            epilog=EPILOG,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    p = add("init", "write a default .tf/config/settings.json and create .tickets/")
    p.set_defaults(func=cmd_init)

    p = add("run", "drive one ticket through its lifecycle")
    p.add_argument("ticket")
    p.add_argument("--once", action="store_true", help="run one attempt only, even if it blocks")
    p.add_argument(
        "--retry-reset",
        action="store_true",
        help="move retry-state.json aside (.bak.<UTC time>) and start at attempt 1",
    )
    p.add_argument(
        "--no-research",
        dest="research",
        action="store_const",
        const=False,
        help="skip the research phase (the last of --no-research/--with-research wins)",
    )
    p.add_argument(
        "--with-research",
        dest="research",
        action="store_const",
        const=True,
        help="run research even when disabled or on a retry",
    )
    p.add_argument(
        "--auto",
        "--no-clarify",
        dest="auto",
        action="store_true",
        help="headless: recorded in chain-context.json for the prompts",
    )
    p.add_argument(
        "--create-followups",
        action="store_true",
        help="ask the closer for follow-up tickets (followups.md)",
    )
    p.add_argument("--simplify-tickets", action="store_true", help="recorded for the closer")
    p.add_argument("--final-review-loop", action="store_true", help="recorded for the closer")
    p.set_defaults(func=cmd_run, research=None)

    p = add("status", "state, attempt, retries and escalation of tickets")
    p.add_argument("tickets", nargs="*", metavar="TICKET")
    p.add_argument("--json", action="store_true", help="one JSON object per ticket per line")
    p.set_defaults(func=cmd_status)

    p = add("gate", "the quality-gate verdict from a ticket's artifacts as they are on disk")
    p.add_argument("tickets", nargs="+", metavar="TICKET")
    p.add_argument("--json", action="store_true", help="one JSON object per ticket per line")
    p.set_defaults(func=cmd_gate)

    p = add("demo", "run a sample ticket with the bundled offline agent in a throwaway project")
    p.add_argument("--dir", help="create the demo project here (default: a new temp dir)")
    p.set_defaults(func=cmd_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help/--version
        return int(exc.code or 0)
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    if func is None:
        parser.print_help()
        return EXIT_OK
    try:
        return func(args)
    except TfFsmError as exc:
        print(f"tf-fsm: error: {exc}", file=sys.stderr)
        return next((code for cls, code in EXIT_CODES if isinstance(exc, cls)), EXIT_INTERNAL)
    except KeyboardInterrupt:
        print("tf-fsm: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:
        if args.verbose:
            raise
        print(
            f"tf-fsm: internal error: {type(exc).__name__}: {exc} (rerun with --verbose)",
            file=sys.stderr,
        )
        return EXIT_INTERNAL
