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
    PromptTemplateError,
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
EXIT_WAITING = 6
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
    (PromptTemplateError, EXIT_BAD_INPUT),
)
#: How a run ended -> exit code.
OUTCOME_CODES = {
    "closed": EXIT_OK,
    "already_closed": EXIT_OK,
    "blocked": EXIT_BLOCKED,
    "exhausted": EXIT_EXHAUSTED,
    "error": EXIT_ERROR,
    "waiting": EXIT_WAITING,
}

EPILOG = """\
exit codes:
  0   success (run: the ticket is closed)
  1   unexpected internal error (traceback with --verbose)
  2   bad input: usage, settings file, ticket id, missing project or ticket,
      missing agent program, corrupt state file (left untouched)
  3   run: blocked by the quality gate, retries left
  4   run: blocked, retries exhausted, the ticket's budget spent, or the same
      failure repeated (same-failure; later runs are refused before any agent runs)
  5   run: a phase failed; the attempt is in error and resumable with `run` again
  6   run: waiting for a hand-off artifact (executor kind "handoff"); resumable
  75  the ticket is being run by another process
"""

TICKETS_EPILOG = """\
exit codes:
  0   printed (an empty list is not an error)
  2   bad input: no project found, show: no ticket matches (or several do)
"""
RALPH_EPILOG = """\
exit codes:
  0    the loop ended normally: nothing left to run (every ready ticket closed,
       blocked for good, in error or locked; the summary says which) or
       --max-iterations runs started
  1    unexpected internal error (traceback with --verbose)
  2    bad input: usage, settings file, missing agent program, no project found
  130  interrupted (Ctrl-C or SIGTERM); running tickets stop and stay resumable
"""


def _console() -> Any:
    from rich.console import Console

    # Piped output keeps whole model ids rather than rich's 80-column ellipses.
    return Console(width=None if sys.stdout.isatty() else 200)


def _root(args: argparse.Namespace) -> Path:
    from tf_fsm.project import find_project_root  # not tf_fsm.config: no pydantic to find it

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
    import os

    from tf_fsm.config import ROOT_ENV, SETTINGS_RELPATH, init_settings
    from tf_fsm.store import atomic_write_text
    from tf_fsm.tickets import tickets_dir

    # init creates the project, so it does not walk up: --root, else $TF_FSM_ROOT, else here.
    root = Path(args.root or os.environ.get(ROOT_ENV) or Path.cwd()).resolve()
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
        "same-failure": "BLOCKED (the same failure repeated)",
        "error": "ERROR (resumable: run it again)",
        "waiting": "WAITING for a hand-off artifact (tf-fsm watch, or run again, picks it up)",
    }["same-failure" if outcome.reason.startswith("same-failure") else outcome.status]
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
    if args.plan:
        return _print_plan(root, ticket_id, args)
    options = _worker_options(args, root, ticket_id)
    outcome = run_ticket(root, ticket_id, options, observer=ConsoleObserver())
    if args.json:
        print(json.dumps(_outcome_json(outcome)))
        return OUTCOME_CODES[outcome.status]
    return _report(outcome)


def cmd_resume(args: argparse.Namespace) -> int:
    """`run`, restricted to a ticket whose current attempt is in progress or in error."""
    from tf_fsm.config import knowledge_dir, load_settings
    from tf_fsm.status import next_step
    from tf_fsm.store import TicketStore

    root = _root(args)
    (ticket_id,) = _ticket_ids([args.ticket])
    settings = load_settings(root)
    store = TicketStore(knowledge_dir(root, settings), ticket_id)
    state = store.load_retry_state()
    if state is None or not state.has_open_attempt:
        raise UsageError(
            f"{ticket_id}: nothing to resume (no attempt in progress or in error); "
            f"next: {next_step(store, state, settings)}; use `tf-fsm run {ticket_id}`"
        )
    return cmd_run(args)


def _outcome_json(outcome: Any) -> dict[str, Any]:
    return {
        "ticket": outcome.ticket_id,
        "status": outcome.status,
        "attempt": outcome.attempt,
        "attemptsRun": outcome.attempts_run,
        "retryCount": outcome.retry_count,
        "maxRetries": outcome.max_retries,
        "reason": outcome.reason,
    }


def _print_plan(root: Path, ticket_id: str, args: argparse.Namespace) -> int:
    from tf_fsm.config import load_settings
    from tf_fsm.executors import make_executor
    from tf_fsm.orchestrator import QuietObserver, TicketRun
    from tf_fsm.planning import plan

    settings = load_settings(root)
    run = TicketRun(
        root,
        ticket_id,
        _run_options(args),
        settings,
        make_executor(settings, root),
        QuietObserver(),
    )
    data = plan(run)
    if args.json:
        print(json.dumps(data, indent=2))
        return EXIT_OK
    print(f"{ticket_id}: {data['action'].replace('_', ' ')}: {data['why']}")
    if "sameFailure" in data:
        repeat = data["sameFailure"]
        print(f"same failure ({repeat['action']}): {repeat['reason']}")
    if "phases" not in data:
        return EXIT_OK
    escalated = ", ".join(data["escalatedRoles"]) or "none"
    prior = "yes" if data["priorFailure"] else "no"
    print(
        f"attempt {data['attempt']} (trigger {data['trigger']}, tier {data['tier']}, "
        f"escalated: {escalated}, prior failure in prompts: {prior})"
    )
    for phase in data["phases"]:
        mark = "run " if phase["runs"] else "skip"
        print(f"  {mark} {phase['phase']:<9} {phase['reason']}")
        for call in phase["invocations"]:
            print(
                f"         {call['role']:<24} {call['model']} ({call['source']}) "
                f"{Path(call['template']).name} [{call['templateOrigin']}] {call['promptBytes']} B"
            )
    return EXIT_OK


def cmd_prompts(args: argparse.Namespace) -> int:
    from tf_fsm.planning import template_table

    root = _optional_root(args)
    if args.action == "list":
        rows = template_table(root)
        if args.json:
            for row in rows:
                print(json.dumps(row))
            return EXIT_OK
        from rich.table import Table

        table = Table("phase", "role", "template", "origin", "model", "thinking", "path")
        for r in rows:
            table.add_row(
                r["phase"],
                r["role"],
                r["template"],
                r["origin"],
                r["model"] or "-",
                r["thinking"] or "-",
                r["path"],
            )
        _console().print(table)
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


def cmd_status(args: argparse.Namespace) -> int:
    from tf_fsm.project import nothing_run_with_defaults

    root = _root(args)
    if not args.tickets and nothing_run_with_defaults(root):
        # No settings file to validate and no ticket state: answered without loading the
        # settings models (pydantic), which would take longer than the rest of the command.
        return _no_rows(args.json)
    from tf_fsm.config import load_settings
    from tf_fsm.status import ticket_status, tracked_tickets

    settings = load_settings(root)
    ids = _ticket_ids(args.tickets) if args.tickets else tracked_tickets(root, settings)
    rows = [ticket_status(root, settings, ticket_id) for ticket_id in ids]
    if not rows:
        return _no_rows(args.json)
    if args.json:
        for row in rows:
            print(json.dumps(row))
        return EXIT_OK
    from rich.table import Table

    table = Table("ticket", "state", "attempt", "retries", "escalated", "last failure", "next")
    for row in rows:
        table.add_row(
            row["ticket"],
            row["state"],
            str(row["attempt"] or "-"),
            f"{row['retryCount']}/{row['maxRetries']}",
            ", ".join(row["escalatedRoles"]) or "-",
            row["lastFailure"] or "-",
            row["next"],
        )
    _console().print(table)
    return EXIT_OK


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


def _worker_options(args: argparse.Namespace, root: Path, ticket_id: str) -> Any:
    """`run --ralph` (hidden): how the backlog loop's worker processes run a ticket."""
    options = _run_options(args)
    if not args.ralph:
        return options
    import dataclasses

    from tf_fsm.ralph_worker import install_worker_sigint

    install_worker_sigint()
    return dataclasses.replace(options, retry_trigger="ralph_retry")


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


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return value


def cmd_ralph(args: argparse.Namespace) -> int:
    from tf_fsm.config import load_settings
    from tf_fsm.ralph import LoopOptions, run_ralph

    root = _root(args)
    settings = load_settings(root)
    for warning in settings.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    ralph = settings.settings.ralph
    options = LoopOptions(
        workers=args.workers or ralph.parallelWorkers,
        max_iterations=args.max_iterations or ralph.maxIterations,
        resume_errors=args.resume_errors,
        assignee=args.assignee,
        tag=args.tag,
    )
    return run_ralph(root, settings, options, dry_run=args.dry_run, json_lines=args.json)


def cmd_watch(args: argparse.Namespace) -> int:
    from tf_fsm.watch import Watch  # imports watchdog: only for this command

    root = _root(args)
    return Watch(root, _ticket_ids(args.tickets), once=args.once, json_lines=args.json).run()


def cmd_doctor(args: argparse.Namespace) -> int:
    from tf_fsm.config import load_settings
    from tf_fsm.executors.doctor import diagnose

    root = _root(args)
    diag = diagnose(root, load_settings(root))
    if args.json:
        print(json.dumps(diag.to_json(), indent=2))
        return diag.exit_code
    preset = f", preset {diag.preset}" if diag.preset else ""
    print(f"executor: {diag.kind}{preset}")
    if diag.program:
        where = diag.path or "NOT FOUND"
        print(f"agent: {diag.program} -> {where}" + (f" ({diag.version})" if diag.version else ""))
    for note in diag.notes:
        print(f"note: {note}")
    if diag.commands:
        print("command lines on attempt 1 (prompt on stdin; TF_* variables in the environment):")
        import shlex

        for call in diag.commands:
            print(f"  {call['phase']:<9} {call['role']:<24} {shlex.join(call['argv'])}")
    for problem in diag.problems:
        print(f"cannot map: {problem}")
    if diag.error:
        print(f"tf-fsm: error: {diag.error}", file=sys.stderr)
    elif not diag.problems:
        print("ok: every setting maps onto the agent CLI")
    return diag.exit_code


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


def cmd_simulate(args: argparse.Namespace) -> int:
    from tf_fsm.simulate import criteria, load_profile, simulate, svg_chart, table
    from tf_fsm.simulate.engine import POLICIES

    policies = [p.strip() for p in args.policy.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        valid = ", ".join(f"{k} ({v})" for k, v in POLICIES.items())
        raise UsageError(
            f"--policy: unknown policy {', '.join(unknown) or '(none)'}; valid: {valid}"
        )
    if args.chart and not args.chart.endswith(".svg"):
        raise UsageError(f"--chart {args.chart}: only .svg is written (no plotting library)")
    profile = load_profile(Path(args.profile) if args.profile else None)
    tickets = args.tickets or profile.tickets
    results = simulate(profile, policies, tickets, args.seed, not args.no_budget, args.jobs)
    checks = criteria(results)
    if args.chart:
        title = f"{tickets} simulated tickets, seed {args.seed}"
        Path(args.chart).write_text(svg_chart(results, title), encoding="utf-8")
    if args.json:
        out = {
            "tickets": tickets,
            "seed": args.seed,
            "profile": args.profile or "default",
            "results": [r.to_json() for r in results],
            "criteria": [{"name": n, "passed": ok, "detail": d} for n, ok, d in checks],
        }
        print(json.dumps(out, indent=2))
        return EXIT_OK
    print(table(results))
    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    if args.chart:
        print(f"chart: {args.chart}")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from tf_fsm.demo import run_demo

    outcome, where = run_demo(Path(args.dir) if args.dir else None)
    print(f"\nthe demo project is in {where}")
    return OUTCOME_CODES[outcome.status]


def cmd_diagram(args: argparse.Namespace) -> int:
    from tf_fsm import diagrams
    from tf_fsm import history as history_mod

    if args.check:
        if (args.ticket, args.format, args.output) != (None, None, None):
            raise UsageError("--check compares the committed files; no --ticket, --format or -o")
        stale = diagrams.stale_files(Path(args.dir))
        if not stale:
            print(f"{args.dir}: up to date")
            return EXIT_OK
        for path in stale:
            print(f"stale: {path} (missing or differs from the code)", file=sys.stderr)
        print(
            "regenerate with `tf-fsm diagram` from the repository root, then commit them",
            file=sys.stderr,
        )
        return EXIT_INTERNAL  # like a failing check, documented in `diagram --help`
    history = store = None
    if args.ralph:
        if args.ticket is not None:
            raise UsageError("--ralph draws every ticket; drop --ticket")
        root = _root(args)
        history = history_mod.backlog_history(root)
        if args.output is None:
            fmt = args.format or "mermaid"
            args.output = str(root / ".tf" / "ralph" / ("lifecycle" + diagrams.SUFFIX[fmt]))
    elif args.ticket is not None:
        (ticket_id,) = _ticket_ids([args.ticket])
        history, store = history_mod.load_history(_root(args), ticket_id)
        for step in history.unmapped:
            print(f"warning: {ticket_id}: no lifecycle edge for {step}", file=sys.stderr)
    fmt = args.format or "mermaid"
    try:
        if args.output is None and store is None and history is None:
            written = diagrams.write_lifecycle(Path(args.dir), args.format)
        else:
            data = diagrams.diagram(fmt, history)
            if args.output == "-":
                sys.stdout.buffer.write(data)
                sys.stdout.flush()
                return EXIT_OK
            written = [diagrams.write_output(data, fmt, args.output, store)]
    except diagrams.GraphvizError as exc:
        print(f"tf-fsm: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for path in written:
        print(f"wrote {path}")
    return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tf-fsm",
        description="Drive AI coding agents over a tk ticket backlog: research -> implement -> "
        "review -> fix -> verify -> close, with quality gates and tiered model escalation.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"tf-fsm {__version__}")
    root_help = "project root (default: $TF_FSM_ROOT, else walk up to .tf/ or .tickets/)"
    verbose_help = "tracebacks for internal errors"
    parser.add_argument("--root", help=root_help)
    parser.add_argument("--verbose", action="store_true", help=verbose_help)
    # The same options after the subcommand too; SUPPRESS keeps a value given before it.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", default=argparse.SUPPRESS, help=root_help)
    common.add_argument(
        "--verbose", action="store_true", default=argparse.SUPPRESS, help=verbose_help
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        return sub.add_parser(
            name,
            help=help_,
            description=help_,
            epilog=EPILOG,
            parents=[common],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    p = add("settings", "validate .tf/config/settings.json and show each role's model per attempt")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_settings)

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
    p.add_argument(
        "--plan",
        "--dry-run",
        dest="plan",
        action="store_true",
        help="print what would run (attempt, phases, models and their source, "
        "templates, prompt sizes) without running, locking or writing anything",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print the outcome (or, with --plan, the plan) as JSON on stdout",
    )
    p.add_argument("--ralph", action="store_true", help=argparse.SUPPRESS)  # loop's workers
    p.set_defaults(func=cmd_run, research=None)

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
    p.set_defaults(
        func=cmd_resume,
        research=None,
        once=False,
        retry_reset=False,
        auto=False,
        create_followups=False,
        simplify_tickets=False,
        final_review_loop=False,
        ralph=False,
    )

    p = add("prompts", "list the prompt templates each phase uses, or render one")
    p.add_argument("action", choices=["list", "show"])
    p.add_argument(
        "phase", nargs="?", choices=["research", "implement", "review", "fix", "verify", "close"]
    )
    p.add_argument(
        "--role", help="the reviewer role, for review and verify (default reviewer-general)"
    )
    p.add_argument("--attempt", type=int, default=1, help="render as this attempt (default 1)")
    p.add_argument(
        "--ticket", help="render with this ticket's real context (as `run --plan` would)"
    )
    p.add_argument("--json", action="store_true", help="list: one JSON object per line")
    p.set_defaults(func=cmd_prompts)

    p = add("status", "state, attempt, retries and escalation of tickets")
    p.add_argument("tickets", nargs="*", metavar="TICKET")
    p.add_argument("--json", action="store_true", help="one JSON object per ticket per line")
    p.set_defaults(func=cmd_status)

    p = add("gate", "the quality-gate verdict from a ticket's artifacts as they are on disk")
    p.add_argument("tickets", nargs="+", metavar="TICKET")
    p.add_argument("--json", action="store_true", help="one JSON object per ticket per line")
    p.add_argument(
        "--run",
        action="store_true",
        help="run the workflow.qualityGates commands now, outside a lifecycle; "
        "exit 3 when a required gate fails",
    )
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser(
        "tickets",
        help="what tk ready | blocked | show would print: the backlog as the loop sees it",
        description="print what `tk ready`, `tk blocked` or `tk show ID` print (docs/ralph.md)",
        epilog=TICKETS_EPILOG,
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", choices=["ready", "blocked", "show"])
    p.add_argument("ticket", nargs="?", metavar="TICKET", help="show: a ticket id (or part of one)")
    p.add_argument("-a", "--assignee", help="ready/blocked: only this assignee (exact)")
    p.add_argument("-T", "--tag", help="ready/blocked: only tickets with this tag")
    p.set_defaults(func=cmd_tickets)

    p = sub.add_parser(
        "ralph",
        help="the backlog loop: run ready tickets until none is left (docs/ralph.md)",
        description="Run ready tk tickets one attempt at a time (N at once), retrying blocked\n"
        "ones later with escalated models, until nothing is left to run, --max-iterations\n"
        "runs have started, or Ctrl-C. Progress goes to .tf/ralph/progress.md.",
        epilog=RALPH_EPILOG,
        parents=[common],
        formatter_class=argparse.RawDescriptionHelpFormatter,
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
    p.set_defaults(func=cmd_ralph)

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
