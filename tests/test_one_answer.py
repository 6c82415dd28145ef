"""One answer per question, whoever asks: for a table of ticket states built as real files (a
real store, real journal events; the scripted agent runs the attempts), `status --json`, the
`status` table, `run --plan`, the board's column and note, `watch`'s awaiting and the backlog
loop's assess agree with the ticket's read model (tf_fsm.core.ticket) on each question: does
`run` skip it, does it wait for a hand-off, its lifecycle state, its failure class."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.test_one_decision import (
    blocked,
    budget_spent,
    closed,
    edit_state,
    exhausted,
    in_error,
    no_state,
    open_attempt,
    reopened,
    same_failure_stop,
    setup,
)
from tf_fsm.cli.run import worker_main
from tf_fsm.core import workspace_events as wev
from tf_fsm.core.journal import timestamp
from tf_fsm.core.ticket import TicketView
from tf_fsm.core.ticket_rules import goes_straight_on
from tf_fsm.engine.orchestrator import RunOptions, run_ticket
from tf_fsm.loop.ralph import Loop
from tf_fsm.loop.records import LoopOptions, Plan, Skip
from tf_fsm.loop.view import Reporter
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.tk import tickets
from tf_fsm.ui.board import Board
from tf_fsm.views.status import ticket_view
from tf_fsm.watch.ticket import awaiting

#: the plan's actions for which `run` does nothing
REFUSED_ACTIONS = {"exhausted", "already_closed", "awaiting_merge"}


def settings_file(project: Path) -> Path:
    return project / ".tf/config/settings.json"


def change_settings(project: Path, change: Callable[[dict[str, Any]], None]) -> None:
    data = json.loads(settings_file(project).read_text())
    change(data)
    settings_file(project).write_text(json.dumps(data))


def waiting_for_handoff(project: Path) -> None:
    setup(project, {})
    change_settings(project, lambda s: s.update(executor={"kind": "handoff"}))
    assert run_ticket(project, "pt-1", RunOptions()).status == "waiting"


def merge_conflict(project: Path) -> None:
    """The merge queue refused the attempt's merge: a conflict, for a person to resolve."""
    in_error(project)
    why = "conflicts in shared.txt: resolve them, then `tf-fsm run pt-1`"

    def conflicted(data: dict[str, Any]) -> None:
        last = data["attempts"][-1]
        last.update(phase="merge", failureClass="merge_conflict", reason=why)

    edit_state(project, conflicted)
    store = open_store(project, load_settings(project), "pt-1")
    store.append_event(
        wev.MergeRefused(
            ts=timestamp(datetime.now(UTC)),
            ticket="pt-1",
            attempt=1,
            failureClass="merge_conflict",
            files=["shared.txt"],
            reason=why,
        )
    )


def awaiting_merge(project: Path) -> None:
    """Every phase passed, its merge held for `tf-fsm merge` (ralph.parallelAutoMerge off):
    the attempt stays open and tk has it in progress."""
    closed(project)
    store = open_store(project, load_settings(project), "pt-1")
    ends = ('"event":"TicketClosed"', '"event":"AttemptFinished"')
    lines = store.journal_path.read_text().splitlines(keepends=True)
    store.journal_path.write_text("".join(ln for ln in lines if not any(e in ln for e in ends)))

    def held(data: dict[str, Any]) -> None:
        data["status"], data["attempts"][-1]["status"] = "active", "in_progress"
        data["attempts"][-1]["phase"] = "merge"
        data["attempts"][-1].pop("completedAt", None)

    edit_state(project, held)
    open_store(project, load_settings(project), "pt-1").append_event(
        wev.MergeHeld(
            ts=timestamp(datetime.now(UTC)), ticket="pt-1", attempt=1, base="main", tip="0" * 40
        )
    )
    ticket = project / ".tickets/pt-1.md"
    ticket.write_text(ticket.read_text().replace("status: closed", "status: in_progress"))
    change_settings(project, lambda s: s.setdefault("ralph", {}).update(parallelAutoMerge=False))


def locked(project: Path) -> None:
    blocked(project)  # and a run holds its lock while the callers look (LOCKED)


@dataclass(frozen=True)
class Case:
    build: Callable[[Path], None]
    board: tuple[str, str]  # the board's column and note
    skip: bool


CASES = {
    "never run": Case(no_state, ("ready", "tk ready"), False),
    "in progress": Case(open_attempt, ("error", "interrupted at review: resumable"), False),
    "waiting for a hand-off": Case(
        waiting_for_handoff, ("human", "waiting for a hand-off artifact"), False
    ),
    "in error": Case(in_error, ("error", "agent_error: resumable"), False),
    "merge conflict": Case(merge_conflict, ("human", "merge conflict"), False),
    "blocked, retries left": Case(blocked, ("blocked", "2 retries left"), False),
    "retries exhausted": Case(exhausted, ("human", "retries exhausted"), True),
    "same failure": Case(same_failure_stop, ("human", "the same failure repeated"), True),
    "budget stopped": Case(budget_spent, ("human", "budget spent"), True),
    "awaiting merge": Case(awaiting_merge, ("human", "passed, waiting for `tf-fsm merge`"), True),
    "closed": Case(closed, ("closed", "closed in tk"), True),
    "reopened": Case(reopened, ("ready", "tk ready (reopened)"), False),
    "locked": Case(locked, ("running", "at close"), False),
}
LOCKED = {"locked"}


@dataclass
class Seen:
    project: Path
    view: TicketView
    status: dict[str, Any]
    table: str
    plan: dict[str, Any]
    board: tuple[str, str]
    waiting: bool  # watch's awaiting
    loop: Plan | Skip


@contextmanager
def held_lock(project: Path, hold: bool) -> Iterator[None]:
    with ExitStack() as stack:
        if hold:
            stack.enter_context(open_store(project, load_settings(project), "pt-1").lock())
        yield


def observe(project: Path, hold: bool) -> Seen:
    settings = load_settings(project)
    with held_lock(project, hold):
        status = run_cli("status", "pt-1", "--json", cwd=project)
        assert status.returncode == 0, status.stderr
        table = run_cli("status", "pt-1", cwd=project, env={"COLUMNS": "1000"})
        assert table.returncode == 0, table.stderr
        plan = run_cli("run", "pt-1", "--plan", "--json", cwd=project)
        assert plan.returncode == 0, plan.stderr
        board = Board(project, settings)
        board.rescan()
        card = board.snapshot.cards["pt-1"]
        loop = Loop(
            project,
            settings,
            LoopOptions(workers=1, max_iterations=1, resume_errors=True),
            Reporter(None),
            worker=worker_main,
        )
        record = tickets.scan(tickets.tickets_dir(project)).records["pt-1"]
        store = open_store(project, settings, "pt-1")
        return Seen(
            project=project,
            view=ticket_view(project, settings, "pt-1"),
            status=json.loads(status.stdout),
            table=table.stdout,
            plan=json.loads(plan.stdout),
            board=(card.column, card.note),
            waiting=awaiting(store).kind == "waiting",
            loop=loop.assess(record),
        )


@pytest.fixture(scope="module", params=sorted(CASES))
def seen(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Seen]]:
    """Each case built once, every caller asked once (the CLI calls are real processes)."""
    name: str = request.param
    project = tmp_path_factory.mktemp("one-answer") / "project"
    (project / ".tf/config").mkdir(parents=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TF_FSM_ROOT", str(project))
        patch.chdir(project)
        CASES[name].build(project)
        yield name, observe(project, name in LOCKED)


def test_the_board_places_each_case_as_its_read_model_says(seen: tuple[str, Seen]) -> None:
    name, s = seen
    assert s.board == CASES[name].board, (name, s.view)


def test_skip_is_one_answer(seen: tuple[str, Seen]) -> None:
    """status's `skip`, `run --plan`'s refusal and the loop's skip are the read model's."""
    name, s = seen
    assert s.view.skip is CASES[name].skip, (name, s.view.step)
    assert s.status["skip"] is s.view.skip
    assert (s.plan["action"] in REFUSED_ACTIONS) is s.view.skip, s.plan
    if s.view.skip:
        assert s.view.skip_reason == s.plan["why"]
        assert s.status["next"] == f"nothing: {s.view.skip_reason}"
        assert s.loop == Skip(s.view.skip_reason or "")
    elif name in LOCKED:  # the loop's own policy on top: it does not start a locked ticket
        assert isinstance(s.loop, Skip) and s.loop.reason.startswith("locked by another process")
        assert s.view.lock_holder is not None
    else:
        assert isinstance(s.loop, Plan), s.loop
        assert s.view.lock_holder is None


def test_waiting_for_a_hand_off_is_one_answer(seen: tuple[str, Seen]) -> None:
    name, s = seen
    assert s.view.waiting is (name == "waiting for a hand-off")
    assert s.waiting is s.view.waiting  # watch
    assert (s.board[1] == "waiting for a hand-off artifact") is s.view.waiting  # the board
    if s.view.handoff is not None:
        assert s.view.handoff.output.endswith(".md")


def test_state_and_failure_class_are_one_answer(seen: tuple[str, Seen]) -> None:
    _, s = seen
    assert s.status["state"] == s.view.state
    assert s.status["failureClass"] == s.view.failure_class
    assert s.status["next"][:20] in s.table  # the table words the same step (its cells wrap)
    if s.view.status is not None:
        assert f" {s.view.state} " in s.table
    if s.board[0] == "error" and s.view.state == "error":
        assert s.board[1] == f"{s.view.failure_class or 'failed'}: resumable"


#: how the cases whose last attempt blocked ran it: with `--once` (as the loop's workers do)
#: or not (the run chains attempts while the decision allows)
RAN_ONCE = {
    "blocked, retries left": True,
    "budget stopped": True,
    "locked": True,
    "retries exhausted": False,
    "same failure": False,
}


def test_the_run_goes_straight_on_only_as_the_decision_says(seen: tuple[str, Seen]) -> None:
    """The blocked attempt's journaled `autoRetry` (engine/attempt.py), the run's chaining
    (engine/orchestrator.py) and the step every caller reads are one answer
    (tf_fsm.core.ticket_rules.goes_straight_on)."""
    name, s = seen
    if name not in RAN_ONCE:
        return
    lines = open_store(s.project, load_settings(s.project), "pt-1").journal_path.read_text()
    journal = [json.loads(line) for line in lines.splitlines()]
    blocks = [(i, e) for i, e in enumerate(journal) if e["event"] == "TicketBlocked"]
    assert blocks, name
    for i, block in blocks:  # the run started the next attempt at once exactly when it said so
        started = [e for e in journal[i:] if e["event"] == "AttemptStarted"]
        chained = (
            bool(started)
            and started[0]["attempt"] == block["attempt"] + 1
            and (started[0]["trigger"] == "quality_gate")
        )
        assert chained is block["autoRetry"], (name, block)
    settings = load_settings(s.project)
    last = blocks[-1][1]
    assert goes_straight_on(settings, RAN_ONCE[name], s.view.step) is last["autoRetry"], name
    # what a run without --once would do now: go on exactly when the decision starts one
    assert goes_straight_on(settings, False, s.view.step) is (s.view.step.action == "new_attempt")
