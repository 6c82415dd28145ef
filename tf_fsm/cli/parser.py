"""The `tf-fsm` argument parser: every command, option and help text, and the exit codes
each command documents. Built when `main` runs; the commands live in tf_fsm.cli.run (set-up and
runs), tf_fsm.cli.reset, tf_fsm.cli.merge, tf_fsm.cli.stop, tf_fsm.cli.query (read-only queries) and
tf_fsm.cli.tools."""

from __future__ import annotations

import argparse
import os
import sys

from tf_fsm import __version__
from tf_fsm.cli.common import add_global_arguments, add_worktree_argument
from tf_fsm.cli.exits import epilog
from tf_fsm.cli.gate import cmd_gate
from tf_fsm.cli.merge import add_merge_parser
from tf_fsm.cli.query import cmd_prompts, cmd_settings, cmd_status, cmd_tickets
from tf_fsm.cli.reset import add_reset_parser
from tf_fsm.cli.run import add_run_arguments, cmd_init, cmd_resume, cmd_run
from tf_fsm.cli.stop import add_stop_parser
from tf_fsm.cli.temporal import add_temporal_flag, add_temporal_parsers
from tf_fsm.cli.ticket_write import WRITE_EPILOG, add_write_arguments
from tf_fsm.cli.tools import (
    _positive,
    cmd_demo,
    cmd_diagram,
    cmd_doctor,
    cmd_ralph,
    cmd_simulate,
    cmd_watch,
)
from tf_fsm.cli.ui import add_ui_arguments, cmd_ui
from tf_fsm.cli.workspaces import add_workspaces_parser

EPILOG = epilog()

TICKETS_EPILOG = """\
exit codes (ready, blocked, show):
  0   printed (an empty list is not an error)
  2   bad input: no project found, --root not a directory, show: no ticket matches (or
      several do)
  141 standard output was closed early (e.g. piped into `head`)
"""
RALPH_EPILOG = """\
exit codes:
  0    the loop ended normally: nothing left to run (every ready ticket closed,
       blocked for good, in error or locked; the summary says which) or
       --max-iterations runs started
  1    unexpected internal error (traceback with --verbose)
  2    bad input: usage, settings file, missing agent program, no project found
  75   every ready ticket is locked by another process, so nothing ran
  130  interrupted (Ctrl-C or SIGTERM); running tickets stop and stay resumable
"""

SIMULATE_EPILOG = """\
runs a simulated backlog through the real orchestrator once per policy, with an in-process
agent whose outcomes are drawn from the profile (seeded: the same seed gives the same table);
see docs/simulate.md

exit codes:
  0   done (the table printed; the done-when criteria are printed, not enforced)
  1   unexpected internal error (traceback with --verbose)
  2   bad input: usage, an unknown policy, a chart path not ending in .svg, a profile file
      that is missing or invalid (named with the key)
"""


class _Formatter(argparse.RawDescriptionHelpFormatter):
    """argparse's, with the width found without shutil: argparse builds a formatter for every
    argument added, and shutil (which loads bz2 and lzma) was a tenth of the start-up of a
    command as quick as `tf-fsm tickets ready`."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=_columns() - 2)


def _columns() -> int:
    """shutil.get_terminal_size's columns: $COLUMNS when positive, else the terminal's, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns > 0:
        return columns
    stdout = sys.__stdout__
    try:
        return (os.get_terminal_size(stdout.fileno()).columns if stdout else 0) or 80
    except (ValueError, OSError):
        return 80


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tf-fsm",
        description="Drive AI coding agents over a tk ticket backlog: research -> implement -> "
        "review -> fix -> verify -> close, with quality gates and tiered model escalation.",
        epilog=EPILOG,
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"tf-fsm {__version__}")
    add_global_arguments(parser)
    # The same options after the subcommand too.
    common = argparse.ArgumentParser(add_help=False, formatter_class=_Formatter)
    add_global_arguments(common, after_command=True)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=help_,
            description=help_,
            epilog=EPILOG,
            parents=[common],
            formatter_class=_Formatter,
        )

    p = add("settings", "validate .tf/config/settings.json and show each role's model per attempt")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_settings)

    p = add("init", "write a default .tf/config/settings.json and create .tickets/")
    p.set_defaults(func=cmd_init)

    p = add("run", "drive one ticket through its lifecycle")
    add_run_arguments(p)
    p.set_defaults(func=cmd_run, research=None)
    add_temporal_flag(p, "run")

    p = add("resume", "continue a ticket's attempt that is in progress or in error")
    p.add_argument("ticket")
    p.add_argument(
        "--plan",
        "--dry-run",
        dest="plan",
        action="store_true",
        help="say which phase would run next and why, without running anything",
    )
    p.add_argument("--json", action="store_true", help="the outcome (or plan) as JSON")
    add_worktree_argument(p)
    p.set_defaults(
        func=cmd_resume,
        research=None,
        once=False,
        retry_reset=False,
        auto=False,
        create_followups=False,
        simplify_tickets=False,
        final_review_loop=False,
        phases=None,
        hold_merge=False,
        ralph=None,
        store=None,  # an attempt to resume is in the files: a memory store has none
    )

    p = add("reset", "reset a ticket's retries without running it: the next run is attempt 1")
    add_reset_parser(p)

    p = add("merge", "merge a passed ticket waiting for its merge (ralph.parallelAutoMerge off)")
    add_merge_parser(p)

    p = add("stop", "stop the run that holds a ticket resumably, as Ctrl-C does")
    add_stop_parser(p)

    p = add("prompts", "list the prompt templates each phase uses, or render one")
    p.add_argument("action", choices=["list", "show"])
    p.add_argument(
        "phase", nargs="?", choices=["research", "implement", "review", "fix", "verify", "close"]
    )
    p.add_argument(
        "--role",
        help="a role the phase uses: a reviewer role for review and verify (default "
        "reviewer-general), else the phase's one role",
    )
    p.add_argument(
        "--attempt",
        type=_positive,
        help="render as this attempt, 1 or more (default 1; with --ticket, its next attempt, "
        "and only a later one when none would run)",
    )
    p.add_argument(
        "--ticket",
        help="render with this ticket's real context (as `run --plan` would); exit 2 when no "
        "attempt would run and no --attempt is given",
    )
    p.add_argument("--json", action="store_true", help="list: one JSON object per line")
    p.set_defaults(func=cmd_prompts)

    p = add("status", "state, attempt, blocked attempts, escalation and next step of tickets")
    p.add_argument(
        "tickets", nargs="*", metavar="TICKET", help="these tickets (default: every ticket run)"
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="the whole backlog: every ticket in .tickets/ in tk's order (priority, then id), "
        "those never run too, then tickets with state but no ticket file",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per ticket per line")
    p.set_defaults(func=cmd_status)
    add_temporal_flag(p, "status")

    p = add("gate", "the quality-gate verdict from a ticket's artifacts as they are on disk")
    p.add_argument("tickets", nargs="+", metavar="TICKET")
    p.add_argument("--json", action="store_true", help="one JSON object per ticket per line")
    p.add_argument(
        "--run",
        action="store_true",
        help="run the workflow.qualityGates commands now, outside a lifecycle; "
        "exit 3 when a required gate fails, 2 when a gate cannot start (program or cwd missing)",
    )
    p.add_argument(
        "--no-baseline",
        action="store_true",
        help="with --run: do not judge a failing gate against the base commit (a failure that "
        "is pre-existing on the base then fails too; docs/gates.md)",
    )
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser(
        "tickets",
        help="what tk ready | blocked | show would print: the backlog as the loop sees it; "
        "create and edit tickets as tk does",
        description="print what `tk ready`, `tk blocked` or `tk show ID` print (docs/ralph.md); "
        "create or edit a ticket as `tk create` and `tk edit` write it",
        epilog=TICKETS_EPILOG + "\n" + WRITE_EPILOG,
        parents=[common],
        formatter_class=_Formatter,
    )
    p.add_argument("action", choices=["ready", "blocked", "show", "create", "edit"])
    p.add_argument(
        "ticket", nargs="?", metavar="TICKET", help="show: an id (or part of one); edit: an id"
    )
    p.add_argument(
        "-a", "--assignee", help="ready/blocked: only this assignee (exact); create: the assignee"
    )
    p.add_argument("-T", "--tag", help="ready/blocked: only tickets with this tag")
    add_write_arguments(p)
    p.set_defaults(func=cmd_tickets, teardown=False)  # read-only: see cli._end_process

    p = sub.add_parser(
        "ralph",
        help="the backlog loop: run ready tickets until none is left (docs/ralph.md)",
        description="Run ready tk tickets one attempt at a time (N at once), retrying blocked\n"
        "ones later with escalated models, until nothing is left to run, --max-iterations\n"
        "runs have started, or Ctrl-C. Progress goes to .tf/ralph/progress.md.",
        epilog=RALPH_EPILOG,
        parents=[common],
        formatter_class=_Formatter,
    )
    p.add_argument(
        "--workers", type=_positive, help="tickets at once (default ralph.parallelWorkers)"
    )
    p.add_argument(
        "--max-iterations",
        type=_positive,
        help="stop after starting this many runs (default ralph.maxIterations)",
    )
    p.add_argument(
        "--resume-errors",
        action="store_true",
        help="resume tickets whose last attempt ended in error (once each per loop)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print what would run now, in order, with attempt and escalated roles",
    )
    p.add_argument("--json", action="store_true", help="one JSON object per event on stdout")
    p.add_argument("-a", "--assignee", help="only tickets with this assignee (as tk ready -a)")
    p.add_argument("-T", "--tag", help="only tickets with this tag (as tk ready -T)")
    add_worktree_argument(p)
    p.set_defaults(func=cmd_ralph)
    add_temporal_flag(p, "ralph")

    p = add("workspaces", "each ticket's git branch and worktree; prune removes those done with")
    add_workspaces_parser(p)

    p = add("watch", "resume hand-off and errored tickets when their files arrive (docs/watch.md)")
    p.epilog = """\
without TICKET: every ticket waiting for a hand-off artifact or in error, and tickets that
start waiting later; Ctrl-C (or SIGTERM) stops, leaving every ticket resumable

exit codes:
  0    --once: no watched ticket is waiting or in error any more
  1    unexpected internal error (traceback with --verbose)
  2    bad input: usage, ticket id, missing ticket, settings file, no project found
  130  interrupted (Ctrl-C or SIGTERM)
"""
    p.add_argument("tickets", nargs="*", metavar="TICKET")
    p.add_argument(
        "--once", action="store_true", help="exit when no watched ticket waits or is in error"
    )
    p.add_argument("--json", action="store_true", help="one JSON object per log line")
    p.set_defaults(func=cmd_watch)

    p = add("doctor", "check the agent CLI: installed, version, command lines, unmapped settings")
    p.epilog = """\
exit codes:
  0   the agent CLI is installed and every setting maps onto it (or the executor
      kind runs no CLI)
  1   unexpected internal error (traceback with --verbose)
  2   not ready: no preset or command, the program is not found, `--version` fails,
      or bad settings
  3   installed, but a setting cannot be mapped (named); phases would run without it
"""
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_doctor)

    p = add("simulate", "compare retry policies on a simulated backlog (cost vs tickets closed)")
    p.epilog = SIMULATE_EPILOG
    p.add_argument("--tickets", type=_positive, help="backlog size (default: the profile's, 500)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument("--profile", help="a profile file, JSON or .toml (default: the bundled one)")
    p.add_argument(
        "--policy", default="a,b,c,d", help="comma-separated policies a,b,c,d,e (default a,b,c,d)"
    )
    p.add_argument("--chart", help="write the cost/closed chart as SVG to this path")
    p.add_argument("--no-budget", action="store_true", help="skip the budget run")
    p.add_argument("--jobs", type=_positive, default=1, help="run policies in N processes")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=cmd_simulate)

    p = add("demo", "run a sample ticket with the bundled offline agent in a throwaway project")
    p.add_argument("--dir", help="create the demo project here (default: a new temp dir)")
    p.set_defaults(func=cmd_demo)

    p = add("diagram", "state diagrams generated from the lifecycle machine, or a ticket's path")
    p.epilog = """\
writes diagrams/ticket-lifecycle.mmd, .md and .dot under the current directory (run it from
the repository root), or with --ticket ID <ticket dir>/lifecycle.mmd; see docs/diagrams.md

exit codes:
  0   written; --check: up to date
  1   --check: a committed diagram is missing or stale (named on stderr): regenerate with
      `tf-fsm diagram` and commit; also an unexpected internal error
  2   bad input: usage, ticket id, a ticket never run, corrupt state file, or --format svg|png
      without Graphviz's `dot` (the message says how to install it)
"""
    p.add_argument(
        "--format",
        choices=("mermaid", "markdown", "dot", "svg", "png"),
        help="one format only (default: mermaid, markdown and dot for the lifecycle; mermaid "
        "for --ticket); svg and png need Graphviz's `dot`",
    )
    p.add_argument("--ticket", metavar="ID", help="draw this ticket's path from its journal")
    p.add_argument(
        "--ralph",
        action="store_true",
        help="one picture of the backlog: how many tickets took each edge "
        "(default output .tf/ralph/lifecycle.mmd)",
    )
    p.add_argument("-o", "--output", metavar="PATH", help="write here instead; - for stdout")
    p.add_argument("--dir", default="diagrams", help="lifecycle output dir (default: diagrams)")
    p.add_argument("--check", action="store_true", help="fail if the committed files are stale")
    p.set_defaults(func=cmd_diagram)

    p = add("ui", "a live web board of the backlog and each ticket's path (docs/ui.md)")
    p.epilog = """\
serves the board until Ctrl-C or SIGTERM; prints its URL first (with --port 0, the port it
picked). Off loopback (--host other than 127.0.0.1, ::1 or localhost) every request needs the
token in that URL.

exit codes:
  0   stopped by Ctrl-C or SIGTERM
  2   bad input: usage, a port out of range, an address that cannot be bound or is taken,
      missing project, settings file
"""
    add_ui_arguments(p)
    p.set_defaults(func=cmd_ui)
    add_temporal_flag(p, "ui")

    add_temporal_parsers(add)
    return parser
