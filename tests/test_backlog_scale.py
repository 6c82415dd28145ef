"""What keeps the backlog loop and the cheap commands cheap as a backlog grows, checked by
what they do rather than by timing them (benchmarks/bench_selection.py and bench_startup.py
time them): selection builds no state machine per ticket, `tickets` and `status` on a fresh
project do not load the settings models, and the loop does not read the files of tickets that
could not start anyway."""

from __future__ import annotations

import io
import json
import random
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tf_fsm.cli.run import worker_main
from tf_fsm.core import machine
from tf_fsm.loop import ralph
from tf_fsm.loop.ralph import Loop
from tf_fsm.loop.records import LoopOptions, Plan
from tf_fsm.loop.view import Reporter
from tf_fsm.settings.load import settings_from_dict
from tf_fsm.tk.tickets import new_ticket

COMPONENTS = ("component:api", "component:db", "component:ui")


def write_backlog(root: Path, size: int, seed: int = 3, states: bool = True) -> None:
    """`size` tk tickets (30% closed, random deps, one component each); with `states`, every
    tenth ticket has a retry-state.json with one blocked attempt."""
    rnd = random.Random(seed)  # noqa: S311 - a reproducible backlog, not a secret
    ids = [f"sc-{i:04d}" for i in range(size)]
    (root / ".tickets").mkdir(parents=True, exist_ok=True)
    for n, tid in enumerate(ids):
        text = new_ticket(
            tid,
            f"Ticket {n}",
            status="closed" if rnd.random() < 0.3 else "open",
            deps=tuple(sorted(set(rnd.sample(ids, rnd.randint(0, 2))))),
            priority=rnd.randint(0, 4),
            tags=(rnd.choice(COMPONENTS),),
            created="2026-02-10T12:00:00Z",
        )
        (root / ".tickets" / f"{tid}.md").write_text(text, encoding="utf-8")
        if states and n % 10 == 0:
            state = {
                "version": 1,
                "ticketId": tid,
                "attempts": [
                    {
                        "attemptNumber": 1,
                        "startedAt": "2026-02-10T12:00:00Z",
                        "completedAt": "2026-02-10T12:05:00Z",
                        "status": "blocked",
                        "trigger": "initial",
                    }
                ],
                "lastAttemptAt": "2026-02-10T12:05:00Z",
                "status": "active",
                "retryCount": 1,
            }
            state_dir = root / ".tf" / "knowledge" / "tickets" / tid
            state_dir.mkdir(parents=True)
            (state_dir / "retry-state.json").write_text(json.dumps(state), encoding="utf-8")


class SelectOnly(Loop):
    """The loop's own `_fill`, recording each start instead of spawning a worker."""

    def _launch(self, plan: Plan) -> None:
        self.running[plan.ticket] = SimpleNamespace(plan=plan)  # type: ignore[assignment]


def select(root: Path, workers: int) -> tuple[SelectOnly, list[str]]:
    settings = settings_from_dict({"executor": {"kind": "scripted"}})
    loop = SelectOnly(
        root,
        settings,
        LoopOptions(workers=workers, max_iterations=100),
        Reporter(None, err=io.StringIO()),
        worker=worker_main,  # never started: `_launch` only records
    )
    loop._fill()
    return loop, list(loop.running)


def counting(monkeypatch: pytest.MonkeyPatch, cls: type[Any]) -> list[int]:
    made = [0]
    original = cls.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        made[0] += 1
        original(self, *args, **kwargs)

    monkeypatch.setattr(cls, "__init__", init)
    return made


def test_loop_selection_builds_no_state_machine_per_ticket(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_backlog(project, 300)
    lifecycles = counting(monkeypatch, machine.Lifecycle)
    models = counting(monkeypatch, machine.TicketModel)
    loop, started = select(project, workers=3)
    assert len(started) == 3  # one per component: the selection did its job
    assert {next(iter(loop.running[t].plan.components)) for t in started} == set(COMPONENTS)
    assert lifecycles == [0]
    assert models == [0]


def test_loop_does_not_read_tickets_that_could_not_start(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the running tickets hold every component, the other ready tickets clash with
    them: the loop skips them without opening their files (assess reads a ticket's state,
    lock and file), so a pass costs the scan, not a read of every ready ticket."""
    write_backlog(project, 300)
    assessed: list[str] = []
    original = Loop.assess

    def assess(self: Loop, rec: Any) -> Any:
        assessed.append(rec.id)
        return original(self, rec)

    monkeypatch.setattr(ralph.Loop, "assess", assess)
    _, started = select(project, workers=4)  # 4 slots, 3 components: one slot stays free
    assert len(started) == 3
    # Assessed: the tickets that started, and those that came before one of them with a
    # component still free (a skip or a clash found only then); never the whole ready list.
    assert len(assessed) < 10


@pytest.mark.parametrize(
    ("argv", "forbidden"),
    [
        # dataclasses (it imports inspect), shutil (bz2, lzma), datetime and json: a third of
        # the start-up of `tickets ready`
        (["tickets", "ready"], ("pydantic", "transitions", "tf_fsm.settings.load", "dataclasses")),
        (["tickets", "ready"], ("shutil", "datetime", "json", "tf_fsm.tk.tickets")),
        (["status"], ("pydantic", "transitions", "tf_fsm.settings.load")),
        (["--help"], ("pydantic", "transitions", "rich", "jinja2", "watchdog", "shutil", "json")),
    ],
)
def test_cheap_commands_do_not_import_heavy_modules(
    project: Path, argv: list[str], forbidden: tuple[str, ...]
) -> None:
    """`tickets ready` over a backlog and `status` on a project with no settings file and no
    runs answer without pydantic or a state machine (start-up budget, issue #10)."""
    write_backlog(project, 50, states=False)  # no ticket has run: status has no rows
    probe = (
        "import sys\n"
        "from tf_fsm.cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        f"print('LOADED', sorted(m for m in {list(forbidden)!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=project, capture_output=True, text=True, check=True
    )
    assert done.stdout.splitlines()[-1] == "LOADED []", done.stdout[-500:]
