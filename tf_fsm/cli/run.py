"""The commands that set up and run tickets: init, run (with `run --plan`'s output), resume,
and the entry of the backlog loop's workers."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from tf_fsm.cli.common import (
    add_store_argument,
    add_worktree_argument,
    existing_dir,
    print_json,
    project_root,
    ticket_ids,
)
from tf_fsm.cli.exits import EXIT_OK, OUTCOME_CODES, run_command
from tf_fsm.cli.run_steps import add_step_arguments, check_steps
from tf_fsm.errors import UsageError
from tf_fsm.storage.layout import CHAIN_CONTEXT, RETRY_STATE


def cmd_init(args: argparse.Namespace) -> int:
    import os

    from tf_fsm.fs.atomic import atomic_write_text
    from tf_fsm.settings.load import ROOT_ENV, SETTINGS_RELPATH, init_settings, load_settings
    from tf_fsm.settings.project import STATE_IGNORE, STATE_IGNORE_RELPATH
    from tf_fsm.storage.store import atomic_write_json, make_dirs
    from tf_fsm.tk.tickets import tickets_dir

    # init creates the project, so it does not walk up: --root, else $TF_FSM_ROOT, else here;
    # a root that does not exist yet is created (with its parents), as `git init DIR` does.
    given = args.root or os.environ.get(ROOT_ENV)
    root = Path(given or Path.cwd()).resolve()
    source = f"--root {args.root}" if args.root else f"${ROOT_ENV} {given}" if given else str(root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UsageError(f"{source}: not a directory (the project root must be one)") from None
    except OSError as exc:
        raise UsageError(f"{source}: cannot create the directory: {exc.strerror}") from None
    path = root / SETTINGS_RELPATH
    if path.exists():
        raise UsageError(f"{path} already exists; tf-fsm init never overwrites settings")
    atomic_write_json(path, init_settings(), within=root)
    load_settings(root, record=True)  # checks what init wrote, and records it for `status`
    make_dirs(tickets_dir(root), within=root)
    print(f"wrote {path}")
    ignore = root / STATE_IGNORE_RELPATH
    if not ignore.exists():  # a project's own file is never overwritten
        atomic_write_text(ignore, STATE_IGNORE, within=root)
        print(f"wrote {ignore} (tf-fsm's run state stays out of git)")
    print(_tree_line(root))
    print(f"tickets go in {tickets_dir(root)}/<id>.md; set executor.command, then: tf-fsm run <id>")
    return EXIT_OK


def _tree_line(root: Path) -> str:
    """What init's `workspace.mode: "auto"` means here, and how to turn it off."""
    from tf_fsm.workspace.mode import not_ready

    problem = not_ready(root)
    now = (
        "this is a git repository: each ticket runs on its own branch and worktree"
        if problem is None
        else f"tickets run in the project's tree for now ({problem}); at the top of a git "
        "repository with a commit, each runs on its own branch and worktree"
    )
    return (
        f'workspace.mode "auto": {now}, merged into the base branch when its gate passes; '
        '"shared" runs every ticket in the project\'s tree (docs/workspaces.md)'
    )


def _run_options(args: argparse.Namespace) -> Any:
    from tf_fsm.engine.api import RunOptions

    return RunOptions(
        once=args.once,
        retry_reset=args.retry_reset,
        research=args.research,
        auto=args.auto,
        create_followups=args.create_followups,
        simplify_tickets=args.simplify_tickets,
        final_review_loop=args.final_review_loop,
        worktree=args.worktree,
        parallel=getattr(args, "parallel", False),
        phases=args.phases,
        hold_merge=args.hold_merge,
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
        "awaiting_merge": "PASSED, not merged",
        "paused": "PAUSED (resumable: run it again for the next phase)",
    }["same-failure" if outcome.reason.startswith("same-failure") else outcome.status]
    from tf_fsm.views.status import BLOCKED_ATTEMPTS, blocked_attempts
    from tf_fsm.views.terminal import terminal_safe

    closed = outcome.status in ("closed", "already_closed")
    count = blocked_attempts(outcome.retry_count, outcome.max_retries, closed)
    print(  # the reason may hold an agent's own words: escaped for the terminal
        f"{outcome.ticket_id}: {line} after attempt {outcome.attempt} "
        f"({BLOCKED_ATTEMPTS} {count}): {terminal_safe(outcome.reason)}",
        file=sys.stdout if closed or outcome.status in ("awaiting_merge", "paused") else sys.stderr,
    )
    return OUTCOME_CODES[outcome.status]


def cmd_run(args: argparse.Namespace) -> int:
    root = project_root(args)
    (ticket_id,) = ticket_ids([args.ticket])
    check_steps(args)
    if args.plan:
        return _print_plan(root, ticket_id, args)
    settings = _run_settings(root, args.store)
    return _answer(_run(root, ticket_id, _run_options(args), settings), args.json)


def _answer(outcome: Any, as_json: bool) -> int:
    """How `run` and `merge` end: the outcome's line, or (--json) the document a loop's worker
    reports (tf_fsm.loop.work); the outcome's exit code."""
    if as_json:
        from tf_fsm.loop.work import report_json

        print(report_json(outcome))
        return OUTCOME_CODES[outcome.status]
    return _report(outcome)


def _run_settings(root: Path, store: str | None, worker: bool = False) -> Any:
    """The run's settings, with `--store` over `storage.backend`; a loop's worker is refused
    the memory store (the loop and the other workers are other processes)."""
    from tf_fsm.settings.load import load_settings
    from tf_fsm.storage.backends import memory_refused, with_backend

    settings = load_settings(root, record=True)
    if worker:
        memory_refused(settings, store, "a backlog loop's worker")
    return with_backend(settings, store)


def _run(root: Path, ticket_id: str, options: Any, settings: Any) -> Any:
    """`run`'s, `merge`'s and a loop worker's run of one ticket: what a killed run left ended
    first, SIGTERM interrupting it as Ctrl-C does (the attempt or merge stays resumable)."""
    from tf_fsm.engine.orchestrator import run_ticket
    from tf_fsm.views.progress import ConsoleObserver

    _end_orphans()
    with run_interrupts():
        return run_ticket(root, ticket_id, options, settings=settings, observer=ConsoleObserver())


def cmd_resume(args: argparse.Namespace) -> int:
    """`run`, restricted to a ticket whose current attempt is in progress or in error."""
    from tf_fsm.settings.load import load_settings
    from tf_fsm.storage.backends import open_store
    from tf_fsm.views.status import next_words, ticket_view

    root = project_root(args)
    (ticket_id,) = ticket_ids([args.ticket])
    settings = load_settings(root)
    store = open_store(root, settings, ticket_id)
    state = store.load_retry_state()
    if state is None or not state.has_open_attempt:
        raise UsageError(
            f"{ticket_id}: nothing to resume (no attempt in progress or in error); "
            f"next: {next_words(ticket_view(root, settings, ticket_id, store), settings)}; "
            f"use `tf-fsm run {ticket_id}`"
        )
    return cmd_run(args)


def _end_orphans() -> None:
    """Before a run: end what a killed run's agents left running (tf_fsm.process.strays)."""
    from tf_fsm.process.strays import end_orphans

    if ended := end_orphans():
        print(f"tf-fsm: {ended}", file=sys.stderr)


def _print_plan(root: Path, ticket_id: str, args: argparse.Namespace) -> int:
    from tf_fsm.engine.orchestrator import QuietObserver, TicketRun
    from tf_fsm.executors import make_executor
    from tf_fsm.settings.load import load_settings
    from tf_fsm.storage.backends import with_backend
    from tf_fsm.views.plan import plan

    settings = with_backend(load_settings(root), args.store)
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
        print_json(data, indent=2)
        return EXIT_OK
    if "retryReset" in data:  # --retry-reset: what it would move aside first
        print(f"{ticket_id}: --retry-reset: {data['retryReset']['why']}")
    print(f"{ticket_id}: {data['action'].replace('_', ' ')}: {data['why']}")
    if "sameFailure" in data:
        repeat = data["sameFailure"]
        print(f"same failure ({repeat['action']}): {repeat['reason']}")
    if "budget" in data:
        money = data["budget"]
        need = money["nextAttemptUpToUsd"]
        more = f"; the next attempt may cost up to ${need:.4f}" if need is not None else ""
        print(f"budget: ${money['spentUsd']:.4f} of ${money['maxCostUsd']:.4f} spent{more}")
    if "phases" not in data:
        return EXIT_OK
    escalated = ", ".join(data["escalatedRoles"]) or "none"
    prior = "yes" if data["priorFailure"] else "no"
    print(
        f"attempt {data['attempt']} (trigger {data['trigger']}, tier {data['tier']}, "
        f"escalated: {escalated}, prior failure in prompts: {prior})"
    )
    _print_tree(data["tree"])
    for phase in data["phases"]:
        mark = "run " if phase["runs"] else "skip"
        print(f"  {mark} {phase['phase']:<9} {phase['reason']}")
        for call in phase["invocations"]:
            print(
                f"         {call['role']:<24} {call['model']} ({call['source']}) "
                f"{Path(call['template']).name} [{call['templateOrigin']}] {call['promptBytes']} B"
                + (f" ({call['when']})" if "when" in call else "")
            )
    _print_gates(data.get("qualityGates") or [])
    return EXIT_OK


def _print_tree(tree: dict[str, Any]) -> None:
    """`run --plan`'s lines on the tree: where, and what a new worktree starts without (a
    shared tree's note only repeats its summary)."""
    from tf_fsm.views.terminal import terminal_safe  # paths are the user's, in any bytes

    print(terminal_safe(f"tree: {tree['summary']}"))
    if tree["worktree"] and tree["note"]:
        print(terminal_safe(f"  {tree['note']}"))


def _print_gates(gates: list[dict[str, Any]]) -> None:
    """`run --plan`'s lines on the quality-gate commands verify would run."""
    if not gates:
        return
    import shlex

    print("quality gates, run by verify in this order (workflow.qualityGates):")
    for gate in gates:
        if not gate["required"]:
            kind = "optional (reported, never blocks)"
        elif not gate["blocks"]:
            kind = "required (reported, never blocks: workflow.enableQualityGate is false)"
        else:
            rounds = gate["feedbackRounds"]
            kind = f"required, {f'up to {rounds}' if rounds else 'no'} fix rounds"
        print(f"  {gate['name']:<8} {kind}; cwd {gate['cwd']}: {shlex.join(gate['argv'])}")
        if gate["cannotStart"]:
            print(f"    cannot start: {gate['cannotStart']} (run exits 2)")
        if gate["baselineWarning"]:
            print(f"    warning: {gate['baselineWarning']}")


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """`tf-fsm run`'s arguments."""
    p.add_argument("ticket")
    p.add_argument("--once", action="store_true", help="run one attempt only, even if it blocks")
    p.add_argument(
        "--retry-reset",
        action="store_true",
        help=f"move {RETRY_STATE} aside (.bak.<UTC time>) and start at attempt 1",
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
        help=f"headless: recorded in {CHAIN_CONTEXT} for the prompts",
    )
    for flag, text in (
        ("--create-followups", "ask the closer for follow-up tickets (followups.md)"),
        ("--simplify-tickets", "recorded for the closer"),
        ("--final-review-loop", "recorded for the closer"),
    ):
        p.add_argument(flag, action="store_true", help=text)
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
    add_worktree_argument(p)
    add_store_argument(p)
    add_step_arguments(p)


def worker_main(order: str) -> int:
    """A backlog loop's worker, in the forked worker process: runs its work order (one JSON
    document, tf_fsm.loop.work) and prints its work report, one JSON line, on stdout (the
    loop's outcome file). Ended by the one error -> exit code mapping: an order that cannot be
    read exits 2 naming what is wrong, with no report."""
    from tf_fsm.loop.work import WorkOrder, report_json

    def work(_: argparse.Namespace) -> int:
        got = WorkOrder.from_json(order)
        root = existing_dir(got.root.resolve(), f"the work order's root {got.root}")
        (ticket_id,) = ticket_ids([got.ticket])
        settings = _run_settings(root, None, worker=True)
        outcome = _run(root, ticket_id, got.run_options(), settings)
        print(report_json(outcome))
        return OUTCOME_CODES[outcome.status]

    code = run_command(work, argparse.Namespace(verbose=False))
    sys.stdout.flush()
    return code


@contextlib.contextmanager
def run_interrupts() -> Iterator[None]:
    """For `tf-fsm run` (and the loop's workers, which are runs): the first SIGINT or SIGTERM
    interrupts the run (the agents are ended, the attempt stays resumable); later ones are
    ignored, so the Ctrl-C the terminal sends and the one the loop forwards do not cut the
    clean-up (agent process group, lock) short. The handlers before are put back after."""
    fired = False

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal fired
        if not fired:
            fired = True
            raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
