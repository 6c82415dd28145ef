"""`tf-fsm gate`: the quality gate's decision for tickets, from their reports, or (`--run`) the
gate commands run now, judged against the base commit; records nothing."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tf_fsm.cli.common import print_json, project_root, ticket_ids
from tf_fsm.cli.exits import EXIT_BLOCKED, EXIT_OK
from tf_fsm.errors import (
    UsageError,
)
from tf_fsm.views.terminal import terminal_safe

if TYPE_CHECKING:
    pass
from tf_fsm.cli.query import known_tickets


def cmd_gate(args: argparse.Namespace) -> int:
    from tf_fsm.settings.load import load_settings
    from tf_fsm.views.status import gate_report

    root = project_root(args)
    settings = load_settings(root)
    ids = known_tickets(root, settings, ticket_ids(args.tickets))
    if args.run:
        return _run_gates_now(root, settings, ids, args.json, baseline=not args.no_baseline)
    for ticket_id in ids:
        row = gate_report(root, settings, ticket_id)
        if args.json:
            print_json(row)
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


def _run_gates_now(
    root: Path, settings: Any, ticket_ids: list[str], as_json: bool, *, baseline: bool
) -> int:
    """`gate --run`: the configured gate commands, now, outside any lifecycle. Writes nothing
    but the baseline's cache. A gate that cannot start (its program or cwd is missing) is exit
    2 before any gate runs. In a git repository a failing required gate is judged against the
    base commit (docs/gates.md): a pre-existing failure is shown, and is not exit 3."""
    import os

    from tf_fsm.engine.gates import (
        blocks,
        check_gates,
        current_attempt,
        gate_env,
        run_judged,
    )
    from tf_fsm.storage.redact import Redactor

    gates = settings.workflow.qualityGates
    if not gates:
        raise UsageError("no workflow.qualityGates are configured (see docs/gates.md)")
    check_gates(gates, root, settings.path)
    redact = Redactor.from_environ(os.environ)
    base = _base_lookup(root, gates) if baseline else None
    failed_required = False
    for ticket_id in ticket_ids:
        env = gate_env(ticket_id, current_attempt(root, settings, ticket_id))
        for gate in gates:
            result = run_judged(gate, root, env, base)
            failed_required |= blocks(result)
            row = {
                "ticket": ticket_id,
                "name": result.name,
                "required": result.required,
                "passed": result.passed,
                "exitCode": result.exit_code,
                "durationMs": round(result.duration * 1000),
                "summary": result.summary,
                "outputTail": "" if result.passed else result.output_tail(redact),
                "preexisting": result.preexisting,
                "newFailures": sorted(result.new_failures),
                "baselineNote": result.baseline_note,
            }
            if as_json:
                print_json(row)
                continue
            _print_gate_run(ticket_id, result, str(row["outputTail"]))
    return EXIT_BLOCKED if failed_required else EXIT_OK


def _base_lookup(root: Path, gates: Any) -> Any:
    """`gate --run`'s baseline: in a git repository, the commit `root` is judged against
    (tf_fsm.workspace.baseline.base_of); its notes go to standard error. None outside one."""
    from tf_fsm.engine.gates import gate_baseline
    from tf_fsm.workspace.baseline import base_of

    found = base_of(root)
    if found is None:
        return None
    project, sha = found
    return gate_baseline(project, sha, gates, lambda n: print(f"tf-fsm: {n}", file=sys.stderr))


def _print_gate_run(ticket_id: str, result: Any, tail: str) -> None:
    from tf_fsm.core.reports import PREEXISTING

    kind = "required" if result.required else "optional"
    extra = f": {PREEXISTING}" if result.preexisting else ""
    print(
        f"{ticket_id}  {result.name:<16} {kind:<9} {result.summary} ({result.duration:.1f}s){extra}"
    )
    if result.baseline_note:
        print(f"    base: {terminal_safe(result.baseline_note)}")
    if not result.passed:
        for line in tail.splitlines()[-10:]:
            print(f"    | {line}")
