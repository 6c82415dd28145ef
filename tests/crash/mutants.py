"""Mutants: tf_fsm with one crash-safety rule broken on purpose, to show that the crash
harness catches each (docs/crash-testing.md, "Mutants"). Nothing in tf_fsm's source changes:
a mutant is a real process that monkeypatches one function, then runs as usual.

    python -m tests.crash.mutants MUTANT run pt-1       tf-fsm, patched (the git scenario)
    python -m tests.crash.mutants --power-loss MUTANT VARIANT [--all] [--first=KIND:N]
        the power-loss harness in a patched process: records the lifecycle (VARIANT
        `lifecycle` or `full`), tries state N of KIND (`lost` or `random`: one known to
        catch the mutant) first, then its lost-file states, then its random crash states,
        until one catches the mutant (every state with --all), and prints one JSON line:
        states tried and caught, the first that caught it, its problems, the checks that
        caught it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

#: mutant -> what it breaks (the harness it is tried by is in its name's table below)
DESCRIPTION = {
    "journal-not-fsynced": "the journal is never fsynced (only the durable points sync it)",
    "views-not-rebuilt": "after a crash, the views are not rebuilt from the journal",
    "no-sync-before-close": "no durable point before an attempt's end is journaled",
    "torn-tail-kept": "a torn journal tail is ended with a newline instead of cut off",
    "implementation-not-remade": "a lost or changed implementation.md does not make the "
    "resume run implement again",
    "merge-journaled-first": "MergeCompleted is journaled before the merge commit exists",
    "worktree-removed-first": "the worktree and branch are removed before the merge is journaled",
}
POWER_LOSS = (
    "journal-not-fsynced",
    "views-not-rebuilt",
    "no-sync-before-close",
    "torn-tail-kept",
    "implementation-not-remade",
)
GIT = ("merge-journaled-first", "worktree-removed-first")


def _journal_not_fsynced() -> None:
    from tf_fsm.storage.journal_file import JournalFile

    append = JournalFile.append

    def never_durable(self: JournalFile, data: bytes, durable: bool, events: Any = None) -> bool:
        return append(self, data, False, events)

    JournalFile.append = never_durable  # type: ignore[method-assign]
    JournalFile.fsync = lambda self: None  # type: ignore[method-assign]


def _views_not_rebuilt() -> None:
    from tf_fsm.storage.store import TicketStore

    TicketStore.repair_views = lambda self, events: []  # type: ignore[method-assign]


def _no_sync_before_close() -> None:
    from tf_fsm.storage.store import TicketStore

    durable_point = TicketStore.durable_point

    def not_at_an_attempts_end(self: TicketStore) -> None:
        if sys._getframe(1).f_code.co_name != "_finish":  # the attempt's end (engine/attempt)
            durable_point(self)

    TicketStore.durable_point = not_at_an_attempts_end  # type: ignore[method-assign]


def _torn_tail_kept() -> None:
    from tf_fsm.storage import journal_file

    journal_file.repair_tail = lambda fd, path, ticket_id, redactor: b"\n"


def _implementation_not_remade() -> None:
    from tf_fsm.core import resume

    changed = resume._changed

    def blind_to_implementation(name: str, sha256: str, seen: Any, phase: str) -> str | None:
        return None if name == "implementation.md" else changed(name, sha256, seen, phase)

    resume._changed = blind_to_implementation


def _merge_journaled_first() -> None:
    from tf_fsm.core import workspace_events as wev
    from tf_fsm.engine import merge_step
    from tf_fsm.workspace import merge as queue

    gate_merge = merge_step._rebase_gate_merge

    def journaled_first(run: Any, attempt: Any, tree: Any, closed_text: Any) -> str | None:
        merge, event = queue.merge, run.event

        def merge_after_its_record(ws: Any, **kwargs: Any) -> Any:
            tip, _base = queue.branch_tips(ws)
            event(wev.MergeCompleted, attempt.number, commit=tip, base=ws.base_branch)
            return merge(ws, **kwargs)

        def recorded_once(cls: Any, *args: Any, **kwargs: Any) -> None:
            if cls is not wev.MergeCompleted:
                event(cls, *args, **kwargs)

        queue.merge, run.event = merge_after_its_record, recorded_once
        try:
            return gate_merge(run, attempt, tree, closed_text)
        finally:
            queue.merge = merge
            del run.event

    merge_step._rebase_gate_merge = journaled_first


def _worktree_removed_first() -> None:
    from tf_fsm.workspace import merge as queue
    from tf_fsm.workspace import worktree

    merge = queue.merge

    def removed_at_once(ws: Any, **kwargs: Any) -> Any:
        merged = merge(ws, **kwargs)
        worktree.remove(ws, delete_branch=True)
        return merged

    queue.merge = removed_at_once


INSTALL: dict[str, Callable[[], None]] = {
    "journal-not-fsynced": _journal_not_fsynced,
    "views-not-rebuilt": _views_not_rebuilt,
    "no-sync-before-close": _no_sync_before_close,
    "torn-tail-kept": _torn_tail_kept,
    "implementation-not-remade": _implementation_not_remade,
    "merge-journaled-first": _merge_journaled_first,
    "worktree-removed-first": _worktree_removed_first,
}


def program(mutant: str) -> tuple[str, ...]:
    """The command line of the mutant's tf-fsm (its arguments follow)."""
    return (sys.executable, "-m", "tests.crash.mutants", mutant)


def _power_loss(mutant: str, variant: str, every: bool, hint: str) -> None:
    """The power-loss harness with the mutant: the state `hint` names (`lost:N`, `random:N`:
    one known to catch it), then the lost-file states, then the random ones, until one
    catches it (`every`: all of them, the hint aside)."""
    import tempfile
    from pathlib import Path

    from tests.crash import lifecycle
    from tests.crash.conftest import SEED, record
    from tests.crash.states import FULL_STATES, STATES, LossPlan, Plan, try_state

    INSTALL[mutant]()
    full = variant == "full"
    out: dict[str, Any] = {"caught": 0, "tried": 0, "problems": [], "checks": set()}
    with tempfile.TemporaryDirectory() as tmp:
        recording = record(
            Path(tmp) / "reference" / "project",
            lifecycle.FULL_WORKFLOW if full else lifecycle.WORKFLOW,
        )
        plans = {
            "lost": LossPlan.of(recording, SEED),
            "random": Plan.of(recording, FULL_STATES if full else STATES, SEED),
        }
        order = [(kind, n) for kind, plan in plans.items() for n in range(_size(plan))]
        if hint and not every:
            kind, _, n = hint.partition(":")
            order.insert(0, (kind, int(n)))
        for kind, number in order:
            if number >= _size(plans[kind]):
                continue
            state = Path(tmp) / f"{kind}-{number}"
            found, _ = try_state(recording, plans[kind], number, state)
            out["tried"] += 1
            if found:
                out["caught"] += 1
                out["problems"] = out["problems"] or found[:3]
                out["checks"].update(lifecycle.check_of(problem) for problem in found)
                out["first"] = out.get("first") or f"{kind}:{number}"
                if not every:
                    break
    print(json.dumps({**out, "checks": sorted(out["checks"])}))


def _size(plan: Any) -> int:
    return len(plan.cuts) if hasattr(plan, "cuts") else len(plan.losses)


def main(argv: list[str]) -> None:
    if argv[:1] == ["--power-loss"]:
        hint = next((a.split("=", 1)[1] for a in argv if a.startswith("--first=")), "")
        _power_loss(argv[1], argv[2], "--all" in argv, hint)
        return
    mutant, *args = argv
    INSTALL[mutant]()
    from tf_fsm.cli.main import entry

    sys.argv = ["tf-fsm", *args]
    raise SystemExit(entry())


if __name__ == "__main__":
    main(sys.argv[1:])
