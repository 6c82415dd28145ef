"""What the backlog loop and one of its workers say to each other across the process boundary.

The loop sends a `WorkOrder`, one JSON document: which ticket, in which project, for which loop,
and the options the loop passes on. The worker runs it and answers with a work report, its
run's `Outcome` as one JSON document on one line (`report_json`): the last line of its standard
output, which the loop reads from the worker's outcome file (tf_fsm.loop.worker). A worker
that printed nothing sent no report (it was killed, refused the ticket's lock, or failed before
it could report): its exit code tells the loop why. Each document is read by one function that
names what is wrong in a bad one (WorkDocumentError).

The report is also what `tf-fsm run --json` prints: one document, one definition.
"""

from __future__ import annotations

import json
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tf_fsm._json_input import load_json
from tf_fsm.engine.api import Outcome, OutcomeStatus, RunOptions
from tf_fsm.errors import TfFsmError

#: how a retry a loop's worker starts is recorded in retry-state.json (`trigger`)
LOOP_RETRY_TRIGGER = "ralph_retry"
_STATUSES: tuple[str, ...] = typing.get_args(OutcomeStatus)


class WorkDocumentError(TfFsmError):
    """A work order or work report that cannot be read; names the document and what is wrong."""

    def __init__(self, document: str, problem: str) -> None:
        self.document, self.problem = document, problem
        super().__init__()

    @property
    def message(self) -> str:
        return f"{self.document}: {self.problem}"


@dataclass(frozen=True)
class WorkOrder:
    """Run this ticket's next step once, headless, as a worker of loop `loop` (its mark, noted
    with the ticket's lock). `worktree`: --worktree / --no-worktree, None for the settings'
    choice; `parallel`: the loop runs several tickets at once (worktrees by default)."""

    root: Path
    ticket: str
    loop: str
    worktree: bool | None = None
    parallel: bool = False
    #: how many tickets the loop runs at once (the worktree pool keeps as many worktrees)
    workers: int = 1

    def run_options(self) -> RunOptions:
        """The run the order asks for: one attempt (the loop requeues a blocked ticket behind
        the others), headless, its retries recorded as the loop's."""
        return RunOptions(
            once=True,
            auto=True,
            retry_trigger=LOOP_RETRY_TRIGGER,
            loop=self.loop,
            worktree=self.worktree,
            parallel=self.parallel,
            workers=self.workers,
        )

    def to_json(self) -> str:
        return json.dumps(
            {
                "root": str(self.root),
                "ticket": self.ticket,
                "loop": self.loop,
                "worktree": self.worktree,
                "parallel": self.parallel,
                "workers": self.workers,
            }
        )

    @classmethod
    def from_json(cls, text: str) -> WorkOrder:
        fields = _Fields("the work order", text)
        return cls(
            root=Path(fields.text("root")),
            ticket=fields.text("ticket"),
            loop=fields.text("loop"),
            worktree=fields.optional_flag("worktree"),
            parallel=fields.flag("parallel"),
            workers=fields.number("workers"),
        )


def report_json(outcome: Outcome) -> str:
    """The work report of a run's outcome (what `tf-fsm run --json` prints too): one line,
    json.dumps escaping every newline a reason may hold."""
    return json.dumps(
        {
            "ticket": outcome.ticket_id,
            "status": outcome.status,
            "attempt": outcome.attempt,
            "attemptsRun": outcome.attempts_run,
            "retryCount": outcome.retry_count,
            "maxRetries": outcome.max_retries,
            "reason": outcome.reason,
        }
    )


def report_of(text: str) -> Outcome:
    """The outcome a work report states; WorkDocumentError naming the key that is wrong."""
    fields = _Fields("the worker's report", text)
    status = fields.text("status")
    if status not in _STATUSES:
        fields.bad("status", f"is {status!r}, not one of {', '.join(_STATUSES)}")
    return Outcome(
        ticket_id=fields.text("ticket"),
        status=typing.cast(OutcomeStatus, status),
        attempt=fields.number("attempt"),
        attempts_run=fields.number("attemptsRun"),
        retry_count=fields.number("retryCount"),
        max_retries=fields.number("maxRetries"),
        reason=fields.text("reason"),
    )


def read_report(output: str) -> Outcome | None:
    """The worker's report, from what it printed on its standard output: its last line. None
    when it printed nothing (it did not get to report: its exit code says why);
    WorkDocumentError when that line is not a report."""
    lines = output.rstrip("\n").splitlines()
    if not lines:
        return None
    return report_of(lines[-1])


class _Fields:
    """A document's JSON object, read key by key; each problem names the document and key."""

    def __init__(self, document: str, text: str) -> None:
        self.document = document
        try:
            data = load_json(text)
        except ValueError as exc:  # json.JSONDecodeError, or beyond load_json's limits
            raise WorkDocumentError(document, f"not JSON ({exc}): {text[:200]!r}") from None
        if not isinstance(data, dict):
            raise WorkDocumentError(document, f"not a JSON object: {text[:200]!r}")
        self.data: dict[str, Any] = data

    def bad(self, key: str, problem: str) -> typing.NoReturn:
        raise WorkDocumentError(self.document, f"key {key!r} {problem}")

    def _get(self, key: str, kinds: tuple[type, ...], what: str) -> Any:
        if key not in self.data:
            self.bad(key, "is missing")
        value = self.data[key]
        # bool is an int to Python, never to a document: true is not an attempt number
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            self.bad(key, f"must be {what}, not {json.dumps(value)[:80]}")
        return value

    def text(self, key: str) -> str:
        value: str = self._get(key, (str,), "a string")
        return value

    def number(self, key: str) -> int:
        value: int = self._get(key, (int,), "an integer")
        return value

    def flag(self, key: str) -> bool:
        value: bool = self._get(key, (bool,), "true or false")
        return value

    def optional_flag(self, key: str) -> bool | None:
        value: bool | None = self._get(key, (bool, type(None)), "true, false or null")
        return value
