"""The CLI's tool commands: ralph, watch, doctor, simulate, demo, diagram. Each imports what
it needs when it runs, so that `tf-fsm --help` and the everyday commands start fast; only
`tf_fsm.cli.exits` maps errors to exit codes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tf_fsm.cli.common import print_json, project_root, ticket_ids
from tf_fsm.cli.exits import EXIT_OK, LOOP_CODES, OUTCOME_CODES
from tf_fsm.errors import EXIT_INTERNAL, UsageError


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1, not {text!r}")
    return value


def _at_most(option: str, value: int | None, bound: int) -> None:
    if value is not None and value > bound:
        raise UsageError(f"{option}: at most {bound}, not {value} (docs/settings.md)")


def cmd_ralph(args: argparse.Namespace) -> int:
    from tf_fsm.loop.ralph import run_ralph
    from tf_fsm.loop.records import LoopOptions
    from tf_fsm.settings.load import load_settings
    from tf_fsm.settings.schema import MAX_ITERATIONS, MAX_WORKERS
    from tf_fsm.storage.backends import memory_refused

    root = project_root(args)
    settings = load_settings(root, record=not args.dry_run)  # --dry-run writes nothing
    memory_refused(settings, None, "the backlog loop (its workers are separate processes)")
    for warning in settings.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    ralph = settings.settings.ralph
    _at_most("--workers", args.workers, MAX_WORKERS)  # the bounds the settings keys have
    _at_most("--max-iterations", args.max_iterations, MAX_ITERATIONS)
    options = LoopOptions(
        workers=args.workers or ralph.parallelWorkers,
        max_iterations=args.max_iterations or ralph.maxIterations,
        resume_errors=args.resume_errors,
        assignee=args.assignee,
        tag=args.tag,
        worktree=args.worktree,
    )
    from tf_fsm.cli.run import worker_main

    result = run_ralph(
        root, settings, options, worker_main, dry_run=args.dry_run, json_lines=args.json
    )
    return EXIT_OK if result is None else LOOP_CODES.get(result.reason, EXIT_OK)


def cmd_watch(args: argparse.Namespace) -> int:
    from tf_fsm.settings.load import load_settings
    from tf_fsm.storage.backends import memory_refused
    from tf_fsm.watch.watcher import Watch  # imports watchdog: only for this command

    root = project_root(args)
    memory_refused(load_settings(root), None, "watch (it sees runs of other processes)")
    return Watch(root, ticket_ids(args.tickets), once=args.once, json_lines=args.json).run()


def cmd_doctor(args: argparse.Namespace) -> int:
    from tf_fsm.settings.load import load_settings
    from tf_fsm.views.doctor import diagnose
    from tf_fsm.views.terminal import terminal_safe

    root = project_root(args)
    diag = diagnose(root, load_settings(root))
    if args.json:
        print_json(diag.to_json(), indent=2)
        return diag.exit_code

    def say(line: str) -> None:
        # the agent CLI's version and stderr are its own words; the settings' are the user's
        print(terminal_safe(line))

    preset = f", preset {diag.preset}" if diag.preset else ""
    say(f"executor: {diag.kind}{preset}")
    if diag.program:
        where = diag.path or "NOT FOUND"
        say(f"agent: {diag.program} -> {where}" + (f" ({diag.version})" if diag.version else ""))
    for note in diag.notes:
        say(f"note: {note}")
    for warning in diag.warnings:
        say(f"warning: {warning}")
    if diag.commands:
        say("command lines on attempt 1 (prompt on stdin; TF_* variables in the environment):")
        import shlex

        for call in diag.commands:
            say(f"  {call['phase']:<9} {call['role']:<24} {shlex.join(call['argv'])}")
    for problem in diag.problems:
        say(f"cannot map: {problem}")
    if diag.error:
        print(f"tf-fsm: error: {terminal_safe(diag.error)}", file=sys.stderr)
    elif not diag.problems:
        say("ok: every setting maps onto the agent CLI")
    return diag.exit_code


def cmd_simulate(args: argparse.Namespace) -> int:
    from tf_fsm.fs.atomic import atomic_write_text
    from tf_fsm.simulate import criteria, load_profile, simulate, svg_chart, table
    from tf_fsm.simulate.engine import POLICIES

    policies = list(dict.fromkeys(p.strip() for p in args.policy.split(",") if p.strip()))
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        valid = ", ".join(f"{k} ({v})" for k, v in POLICIES.items())
        raise UsageError(
            f"--policy: unknown policy {', '.join(unknown) or '(none)'}; valid: {valid}"
        )
    if args.chart and not args.chart.endswith(".svg"):
        raise UsageError(f"--chart {args.chart}: only .svg is written (no plotting library)")
    if args.chart and not Path(args.chart).absolute().parent.is_dir():
        raise UsageError(f"--chart {args.chart}: no such directory (checked before simulating)")
    profile = load_profile(Path(args.profile) if args.profile else None)
    tickets = args.tickets or profile.tickets
    results = simulate(profile, policies, tickets, args.seed, not args.no_budget, args.jobs)
    checks = criteria(results)
    if args.chart:
        title = f"{tickets} simulated tickets, seed {args.seed}"
        atomic_write_text(Path(args.chart), svg_chart(results, title), within=None)
    if args.json:
        out = {
            "tickets": tickets,
            "seed": args.seed,
            "profile": args.profile or "default",
            "results": [r.to_json() for r in results],
            "criteria": [{"name": n, "passed": ok, "detail": d} for n, ok, d in checks],
        }
        print_json(out, indent=2)
        return EXIT_OK
    print(table(results))
    for name, ok, detail in checks:
        print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    if args.chart:
        print(f"chart: {args.chart}")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    from tf_fsm.cli.demo import run_demo

    outcome, where = run_demo(Path(args.dir) if args.dir else None)
    print(f"\nthe demo project is in {where}")
    return OUTCOME_CODES[outcome.status]


def cmd_diagram(args: argparse.Namespace) -> int:
    from tf_fsm.views import diagrams
    from tf_fsm.views import history as history_mod

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
    history = store = within = None
    if args.ralph:
        if args.ticket is not None:
            raise UsageError("--ralph draws every ticket; drop --ticket")
        root = project_root(args)
        history = history_mod.backlog_history(root)
        if args.output is None:  # tf_fsm's own file in the project, not a path the user named
            fmt = args.format or "mermaid"
            args.output = str(root / ".tf" / "ralph" / ("lifecycle" + diagrams.SUFFIX[fmt]))
            within = root
    elif args.ticket is not None:
        (ticket_id,) = ticket_ids([args.ticket])
        history, store = history_mod.load_history(project_root(args), ticket_id)
        for step in history.unmapped:
            print(f"warning: {ticket_id}: no lifecycle edge for {step}", file=sys.stderr)
    fmt = args.format or "mermaid"
    if args.output is None and store is None and history is None:
        written = diagrams.write_lifecycle(Path(args.dir), args.format)
    else:
        data = diagrams.diagram(fmt, history)
        if args.output == "-":
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
            return EXIT_OK
        written = [diagrams.write_output(data, fmt, args.output, store, within)]
    for path in written:
        print(f"wrote {path}")
    return EXIT_OK
