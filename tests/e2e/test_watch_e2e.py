"""`tf-fsm watch` as a user runs it: a real process, real inotify events, real files.

The hand-off work is done by a second process (`writer_main` below, started with
`python -c`), which plays the person or IDE agent: it reads the journal for each `PhaseWaiting`,
then writes that artifact plainly, in chunks with pauses shorter than `stableSeconds`, or by
atomic replace, and logs when it finished and the sha256 of what it wrote. Tests assert
orderings and facts (what was taken, how many runs, which lines), never durations.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, tk_ticket
from tests.e2e.conftest import Harness, alive

REPO = Path(__file__).resolve().parents[2]
WAIT = 60.0  # generous: a loaded 2-core machine must not make these flaky
NO_FINDINGS = "".join(
    f"## {h}\nNo issues found.\n\n"
    for h in ("Critical (must fix)", "Major (should fix)", "Minor (nice to fix)")
)

TICKET = tk_ticket(
    "{id}", title="Ticket {id}", body="Make the parser stop recursing without bound.", tags="[]"
)


# -- the second process: a person handing artifacts in ------------------------------------------


def artifact_text(ticket: str, name: str) -> str:
    if name.startswith(("review-", "post-fix-review-")):
        return f"# Review: {ticket}\n\n{NO_FINDINGS}"
    return f"# {name} for {ticket}\n\nWritten by hand.\n" + "detail line\n" * 40


def write_artifact(path: Path, text: str, mode: str, pause: float) -> None:
    if mode == "replace":  # an editor's save: temp file in the same directory, then rename
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".swp")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
        return
    chunks = [text] if mode == "plain" else [text[: len(text) // 3], text[len(text) // 3 :]]
    if mode == "chunks3":
        third = len(text) // 3
        chunks = [text[:third], text[third : 2 * third], text[2 * third :]]
    with path.open("w", encoding="utf-8") as f:
        for i, chunk in enumerate(chunks):
            if i:
                time.sleep(pause)  # half-written: the file exists and is incomplete
            f.write(chunk)
            f.flush()
            os.fsync(f.fileno())


def writer_main(
    ticket_dir: str,
    modes: dict[str, str],
    log: str,
    delay: float,
    pause: float,
    only: list[str],
    go: str = "",
) -> None:
    """Poll the journal; hand in each awaited artifact once; stop when the ticket is closed.
    With `go`, say ready (`<log>.ready`) and start when the `go` file appears."""
    journal = Path(ticket_dir) / "events.jsonl"
    if go:
        Path(f"{log}.ready").touch()
        while not Path(go).exists():
            time.sleep(0.01)
    done: set[tuple[int, str]] = set()
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        # complete lines only: the watcher may be appending the last one as it is read
        events = [json.loads(x) for x in journal.read_text().split("\n")[:-1] if x.strip()]
        if any(e["event"] == "TicketClosed" for e in events):
            return
        for e in events:
            key = (e["attempt"], e.get("output", ""))
            if e["event"] != "PhaseWaiting" or key in done:
                continue
            done.add(key)
            path = Path(e["output"])
            if only and path.name not in only:
                continue
            time.sleep(delay)
            text = artifact_text(e["ticket"], path.name)
            write_artifact(path, text, modes.get(path.name, "plain"), pause)
            record = {
                "name": path.name,
                "done": time.time(),
                "sha256": hashlib.sha256(text.encode()).hexdigest(),
            }
            with Path(log).open("a") as f:
                f.write(json.dumps(record) + "\n")
        time.sleep(0.02)


# -- harness ------------------------------------------------------------------------------------


def kdir(project: Path, ticket: str) -> Path:
    return project / ".tf" / "knowledge" / "tickets" / ticket


def events(project: Path, ticket: str, name: str | None = None) -> list[dict[str, Any]]:
    lines = (kdir(project, ticket) / "events.jsonl").read_text().split("\n")[:-1]
    evs = [json.loads(x) for x in lines if x.strip()]
    return [e for e in evs if name is None or e["event"] == name]


def ts(event: dict[str, Any]) -> float:
    return datetime.fromisoformat(event["ts"]).timestamp()


def handoff_project(
    project: Path, write_settings: Callable[[dict[str, Any]], Path], *ids: str, **kw: Any
) -> None:
    reviewers = kw.get("reviewers", ["reviewer-general"])
    write_settings(
        {
            "workflow": {"enableReviewers": reviewers},
            "executor": {"kind": "handoff", "stableSeconds": kw.get("stable", 0.5)},
        }
    )
    (project / ".tickets").mkdir(exist_ok=True)
    for ticket in ids:
        (project / ".tickets" / f"{ticket}.md").write_text(TICKET.format(id=ticket))
        result = run_cli("run", ticket, cwd=project)
        assert result.returncode == 6, result.stderr  # waiting for research.md
        lifecycle = [e for e in events(project, ticket) if not e["event"].startswith("View")]
        assert lifecycle[-1]["event"] == "PhaseWaiting"  # then the state's image, the sync


class Proc:
    """A background process with its output in files, so a test can read it while it runs."""

    def __init__(self, argv: list[str], cwd: Path, out: Path, env: dict[str, str] | None = None):
        self.out, self.err = out.with_suffix(".out"), out.with_suffix(".err")
        with self.out.open("w") as stdout, self.err.open("w") as stderr:
            self.proc = subprocess.Popen(
                argv, cwd=cwd, stdout=stdout, stderr=stderr, env={**os.environ, **(env or {})}
            )

    def lines(self) -> list[str]:
        return self.out.read_text().splitlines()

    def wait_for(self, text: str) -> None:
        deadline = time.monotonic() + WAIT
        while not any(text in line for line in self.lines()):
            assert self.proc.poll() is None, (self.lines(), self.err.read_text())
            assert time.monotonic() < deadline, (text, self.lines(), self.err.read_text())
            time.sleep(0.05)

    def wait(self) -> int:
        return self.proc.wait(timeout=WAIT)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@contextmanager
def procs() -> Iterator[list[Proc]]:
    started: list[Proc] = []
    try:
        yield started
    finally:
        for p in started:
            p.kill()


def watch(project: Path, tmp: Path, *args: str, env: dict[str, str] | None = None) -> Proc:
    argv = [sys.executable, "-m", "tf_fsm", "watch", *args]
    proc = Proc(argv, project, tmp / f"watch-{time.monotonic_ns()}", env)
    proc.wait_for("watching")  # the observer is running: every later write is a real event
    return proc


def writer(
    project: Path, ticket: str, log: Path, modes: dict[str, str] | None = None, **kw: Any
) -> Proc:
    args = (
        str(kdir(project, ticket)),
        modes or {},
        str(log),
        kw.get("delay", 0.1),
        kw.get("pause", 0.05),
        kw.get("only", []),
        kw.get("go", ""),
    )
    code = f"from tests.e2e.test_watch_e2e import writer_main; writer_main(*{args!r})"
    env = {"PYTHONPATH": str(REPO)}
    return Proc([sys.executable, "-c", code], project, log.with_name(f"{log.stem}-proc"), env)


def written(log: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def check_taken_whole(project: Path, ticket: str, log: Path) -> list[str]:
    """Each hand-off was taken complete and after its last byte was written. (A phase with
    several reviewers re-takes the earlier reviewers' files each time it resumes.)"""
    names = []
    for record in written(log):
        taken = [
            e
            for e in events(project, ticket, "InvocationFinished")
            if e["artifact"] == record["name"]
        ]
        assert taken, record
        assert {e["sha256"] for e in taken} == {record["sha256"]}, record  # not half of it
        assert ts(taken[0]) >= record["done"] - 0.001, (record, taken[0])
        names.append(record["name"])
    return names


# -- tests --------------------------------------------------------------------------------------


HANDOFFS = [
    "research.md",
    "implementation.md",
    "review-general.md",
    "review-spec.md",
    "review-second.md",
    "close-notes.md",
]


def test_handoff_flow_driven_by_a_second_process(
    project: Path, write_settings: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    reviewers = ["reviewer-general", "reviewer-spec-audit", "reviewer-second-opinion"]
    handoff_project(project, write_settings, "pt-1", reviewers=reviewers)
    modes = {
        "research.md": "chunks",
        "implementation.md": "replace",
        "review-spec.md": "chunks",
        "review-second.md": "replace",
    }
    log = tmp_path / "written.jsonl"
    with procs() as running:
        running.append(w := watch(project, tmp_path, "pt-1", "--once"))
        running.append(writer(project, "pt-1", log, modes))
        assert w.wait() == 0, (w.lines(), w.err.read_text())

    assert check_taken_whole(project, "pt-1", log) == HANDOFFS
    state = json.loads((kdir(project, "pt-1") / "retry-state.json").read_text())
    assert [a["status"] for a in state["attempts"]] == ["closed"]
    assert "status: closed" in (project / ".tickets" / "pt-1.md").read_text()
    # One watch run per hand-off: nothing taken early, nothing re-run on tf_fsm's own writes.
    assert len(events(project, "pt-1", "AttemptResumed")) == len(HANDOFFS)
    assert [e["output"].rsplit("/", 1)[1] for e in events(project, "pt-1", "PhaseWaiting")] == (
        HANDOFFS
    )
    lines = w.lines()
    arrived = [ln.split()[1] for ln in lines if " arrived (stable 0.5s): resuming attempt 1" in ln]
    assert arrived == HANDOFFS, lines
    assert lines[-2].startswith("[pt-1] CLOSED after attempt 1"), lines
    assert lines[-1] == "watch done after 6 run(s): nothing waits or is in error", lines
    # The next phase started only after its hand-off was complete.
    started = {e["phase"]: ts(e) for e in events(project, "pt-1", "PhaseStarted")}
    done = {r["name"]: r["done"] for r in written(log)}
    assert started["implement"] > done["research.md"]
    assert started["verify"] > done["review-second.md"]


def test_half_written_artifact_is_not_taken(
    project: Path, write_settings: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    handoff_project(project, write_settings, "pt-1", stable=1.0)
    log = tmp_path / "written.jsonl"
    with procs() as running:
        running.append(w := watch(project, tmp_path, "pt-1"))
        modes = {"research.md": "chunks3"}
        running.append(writer(project, "pt-1", log, modes, pause=0.3, only=["research.md"]))
        w.wait_for("waiting for implementation.md")
        w.proc.send_signal(signal.SIGINT)
        assert w.wait() == 130

    assert check_taken_whole(project, "pt-1", log) == ["research.md"]
    # The three chunks each raised events; watch ran once, after the last one. An early run
    # would have found the file still changing and journaled a second PhaseWaiting for it.
    waits = [e["phase"] for e in events(project, "pt-1", "PhaseWaiting")]
    assert waits == ["research", "implement"]
    assert len(events(project, "pt-1", "AttemptResumed")) == 1
    assert sum("research.md arrived (stable 1s)" in ln for ln in w.lines()) == 1


def test_error_ticket_resumes_when_the_resume_file_is_touched(e2e: Harness, tmp_path: Path) -> None:
    e2e.plan(noOutput=[{"phase": "implement"}])  # a failure no restart retries
    assert e2e.run().returncode == 5
    e2e.plan()  # mended; the user says so by touching `resume`
    env = {"FAKE_AGENT_PLAN": str(e2e.plan_file), "FAKE_AGENT_LOG": str(e2e.log_file)}
    with procs() as running:
        running.append(w := watch(e2e.project, tmp_path, "pt-1", "--once", env=env))
        assert "pt-1 in error (attempt 1 implement)" in w.lines()[0]
        # tf_fsm's own kinds of files change: none of them is a reason to resume
        (e2e.dir / "logs" / "attempt-1" / "note.log").write_text("x")
        (e2e.dir / "prompts" / "scratch.md").write_text("x")
        (e2e.dir / ".scratch.tmp").write_text("x")
        (e2e.dir / "chain-context.json").touch()
        time.sleep(2.0)  # every chance to act on them wrongly (stableSeconds is 0.5)
        assert "AttemptResumed" not in e2e.names()
        touched = time.time()
        (e2e.dir / "resume").touch()
        assert w.wait() == 0, (w.lines(), w.err.read_text())

    assert not (e2e.dir / "resume").exists()  # taken: one touch, one resume
    resumed = e2e.event("AttemptResumed", 1)
    assert resumed["phase"] == "implement"
    assert ts(resumed) >= touched - 0.001
    assert e2e.read_state()["attempts"][0]["status"] == "closed"
    lines = w.lines()
    assert "[pt-1] resume file taken: resuming attempt 1 at implement" in lines, lines
    assert lines[-2].startswith("[pt-1] CLOSED after attempt 1"), lines


def test_two_tickets_at_once(
    project: Path, write_settings: Callable[[dict[str, Any]], Path], tmp_path: Path
) -> None:
    handoff_project(project, write_settings, "pt-1", "pt-2")
    logs = {t: tmp_path / f"written-{t}.jsonl" for t in ("pt-1", "pt-2")}
    with procs() as running:
        running.append(w := watch(project, tmp_path, "--once", "--json"))
        go = tmp_path / "go"
        for ticket, log in logs.items():  # both hand-offs at once, from two processes
            modes = {"implementation.md": "chunks"}
            running.append(writer(project, ticket, log, modes, go=str(go)))
        deadline = time.monotonic() + WAIT
        while not all(Path(f"{log}.ready").exists() for log in logs.values()):
            assert time.monotonic() < deadline
            time.sleep(0.02)
        go.touch()  # a start line for both writers, whatever their start-up took
        assert w.wait() == 0, (w.lines(), w.err.read_text())

    four = ["research.md", "implementation.md", "review-general.md", "close-notes.md"]
    records = [json.loads(ln) for ln in w.lines()]
    assert records[0]["event"] == "watching" and "2 ticket(s)" in records[0]["message"]
    for ticket, log in logs.items():
        assert check_taken_whole(project, ticket, log) == four
        assert len(events(project, ticket, "AttemptResumed")) == 4
        outcomes = [r["status"] for r in records if r["ticket"] == ticket and "status" in r]
        assert outcomes == ["waiting", "waiting", "waiting", "closed"]
    # One watch served both: each ticket's hand-offs were taken while the other was in flight.
    order = [r["ticket"] for r in records if r["event"] == "resume"]
    assert order.index("pt-2") < len(order) - 1 - order[::-1].index("pt-1"), order
    assert order.index("pt-1") < len(order) - 1 - order[::-1].index("pt-2"), order
    assert records[-1]["event"] == "done"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupt_stops_cleanly_and_leaves_the_ticket_resumable(
    project: Path, write_settings: Callable[[dict[str, Any]], Path], tmp_path: Path, sig: int
) -> None:
    handoff_project(project, write_settings, "pt-1")
    with procs() as running:
        running.append(w := watch(project, tmp_path))
        w.proc.send_signal(sig)
        assert w.wait() == 130
    assert w.lines()[-1] == (
        "watch interrupted after 0 run(s); left resumable (tf-fsm watch or tf-fsm run): "
        "pt-1 waits for research.md (attempt 1 research)"
    )
    state = json.loads((kdir(project, "pt-1") / "retry-state.json").read_text())
    assert state["attempts"][-1]["status"] == "in_progress"
    (kdir(project, "pt-1") / "research.md").write_text("# Research\n")
    time.sleep(0.6)  # the hand-off rule: quiet for stableSeconds
    result = run_cli("run", "pt-1", cwd=project)
    assert result.returncode == 6, result.stderr
    assert events(project, "pt-1", "PhaseWaiting")[-1]["phase"] == "implement"


def test_interrupt_lets_a_running_agent_finish_and_stops_before_the_next(
    e2e: Harness, tmp_path: Path
) -> None:
    e2e.plan(noOutput=[{"phase": "implement"}])
    assert e2e.run().returncode == 5
    e2e.plan(hang=[{"phase": "review", "attempt": 1, "role": "reviewer-general", "seconds": 2}])
    env = {"FAKE_AGENT_PLAN": str(e2e.plan_file), "FAKE_AGENT_CHILD_PID": str(e2e.child_pid_file)}
    with procs() as running:
        running.append(w := watch(e2e.project, tmp_path, "pt-1", env=env))
        (e2e.dir / "resume").touch()
        deadline = time.monotonic() + WAIT
        while not e2e.child_pid_file.exists():  # the reviewer is mid-invocation now
            assert time.monotonic() < deadline, w.lines()
            time.sleep(0.05)
        w.proc.send_signal(signal.SIGINT)
        assert w.wait() == 130, (w.lines(), w.err.read_text())

    lines = w.lines()
    assert any(
        ln.startswith("stopping: waiting for the current invocation of pt-1") for ln in lines
    )
    assert any(ln.startswith("[pt-1] stopped before review") for ln in lines), lines
    finished = [e["role"] for e in e2e.events(1) if e["event"] == "InvocationFinished"]
    assert finished[-1] == "reviewer-general"  # the hanging invocation was let finish
    assert e2e.read_state()["attempts"][0]["status"] == "in_progress"
    assert e2e.run().returncode == 0  # and `run` picks the attempt up


def test_a_second_interrupt_leaves_at_once_and_stops_the_agent(
    e2e: Harness, tmp_path: Path
) -> None:
    e2e.plan(noOutput=[{"phase": "implement"}])
    assert e2e.run().returncode == 5
    e2e.plan(hang=[{"phase": "implement", "attempt": 1, "seconds": 60}])
    env = {"FAKE_AGENT_PLAN": str(e2e.plan_file), "FAKE_AGENT_CHILD_PID": str(e2e.child_pid_file)}
    with procs() as running:
        running.append(w := watch(e2e.project, tmp_path, env=env))
        (e2e.dir / "resume").touch()
        deadline = time.monotonic() + WAIT
        while not e2e.child_pid_file.exists():
            assert time.monotonic() < deadline, w.lines()
            time.sleep(0.05)
        child = int(e2e.child_pid_file.read_text().split()[0])
        w.proc.send_signal(signal.SIGINT)
        w.wait_for("stopping: waiting for the current invocation of pt-1")
        w.proc.send_signal(signal.SIGINT)
        assert w.wait() == 130, (w.lines(), w.err.read_text())

    # The agent's own child too: nothing is left to write into the ticket behind our back.
    deadline = time.monotonic() + WAIT
    while alive(child):
        assert time.monotonic() < deadline, f"agent child {child} outlived watch"
        time.sleep(0.05)
    assert w.lines()[-1].endswith("pt-1 in progress (attempt 1 implement)"), w.lines()
    e2e.plan()
    assert e2e.run().returncode == 0  # resumable


def test_bad_input_exits_2(project: Path) -> None:
    (project / ".tickets").mkdir()
    bad = run_cli("watch", "../pt-1", cwd=project)
    assert bad.returncode == 2
    assert "invalid ticket id" in bad.stderr
    missing = run_cli("watch", "pt-9", "--once", cwd=project)
    assert missing.returncode == 2
    assert "ticket pt-9 not found" in missing.stderr
    nothing = run_cli("watch", "--once", cwd=project)
    assert nothing.returncode == 0, nothing.stderr
    assert nothing.stdout.splitlines()[-1].startswith("watch done after 0 run(s)")
