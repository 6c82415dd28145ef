"""The crash scenario: a project (shared tree, no git) with one tk ticket, an agent that blocks
attempts 1 and 2 with a Major finding and closes attempt 3, and the final state every run of it
must reach, interrupted or not (`problems`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import tk_ticket
from tests.crash import agent
from tf_fsm.core import journal as ev
from tf_fsm.core.journal_codec import decode
from tf_fsm.engine.orchestrator import Outcome, RunOptions, run_ticket
from tf_fsm.executors.base import Invocation, InvocationResult
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.storage.lock import lock_holder
from tf_fsm.storage.store import TicketStore
from tf_fsm.tk import tickets

TICKET_ID = "pt-1"
TICKET_DIR = Path(".tf/knowledge/tickets") / TICKET_ID
FINAL = ("closed", "already_closed")
MAX_RERUNS = 4
#: the reports whose sha256 the final attempt's journal records
REPORTS = ("review.md", "post-fix-verification.json", "close-summary.md")
REPORT_PHASE = {"review.md": "review", "close-summary.md": "close"}
WORKFLOW: dict[str, Any] = {
    "failOn": ["Critical", "Major"],
    "enableResearcher": False,
    "enableReviewers": ["reviewer-general"],
    "enableCloser": False,
    "postFixVerification": "fixes",
    "escalation": {"enabled": True, "maxRetries": 3, "models": {"fixer": "fixer"}},
}
#: the variant with research and the closer on
FULL_WORKFLOW: dict[str, Any] = {**WORKFLOW, "enableResearcher": True, "enableCloser": True}


def make_project(
    root: Path, workflow: dict[str, Any], executor: dict[str, Any] | None = None
) -> None:
    """The project as it is before any run: settings and the tk ticket."""
    (root / ".tf/config").mkdir(parents=True, exist_ok=True)
    settings: dict[str, Any] = {"workflow": workflow}
    if executor is not None:
        settings["executor"] = executor
    (root / ".tf/config/settings.json").write_text(json.dumps(settings))
    (root / ".tickets").mkdir(exist_ok=True)
    (root / f".tickets/{TICKET_ID}.md").write_text(tk_ticket(TICKET_ID))


def agent_command() -> dict[str, Any]:
    """The command executor running tests/crash/agent.py as a real process."""
    return {"kind": "command", "command": [sys.executable, "-S", agent.__file__]}


class InProcessAgent:
    """The agent of tests/crash/agent.py, called in-process (no process start-up)."""

    def check(self) -> None:
        pass

    def invoke(self, inv: Invocation) -> InvocationResult:
        text = agent.output_text(inv.ticket_id, inv.phase, inv.attempt)
        agent.write_output(str(inv.output), text)
        return InvocationResult(ok=True, duration=0.0, exit_code=0)


def run_once(root: Path) -> Outcome:
    settings = load_settings(root)
    return run_ticket(root, TICKET_ID, RunOptions(), settings=settings, executor=InProcessAgent())


def run_until_final(root: Path) -> list[str]:
    """`run_ticket` again until the ticket is closed: the statuses it returned. Never `error`
    (an exception propagates: a state the run cannot recover from is a finding)."""
    statuses: list[str] = []
    while len(statuses) < MAX_RERUNS:
        status = run_once(root).status
        statuses.append(status)
        if status == "error":
            raise AssertionError(f"a rerun returned error: {statuses}")
        if status in FINAL:
            return statuses
    raise AssertionError(f"not closed after {MAX_RERUNS} reruns: {statuses}")


def store(root: Path) -> TicketStore:
    return open_store(root, load_settings(root), TICKET_ID)


def events(root: Path) -> list[ev.Event]:
    path = root / TICKET_DIR / "events.jsonl"
    return decode(path.read_bytes()).events if path.exists() else []


@dataclass(frozen=True)
class Final:
    """What the reference run ended with: retry-state.json, timestamps aside, the
    prior-failure summary each attempt's prompts were given (its chain context's last image),
    and every other file of the ticket directory (`artifacts`)."""

    state: dict[str, Any]
    prior: dict[int, Any] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    root: str = ""  # the project it ran in (the files of a crash state may name it)

    @property
    def attempts(self) -> list[tuple[int, str]]:
        return [(a["attemptNumber"], a["status"]) for a in self.state["attempts"]]


STAMPS = frozenset({"startedAt", "completedAt", "lastAttemptAt", "lastUpdated", "closedAt"})


def without_stamps(data: Any) -> Any:
    if isinstance(data, dict):
        return {k: without_stamps(v) for k, v in data.items() if k not in STAMPS}
    if isinstance(data, list):
        return [without_stamps(v) for v in data]
    return data


def final_state(root: Path, reference_root: str = "") -> Final:
    state = store(root).load_retry_state()
    assert state is not None, "no retry-state.json"
    prior = {}
    for e in events(root):
        if e.event == "ViewSaved" and getattr(e, "file", None) == "chain-context.json":
            content = getattr(e, "content", {})
            prior[content.get("attempt")] = content.get("priorFailure")
    files = artifacts(root, reference_root)
    return Final(without_stamps(state.to_json_dict()), prior, files, str(root))


_DURATION = re.compile(rb"duration: [0-9.]+s")
#: a commit id: a rerun makes its checkpoints again, with other dates, so other ids (a
#: conflict resolution's prompt names the commit the rebase stopped at)
_COMMIT_ID = re.compile(rb"\b[0-9a-f]{7,40}\b")
#: the ticket directory's files that are not artifacts: the journal and the views (checked
#: against the journal), the lock; dot files (the lock's owner, temp files) are left out too
NOT_ARTIFACTS = frozenset({"events.jsonl", "retry-state.json", "chain-context.json"})


def artifacts(root: Path, reference_root: str = "") -> dict[str, str]:
    """Every artifact of the ticket directory (research.md, implementation.md, review.md,
    fix.md, the verification and close reports, logs, prompts...) -> the sha256 of its bytes
    with the project's path in them made `<root>` (prompts name it) and commit ids made
    `<sha>`, so that the files of two projects compare. A crash state's files were written in
    the reference's project: its path (`reference_root`) is made `<root>` too."""
    ticket_dir = root / TICKET_DIR
    paths = {str(root), os.path.realpath(root), reference_root} - {""}
    marks = sorted(paths, key=len, reverse=True)
    found = {}
    for path in sorted(ticket_dir.rglob("*")):
        name = path.relative_to(ticket_dir).as_posix()
        if name in NOT_ARTIFACTS or path.name.startswith(".") or not path.is_file():
            continue
        data = _DURATION.sub(b"duration: <s>", path.read_bytes())  # a log's, timed
        data = _COMMIT_ID.sub(b"<sha>", data)
        for mark in marks:
            data = data.replace(mark.encode(), b"<root>")
        found[name] = hashlib.sha256(data).hexdigest()
    return found


def sha256(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


#: between a crash state's description and one of its problems, in a failure's line
PROBLEM = ":\n    "


def check_of(line: str) -> str:
    """The check a failure's line comes from: its problem's first words (up to a colon or a
    list, value or file name)."""
    problem = line.split(PROBLEM, 1)[-1]
    problem = re.sub(r"^[\w./-]+\.(md|json|log)('s| is| differs)", r"<file>\2", problem)
    return re.split(r":| \[| \{| \(|, not ", problem)[0][:80]


def problems(root: Path, reference: Final) -> list[str]:
    """Every way the project at `root` differs from the reference's final state."""
    found: list[str] = []
    ticket = tickets.read(root, TICKET_ID)
    if ticket.status != "closed":
        found.append(f"tk status is {ticket.status!r}")
    try:
        final = final_state(root, reference.root)
    except Exception as exc:
        return [*found, f"retry-state.json does not load: {exc}"]
    if final.state != reference.state:
        found.append(f"retry-state differs: {final.state} != {reference.state}")
    for number, summary in sorted(reference.prior.items(), key=lambda kv: kv[0] or 0):
        if final.prior.get(number) != summary:
            found.append(
                f"attempt {number} was given another prior-failure summary: "
                f"{final.prior.get(number)!r} instead of {summary!r}"
            )
    evs = events(root)
    found += _journal_problems(evs, [n for n, _ in reference.attempts])
    found += _view_problems(root, evs)
    found += _report_problems(root, evs, reference.attempts[-1][0])
    found += _artifact_problems(final.files, reference.files)
    ticket_dir = root / TICKET_DIR
    left = sorted(str(p.relative_to(ticket_dir)) for p in ticket_dir.rglob(".*.tmp"))
    if left:
        found.append(f"temp files left: {left}")
    if lock_holder(ticket_dir) != 0:
        found.append("the ticket lock is held")
    return found


def _journal_problems(evs: list[ev.Event], attempts: list[int]) -> list[str]:
    finished = sorted(e.attempt or 0 for e in evs if isinstance(e, ev.AttemptFinished))
    closed = sum(isinstance(e, ev.TicketClosed) for e in evs)
    found = []
    if finished != attempts:
        found.append(f"AttemptFinished for attempts {finished}, not {attempts}")
    if closed != 1:
        found.append(f"{closed} TicketClosed events")
    if any((e.attempt or 0) > attempts[-1] for e in evs):
        found.append(f"an attempt {attempts[-1] + 1} was journaled")
    return found


def last_view_saved(evs: list[ev.Event], name: str) -> Any:
    """The content of the last `ViewSaved` of `name`, None when the journal has none."""
    saved = [e for e in evs if e.event == "ViewSaved" and getattr(e, "file", None) == name]
    return getattr(saved[-1], "content", None) if saved else None


def _view_problems(root: Path, evs: list[ev.Event]) -> list[str]:
    found = []
    for name in ("retry-state.json", "chain-context.json"):
        image = last_view_saved(evs, name)
        if image is None:
            continue  # a journal without ViewSaved events (before the journal held the views)
        on_disk = json.loads((root / TICKET_DIR / name).read_text())
        if on_disk != image:
            found.append(f"{name} differs from its last ViewSaved")
    return found


def _report_problems(root: Path, evs: list[ev.Event], last: int) -> list[str]:
    """The final attempt's reports exist; every file a phase completion journaled (the last
    record of each, whichever attempt) holds the bytes it recorded."""
    recorded: dict[str, str] = {}
    final: set[str] = set()
    for e in evs:
        if isinstance(e, ev.PhaseCompleted):  # the last completion of each file wins
            files = {e.artifact: e.sha256, **(getattr(e, "files", None) or {})}
            recorded.update(files)
            final.update(files if e.attempt == last else ())
    found = []
    for name in REPORTS:
        if not (root / TICKET_DIR / name).exists():
            found.append(f"{name} is missing")
        elif name not in final and name in REPORT_PHASE:
            found.append(f"attempt {last} journaled no sha256 of {name}")
    for name, sha in sorted(recorded.items()):
        actual = sha256(root / TICKET_DIR / name)
        if actual is not None and actual != sha:
            found.append(f"{name}'s sha256 is not the one its phase completion journaled")
    return found


def _artifact_problems(files: dict[str, str], reference: dict[str, str]) -> list[str]:
    """The artifacts differ from the uninterrupted run's: missing, extra or other bytes."""
    found = []
    if missing := sorted(reference.keys() - files.keys()):
        found.append(f"artifacts missing: {missing}")
    if extra := sorted(files.keys() - reference.keys()):
        found.append(f"artifacts the uninterrupted run does not have: {extra}")
    if differ := sorted(n for n in files.keys() & reference.keys() if files[n] != reference[n]):
        found.append(f"artifacts that differ from the uninterrupted run's: {differ}")
    return found
