"""What a ticket's page shows, read from its files: the timeline of its attempts and phases
(the journal), its artifacts as sanitized HTML, the gate's feedback, the models each attempt
ran and where they came from, its git workspace, and the tail of its newest agent log.

Every file is read through the ticket's store (`store.files.path`: a symlink in the
ticket directory cannot lead a read elsewhere) and only by names from the phase/artifact table,
so no path a request names is ever opened."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tf_fsm.core import journal as ev
from tf_fsm.core.artifacts import PHASE_ARTIFACT, REPORTS, REVIEW_FILES, SINGLE_ROLE
from tf_fsm.core.reports import Finding
from tf_fsm.ui.markdown import to_html

if TYPE_CHECKING:
    from collections.abc import Iterable

    from tf_fsm.settings.load import LoadedSettings
    from tf_fsm.storage.protocol import Store

#: the artifacts a page shows, in the order of the phases that write them
ARTIFACTS: tuple[str, ...] = tuple(
    dict.fromkeys(
        [
            PHASE_ARTIFACT["research"],
            PHASE_ARTIFACT["implement"],
            *REVIEW_FILES.values(),
            PHASE_ARTIFACT["review"],
            PHASE_ARTIFACT["fix"],
            *(f"post-fix-{name}" for name in REVIEW_FILES.values()),
            *sorted(name for name in REPORTS if name.endswith(".md")),
            SINGLE_ROLE["close"][1],
            PHASE_ARTIFACT["close"],
        ]
    )
)
#: how much of a log the page shows (its end), and how much of one artifact
TAIL_BYTES = 16 * 1024
ARTIFACT_BYTES = 256 * 1024
_LOG_NAME = re.compile(r"logs/attempt-(\d+)/[A-Za-z0-9._-]+\.log")


@dataclass
class Step:
    ts: str
    what: str
    detail: str = ""
    ok: bool | None = None


@dataclass
class AttemptView:
    number: int
    trigger: str
    started: str
    models: list[tuple[str, str, str]]  # (role, model, source)
    steps: list[Step] = field(default_factory=list)
    outcome: str = "in progress"


@dataclass
class LogTail:
    name: str  # relative to the ticket's directory
    text: str
    size: int


def timeline(events: list[ev.Event]) -> list[AttemptView]:
    """The attempts, each with its phases, gates and end, in journal order."""
    attempts: list[AttemptView] = []
    for event in events:
        if isinstance(event, ev.AttemptStarted):
            models = [
                (role, m.get("model", "?"), m.get("source", "?"))
                for role, m in (event.models or {}).items()
            ]
            attempts.append(AttemptView(event.attempt or 0, event.trigger, event.ts, models))
        elif attempts and (step := _step(event)) is not None:
            attempts[-1].steps.append(step)
            if isinstance(event, ev.AttemptFinished):
                attempts[-1].outcome = event.status
    return attempts


def _step(event: ev.Event) -> Step | None:
    if isinstance(event, ev.PhaseStarted):
        return Step(event.ts, f"{event.phase} started", ", ".join(event.roles))
    if isinstance(event, ev.PhaseCompleted):
        return Step(event.ts, f"{event.phase} completed", event.artifact, True)
    if isinstance(event, ev.PhaseSkipped):
        return Step(event.ts, f"{event.phase} skipped", event.reason)
    if isinstance(event, ev.PhaseFailed):
        return Step(event.ts, f"{event.phase} failed ({event.role})", event.failure, False)
    if isinstance(event, ev.PhaseWaiting):
        return Step(event.ts, f"{event.phase} waits for a hand-off", event.output)
    if isinstance(event, ev.GateEvaluated):
        return Step(event.ts, f"gate {event.name}", _gate_detail(event), event.passed)
    if isinstance(event, ev.AttemptResumed):
        return Step(event.ts, f"resumed at {event.phase}", event.reason or "")
    if isinstance(event, ev.AttemptFinished):
        closed = event.status == "closed"
        return Step(event.ts, f"attempt {event.status}", event.reason or "", closed)
    if isinstance(event, ev.TicketClosed | ev.TicketBlocked | ev.BudgetExhausted):
        return Step(event.ts, event.event, getattr(event, "reason", "") or "")
    return None


def _gate_detail(event: ev.GateEvaluated) -> str:
    counts = ", ".join(f"{k} {v}" for k, v in (event.counts or {}).items() if v)
    return "; ".join(part for part in (event.reason or "", counts) if part)


def gate_feedback(events: list[ev.Event]) -> list[Step]:
    """The gate decisions of the latest attempt, with the feedback sent to its fixer."""
    last: list[Step] = []
    for event in events:
        if isinstance(event, ev.AttemptStarted):
            last = []
        elif isinstance(event, ev.GateEvaluated):
            last.append(Step(event.ts, event.name, _gate_detail(event), event.passed))
        elif isinstance(event, ev.GateFeedbackSent):
            sent = f"sent to the fixer ({event.bytes} bytes, try {event.innerTry})"
            last.append(Step(event.ts, ", ".join(event.gates), sent))
    return last


def deciding_findings(store: Store, fail_on: Iterable[str]) -> list[Finding]:
    """The findings that blocked the gate: those that remain after the fix, from the reports
    the gate read (`remaining_findings`), in the `failOn` severities, most severe first, each
    with the reviewer that found it (as the merged review tags it), redacted."""
    from tf_fsm.core.detection import remaining_findings
    from tf_fsm.core.gate import fail_on_severities
    from tf_fsm.core.reports import split_reviewers

    found = remaining_findings(store.read_artifact)
    out = []
    for severity in fail_on_severities(list(fail_on))[0]:  # in severity order
        for item in found.get(severity, []):
            text, reviewers = split_reviewers(store.redactor(item))
            out.append(Finding(severity, text, ", ".join(reviewers) or None))
    return out


def neighbours(ids: Iterable[str], ticket_id: str) -> tuple[str | None, str | None]:
    """The tickets before and after `ticket_id` in `ids` (the board's order), None at an end
    or when it is not there."""
    before: str | None = None
    it = iter(ids)
    for tid in it:
        if tid == ticket_id:
            return before, next(it, None)
        before = tid
    return None, None


def artifacts(store: Store) -> list[tuple[str, str]]:
    """(name, sanitized HTML) of each artifact the ticket has; its headings start at h4 (the
    page shows each artifact under its own h3)."""
    from html import escape

    from tf_fsm.errors import TfFsmError

    out = []
    for name in ARTIFACTS:
        try:
            text = store.read_artifact(name)
        except TfFsmError as exc:  # e.g. a symlink leading out of the ticket's directory
            out.append((name, f"<p><em>not shown: {escape(store.redactor(str(exc)))}</em></p>"))
            continue
        if text is not None:
            out.append((name, to_html(text[:ARTIFACT_BYTES], store.redactor, top=4)))
    return out


def newest_log(store: Store) -> str | None:
    """The agent log written last (a running agent's `.live.log` among them), relative to the
    ticket's directory."""
    area = store.files.dir  # where the agents' logs are written
    newest: tuple[int, str] | None = None
    for path in (area / "logs").glob("attempt-*/*.log"):
        name = path.relative_to(area).as_posix()
        try:
            if path.is_symlink() or not _LOG_NAME.fullmatch(name):
                continue
            mtime = path.stat().st_mtime_ns
        except OSError:  # a live log goes when its agent ends
            continue
        if newest is None or mtime > newest[0]:
            newest = (mtime, name)
    return newest[1] if newest else None


def read_tail(store: Store, name: str, start: int | None = None) -> LogTail | None:
    """The log `name` from byte `start` (None: its last TAIL_BYTES), whole lines only, redacted.
    None when it is gone (a live log is removed when its agent ends)."""
    if not _LOG_NAME.fullmatch(name):
        return None
    try:
        with store.files.path(name).open("rb") as handle:
            size = handle.seek(0, 2)
            cut = start is None or start > size  # a new file, or one written over
            begin = max(0, size - TAIL_BYTES) if cut else start or 0
            handle.seek(begin)
            data = handle.read(size - begin)
    except OSError:
        return None
    if cut and begin > 0:  # a tail cut from a longer log starts at a line start
        skip = data.find(b"\n") + 1
        data, begin = data[skip:], begin + skip
    end = data.rfind(b"\n") + 1  # a line being written is shown once it is whole
    return LogTail(name, store.redactor(data[:end].decode("utf-8", "replace")), begin + end)


def _without_title(body: str, title: str) -> str:
    """The ticket's body without its `# title` line, which the page shows as its heading."""
    head, _, rest = body.lstrip("\n").partition("\n")
    return rest if title and head.strip() == f"# {title}" else body


def ticket_page(root: Path, settings: LoadedSettings, ticket_id: str) -> dict[str, Any]:
    """Everything the page shows, for its template."""
    from tf_fsm.engine.reset import has_records
    from tf_fsm.errors import TicketError
    from tf_fsm.storage.backends import open_store
    from tf_fsm.tk.tickets import read
    from tf_fsm.views.status import gate_report, readable_journal, row, ticket_view

    store = open_store(root, settings, ticket_id)
    try:
        ticket = read(root, ticket_id)
        title, body = ticket.title or ticket_id, _without_title(ticket.body, ticket.title)
    except TicketError as exc:  # state without a ticket file (deleted after it ran)
        if not has_records(store):
            raise
        title, body = ticket_id, f"*No ticket file: {exc}*"
    events = readable_journal(store)
    log = newest_log(store)
    view = ticket_view(root, settings, ticket_id, store)
    return {
        "id": ticket_id,
        "title": title,
        "body": to_html(body[:ARTIFACT_BYTES], store.redactor, top=3),
        "view": view,  # the read model, for the page's other parts (actions, hand-off)
        "row": row(view, settings),
        "timeline": timeline(events),
        "gates": gate_feedback(events),
        "verdict": gate_report(root, settings, ticket_id) if events else None,
        "findings": deciding_findings(store, settings.workflow.failOn) if events else [],
        "artifacts": artifacts(store),
        "log": read_tail(store, log) if log else None,
    }
