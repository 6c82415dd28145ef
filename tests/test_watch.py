"""`tf_fsm.watch.watcher` in-process: real inotify events on real files, real runs, no mocks.

The watch runs in a thread of the test process; the test plays the other side (a person, an
agent, another tf-fsm process). Waits poll generously; assertions are about order and facts.
The hand-off flow from a second process, Ctrl-C and two tickets at once are end-to-end tests
in tests/e2e/test_watch_e2e.py.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import tk_ticket
from tf_fsm.engine.orchestrator import QuietObserver, run_ticket
from tf_fsm.errors import TicketLockedError
from tf_fsm.storage.store import TicketStore
from tf_fsm.watch.watcher import Watch, awaiting, own_file

AGENT = Path(__file__).resolve().parent / "fake_agent.py"
WAIT = 30.0
STABLE = 0.3
TICKET = tk_ticket("{id}", title="Ticket {id}", body="Do the thing.", tags="[]")
Settings = Callable[[dict[str, Any]], Path]


def kdir(project: Path, ticket: str) -> Path:
    return project / ".tf" / "knowledge" / "tickets" / ticket


def events(project: Path, ticket: str, name: str) -> list[dict[str, Any]]:
    lines = (kdir(project, ticket) / "events.jsonl").read_text().splitlines()
    return [e for e in map(json.loads, lines) if e["event"] == name]


def ts(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["ts"]).timestamp()


def add_ticket(project: Path, ticket: str) -> None:
    (project / ".tickets").mkdir(exist_ok=True)
    (project / ".tickets" / f"{ticket}.md").write_text(TICKET.format(id=ticket))


def handoff(project: Path, write_settings: Settings, *tickets: str, run: bool = True) -> None:
    write_settings(
        {
            "workflow": {"enableReviewers": ["reviewer-general"]},
            "executor": {"kind": "handoff", "stableSeconds": STABLE},
        }
    )
    for ticket in tickets:
        add_ticket(project, ticket)
        if run:
            assert run_ticket(project, ticket).status == "waiting"


def with_fake_agent(
    project: Path, write_settings: Settings, monkeypatch: pytest.MonkeyPatch, plan: dict[str, Any]
) -> Path:
    """The `command` executor with tests/fake_agent.py, for tickets that really fail. Each agent
    process reads the plan file afresh: rewrite it to mend the agent."""
    write_settings(
        {
            "workflow": {"enableReviewers": ["reviewer-general"]},
            "executor": {
                "kind": "command",
                "command": [sys.executable, str(AGENT)],
                "stableSeconds": STABLE,  # watch's debounce, whatever the executor
            },
        }
    )
    plan_file = project.parent / "plan.json"
    plan_file.write_text(json.dumps(plan))
    monkeypatch.setenv("FAKE_AGENT_PLAN", str(plan_file))  # watch's runs inherit it
    return plan_file


class Running:
    """A Watch in a thread, its log in memory."""

    def __init__(self, project: Path, *ids: str, once: bool = False) -> None:
        self.out = io.StringIO()
        self.watch = Watch(project, ids, once=once, out=self.out)
        self.code: int | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        self.wait_for("watching")

    def _run(self) -> None:
        self.code = self.watch.run()

    def lines(self) -> list[str]:
        return self.out.getvalue().splitlines()

    def wait_for(self, text: str, count: int = 1) -> None:
        deadline = time.monotonic() + WAIT
        while sum(text in line for line in self.lines()) < count:
            assert time.monotonic() < deadline, (text, self.lines())
            time.sleep(0.02)

    def finish(self) -> int:
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), self.lines()
        assert self.code is not None
        return self.code

    def stop(self) -> int:
        self.watch.stop()
        return self.finish()


@pytest.fixture
def running() -> Iterator[list[Running]]:
    started: list[Running] = []
    yield started
    for r in started:
        if r.thread.is_alive():
            r.stop()


# -- pure parts -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rel",
    [
        "events.jsonl",
        "retry-state.json",
        "retry-state.json.bak.20260101T000000Z",
        "chain-context.json",
        ".lock",
        ".lock.owner",
        "prompts/attempt-1/research-researcher.md",
        "logs/attempt-1/research-researcher.log",
        "gates/attempt-1/lint-try-1.log",
        ".research.md.abc123.tmp",
        ".research.md.swp",  # an editor's swap file: opening a file must not start a run
        "research.md~",
        ".notes.md",
        "review.md",
        "post-fix-review.md",
        "post-fix-verification.md",
        "post-fix-verification.json",
        "close-summary.md",
        "lifecycle.mmd",
    ],
)
def test_tf_fsm_own_files_are_never_a_trigger(rel: str) -> None:
    assert own_file(rel)


@pytest.mark.parametrize(
    "rel",
    [
        "research.md",
        "implementation.md",
        "review-general.md",
        "post-fix-review-general.md",  # a reviewer's, in verify: an agent artifact
        "fixes.md",
        "gate-fix-1.md",
        "close-notes.md",
        "resume",
    ],
)
def test_agent_artifacts_and_the_resume_file_are_not_own_files(rel: str) -> None:
    assert not own_file(rel)


def test_awaiting_follows_the_ticket(project: Path, write_settings: Settings) -> None:
    handoff(project, write_settings, "pt-1", run=False)
    store = TicketStore(project / ".tf" / "knowledge", "pt-1")
    assert awaiting(store).kind == "idle"
    assert run_ticket(project, "pt-1").status == "waiting"
    first = awaiting(store)
    assert (first.kind, first.phase, first.attempt) == ("waiting", "research", 1)
    assert first.output == store.dir / "research.md"
    assert first.prompt == store.dir / "prompts" / "attempt-1" / "research-researcher.md"
    first.output.write_text("# Research\n")
    time.sleep(STABLE + 0.05)
    assert run_ticket(project, "pt-1").status == "waiting"
    assert awaiting(store).output == store.dir / "implementation.md"


# -- watch at work --------------------------------------------------------------------------------


def test_error_ticket_resumes_when_its_missing_artifact_appears(
    project: Path, write_settings: Settings, running: list[Running], monkeypatch: pytest.MonkeyPatch
) -> None:
    # exits 0 without its artifact: a failure no restart retries
    plan = with_fake_agent(
        project, write_settings, monkeypatch, {"noOutput": [{"phase": "implement"}]}
    )
    add_ticket(project, "pt-1")
    assert run_ticket(project, "pt-1").status == "error"
    plan.write_text("{}")
    d = kdir(project, "pt-1")
    running.append(r := Running(project, "pt-1", once=True))
    assert "pt-1 in error (attempt 1 implement)" in r.lines()[0]
    (d / "review.md").write_text("tf_fsm's own file: not a reason to resume\n")
    (d / "logs" / "attempt-1" / "extra.log").write_text("nor is this\n")
    time.sleep(STABLE * 4)  # every chance to act on them wrongly
    assert events(project, "pt-1", "AttemptResumed") == []
    arrived = time.time()
    (d / "implementation.md").write_text("# Implementation\n\nDone by hand.\n")
    assert r.finish() == 0

    resumed = events(project, "pt-1", "AttemptResumed")
    assert [e["phase"] for e in resumed] == ["implement"]
    assert ts(resumed[0]) >= arrived - 0.001
    assert "[pt-1] implementation.md arrived (stable 0.3s): resuming attempt 1 at implement" in (
        r.lines()
    )
    assert r.lines()[-2].startswith("[pt-1] CLOSED after attempt 1")


def test_once_exits_2_when_a_ticket_was_dropped_for_an_error(
    project: Path, write_settings: Settings, running: list[Running]
) -> None:
    handoff(project, write_settings, "pt-1")
    running.append(r := Running(project, "pt-1", once=True))
    d = kdir(project, "pt-1")
    (d / "retry-state.json").write_text("{bad", encoding="utf-8")
    (d / "research.md").write_text("# Research\n", encoding="utf-8")
    assert r.finish() == 2, r.lines()
    assert any("not watched any more" in line for line in r.lines())
    assert "not watched after an error (see above): pt-1" in r.lines()[-1]
    assert (d / "retry-state.json").read_text(encoding="utf-8") == "{bad"


def test_a_ticket_locked_by_another_process_is_retried_not_dropped(
    project: Path, write_settings: Settings, running: list[Running], tmp_path: Path
) -> None:
    handoff(project, write_settings, "pt-1")
    release = tmp_path / "release"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import sys, time, pathlib\n"
                "from tf_fsm.storage.store import TicketStore\n"
                "with TicketStore(pathlib.Path(sys.argv[1]), 'pt-1').lock():\n"
                "    print('locked', flush=True)\n"
                "    while not pathlib.Path(sys.argv[2]).exists(): time.sleep(0.02)\n"
            ),
            str(project / ".tf" / "knowledge"),
            str(release),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
        with pytest.raises(TicketLockedError):  # the lock is real
            run_ticket(project, "pt-1")
        running.append(r := Running(project))
        (kdir(project, "pt-1") / "research.md").write_text("# Research\n")
        r.wait_for(f"[pt-1] locked by another process (pid {holder.pid}): retrying")
        released = time.time()
        release.touch()
        r.wait_for("waiting for implementation.md")
    finally:
        release.touch()
        holder.wait(WAIT)
    # logged once, then retried quietly
    assert sum("locked by another process" in line for line in r.lines()) == 1
    resumed = events(project, "pt-1", "AttemptResumed")
    assert len(resumed) == 1 and ts(resumed[0]) >= released - 0.001
    assert r.stop() == 130


def test_a_ticket_that_starts_waiting_later_is_picked_up(
    project: Path, write_settings: Settings, running: list[Running]
) -> None:
    handoff(project, write_settings, "pt-1", "pt-2", run=False)
    assert run_ticket(project, "pt-1").status == "waiting"
    running.append(r := Running(project))
    assert "1 ticket(s)" in r.lines()[0]
    assert run_ticket(project, "pt-2").status == "waiting"  # another terminal's `tf-fsm run`
    r.wait_for("[pt-2] now watched: waits for research.md")
    (kdir(project, "pt-2") / "research.md").write_text("# Research\n")
    r.wait_for("[pt-2] waiting for implementation.md")
    assert r.stop() == 130
    assert r.lines()[-1].endswith(
        "pt-1 waits for research.md (attempt 1 research); "
        "pt-2 waits for implementation.md (attempt 1 implement)"
    )


def test_an_artifact_older_than_its_prompt_is_not_taken_until_touched(
    project: Path, write_settings: Settings, running: list[Running]
) -> None:
    handoff(project, write_settings, "pt-1")
    running.append(r := Running(project, "pt-1"))
    research = kdir(project, "pt-1") / "research.md"
    research.write_text("# Research, prepared before the prompt existed\n")
    os.utime(research, (time.time() - 3600, time.time() - 3600))  # e.g. `mv` keeps mtimes
    r.wait_for("research.md is older than its prompt: not taken")
    assert events(project, "pt-1", "AttemptResumed") == []
    research.touch()  # an attrib event only: enough to hand it in
    r.wait_for("[pt-1] waiting for implementation.md")
    assert len(events(project, "pt-1", "AttemptResumed")) == 1
    assert r.stop() == 130


def test_an_interrupted_attempt_is_resumed_when_watch_starts(
    project: Path, write_settings: Settings, running: list[Running]
) -> None:
    handoff(project, write_settings, "pt-1")
    (kdir(project, "pt-1") / "research.md").write_text("# Research\n")
    time.sleep(STABLE + 0.05)

    class Killed(QuietObserver):
        """Dies as the next phase starts, the way a killed `tf-fsm run` leaves a ticket."""

        def phase_started(self, ticket: str, attempt: int, phase: str, role: str, model: str):
            if phase == "implement":
                raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_ticket(project, "pt-1", observer=Killed())
    assert events(project, "pt-1", "PhaseStarted")[-1]["phase"] == "implement"
    running.append(r := Running(project, "pt-1"))
    assert "pt-1 in progress (attempt 1 implement)" in r.lines()[0]
    r.wait_for("[pt-1] waiting for implementation.md")
    assert r.lines()[1] == (
        "[pt-1] attempt 1 is in progress and nobody runs it: resuming attempt 1 at implement"
    )
    assert r.stop() == 130


def test_resume_file_is_ignored_for_a_closed_ticket(
    project: Path, write_settings: Settings, running: list[Running]
) -> None:
    write_settings({"executor": {"kind": "scripted"}})
    add_ticket(project, "pt-1")
    assert run_ticket(project, "pt-1").status in ("closed", "blocked", "exhausted")
    running.append(r := Running(project, "pt-1"))
    assert "pt-1 not waiting or in error" in r.lines()[0]
    resume = kdir(project, "pt-1") / "resume"
    resume.touch()
    time.sleep(STABLE * 3)  # give it every chance to act wrongly
    assert resume.exists()
    assert not any(
        e["event"] == "AttemptResumed"
        for e in map(json.loads, (kdir(project, "pt-1") / "events.jsonl").read_text().splitlines())
    )
    assert r.stop() == 130
