"""End-to-end: `tf-fsm ralph` over a 21-ticket backlog, with real worker processes and the fake
agent (tests/fake_agent.py) as the agent CLI.

Each ticket gets its own fake-agent plan through the command executor's `{ticket_id}`
placeholder, so one backlog mixes tickets that close at once, close after an escalated retry,
exhaust their retries, crash once, crash always, and tickets whose deps never close. Everything
is judged from the outside: exit codes, tk files, retry-state.json, events.jsonl and the fake
agent's own log of invocations.
"""

from __future__ import annotations

import itertools
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.e2e.conftest import alive, frontmatter
from tf_fsm.tk.tickets import new_ticket

AGENT = Path(__file__).resolve().parent.parent / "fake_agent.py"
STRONG = "openai-codex/gpt-5.3-codex"
MAX_RETRIES = 2


def _major(fixed_by: list[str]) -> dict[str, Any]:
    finding = {"id": "f1", "severity": "Major", "text": "`x.py:1` - unbounded recursion"}
    return {"findings": [{**finding, "reviewer": "reviewer-general", "fixedBy": fixed_by}]}


PLANS: dict[str, dict[str, Any]] = {
    "clean": {},
    "escalate": _major([STRONG]),  # only the escalated fixer (attempt 2) clears it
    "hopeless": _major([]),  # nobody clears it: blocked until retries run out
    "crash_once": {"crash": [{"phase": "implement", "attempt": 1, "times": 1, "exitCode": 3}]},
    "broken": {"crash": [{"phase": "implement", "exitCode": 3}]},  # every invocation crashes
    "never": {},  # a dep never closes, so it is never ready
}
#: kind -> (tk status, [(attemptNumber, status, trigger)], retryCount) once the loop is done
EXPECTED: dict[str, tuple[str, list[tuple[int, str, str]], int]] = {
    "clean": ("closed", [(1, "closed", "initial")], 0),
    "escalate": ("closed", [(1, "blocked", "initial"), (2, "closed", "ralph_retry")], 0),
    "hopeless": ("in_progress", [(1, "blocked", "initial"), (2, "blocked", "ralph_retry")], 2),
    "crash_once": ("closed", [(1, "closed", "initial")], 0),
    "broken": ("in_progress", [(1, "error", "initial")], 0),
    "never": ("open", [], 0),
}
_RETRY = [("review", 2), ("fix", 2), ("verify", 2)]  # a retry skips implement (worker base)
_BLOCKED_ONCE = [("implement", 1), ("review", 1), ("fix", 1), ("verify", 1), *_RETRY]
#: kind -> agent invocations (phase, attempt) -> how many
CALLS: dict[str, Counter[tuple[str, int]]] = {
    "clean": Counter([("implement", 1), ("review", 1)]),
    "escalate": Counter(_BLOCKED_ONCE),
    "hopeless": Counter(_BLOCKED_ONCE),
    "crash_once": Counter([("implement", 1), ("implement", 1), ("review", 1)]),
    "broken": Counter([("implement", 1), ("implement", 1)]),  # the crash, the resume's crash
    "never": Counter(),
}

# id, kind, deps, tags, priority
BACKLOG: list[tuple[str, str, list[str], list[str], int]] = [
    ("a-01", "clean", [], ["component:api"], 1),
    ("a-02", "clean", ["a-01"], ["component:api"], 2),
    ("a-03", "escalate", ["a-01", "a-02"], ["component:api", "component:db"], 2),
    ("a-04", "clean", ["a-03"], ["component:db"], 0),
    ("b-01", "escalate", [], ["component:ui"], 2),
    ("b-02", "clean", [], ["component:ui"], 3),
    ("b-03", "hopeless", [], ["component:cli"], 1),
    ("b-04", "never", ["b-03"], ["component:cli"], 0),
    ("c-01", "clean", [], ["component:docs"], 4),
    ("c-02", "crash_once", [], ["component:docs"], 2),
    ("c-03", "broken", [], ["component:build"], 2),
    ("c-04", "never", ["c-03"], ["component:build"], 2),
    ("d-01", "clean", [], [], 2),  # untagged: runs alone
    ("d-02", "escalate", ["d-01"], ["component:core"], 2),
    ("d-03", "clean", [], ["component:core", "component:ui"], 3),
    ("d-04", "never", ["ghost-1"], ["component:core"], 1),  # its dep has no file
    ("e-01", "clean", [], ["component:net"], 2),
    ("e-02", "hopeless", ["e-01"], ["component:net"], 2),
    ("e-03", "clean", [], ["component:auth"], 1),
    ("e-04", "escalate", [], ["component:auth"], 2),
    ("e-05", "clean", ["a-04", "b-02"], ["component:api"], 2),
]
KIND = {tid: kind for tid, kind, *_ in BACKLOG}
TAGS = {tid: {t for t in tags if t.startswith("component:")} for tid, _, _, tags, _ in BACKLOG}
WORKER_RUNS = 26  # clean 10 + escalate 4x2 + hopeless 2x2 + crash_once 2 + broken 2


class Backlog:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.plans = root.parent / f"{root.name}-plans"
        self.log = root.parent / f"{root.name}-agent.jsonl"
        self.knowledge = root / ".tf" / "knowledge" / "tickets"
        (root / ".tf" / "config").mkdir(parents=True, exist_ok=True)
        (root / ".tickets").mkdir()
        self.plans.mkdir()
        agent = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"
        plan = shlex.quote(str(self.plans)) + "/{ticket_id}.json"
        settings = {
            "metaModels": {"strong": {"model": STRONG, "thinking": "high"}},
            "workflow": {
                "failOn": ["Critical", "Major"],
                "enableResearcher": False,
                "enableReviewers": ["reviewer-general"],
                "enableCloser": False,
                "escalation": {
                    "enabled": True,
                    "maxRetries": MAX_RETRIES,
                    "models": {"fixer": "strong"},
                },
            },
            "ralph": {"maxIterations": 100},
            "executor": {
                "kind": "command",
                "command": ["/bin/sh", "-c", f"FAKE_AGENT_PLAN={plan} exec {agent}"],
                "timeoutSeconds": 30,
                "maxRestarts": 0,  # a crash ends the attempt: the loop's error path is tested
            },
        }
        (root / ".tf" / "config" / "settings.json").write_text(json.dumps(settings))
        for tid, kind, deps, tags, priority in BACKLOG:
            text = new_ticket(
                tid,
                f"Ticket {tid} ({kind})",
                deps=tuple(deps),
                tags=tuple(tags),
                priority=priority,
                created="2026-02-10T12:00:00Z",
            )
            (root / ".tickets" / f"{tid}.md").write_text(text)
            (self.plans / f"{tid}.json").write_text(json.dumps(PLANS[kind]))

    def argv(self, *args: str) -> list[str]:
        return ["--root", str(self.root), "ralph", "--resume-errors", *args]

    def env(self) -> dict[str, str]:
        return {"FAKE_AGENT_LOG": str(self.log)}

    def ralph(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*self.argv(*args), env=self.env())

    # -- observation ---------------------------------------------------------------------------
    def state(self, tid: str) -> dict[str, Any] | None:
        path = self.knowledge / tid / "retry-state.json"
        return json.loads(path.read_text()) if path.exists() else None

    def final(self) -> dict[str, tuple[str, list[tuple[int, str, str]], int]]:
        out = {}
        for tid in KIND:
            text = (self.root / ".tickets" / f"{tid}.md").read_text()
            frontmatter(text)  # still one `key: value` a line, flow lists: tk reads it
            status = next(ln[8:] for ln in text.splitlines() if ln.startswith("status: "))
            state = self.state(tid) or {"attempts": [], "retryCount": 0}
            attempts = [(a["attemptNumber"], a["status"], a["trigger"]) for a in state["attempts"]]
            out[tid] = (status, attempts, state["retryCount"])
        return out

    def events(self, tid: str) -> list[dict[str, Any]]:
        """The journal's complete lines: read while a worker appends, the last may be cut
        short (a reader can see a write half copied), and tf_fsm's own reader skips it too."""
        path = self.knowledge / tid / "events.jsonl"
        lines = path.read_text().split("\n")[:-1] if path.exists() else []
        return [json.loads(line) for line in lines if line.strip()]

    def calls(self) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return [json.loads(line) for line in lines]

    def holds(self, tid: str) -> list[tuple[datetime, datetime]]:
        """The times a worker drove the ticket: each AttemptStarted/AttemptResumed up to the
        AttemptFinished that follows it. Two workers on one ticket would interleave here."""
        spans: list[tuple[datetime, datetime]] = []
        opened: datetime | None = None
        for ev in self.events(tid):
            ts = datetime.fromisoformat(ev["ts"].replace("Z", "+00:00"))
            if ev["event"] in ("AttemptStarted", "AttemptResumed"):
                assert opened is None, f"{tid}: a second start before the first finished: {ev}"
                opened = ts
            elif ev["event"] == "AttemptFinished":
                assert opened is not None, f"{tid}: AttemptFinished without a start: {ev}"
                spans.append((opened, ts))
                opened = None
        assert opened is None, f"{tid}: an attempt never finished"
        return spans


def expected_final() -> dict[str, tuple[str, list[tuple[int, str, str]], int]]:
    return {tid: EXPECTED[kind] for tid, kind in KIND.items()}


def check_cap_and_numbers(b: Backlog) -> None:
    """No ticket runs more attempts than the cap; attempt numbers have no gap or repeat; each
    attempt started once (a resume journals AttemptResumed, never a second AttemptStarted)."""
    for tid in KIND:
        state = b.state(tid)
        if state is None:
            continue
        numbers = [a["attemptNumber"] for a in state["attempts"]]
        assert numbers == list(range(1, len(numbers) + 1)), (tid, numbers)
        assert len(numbers) <= MAX_RETRIES, (tid, numbers)
        assert state["retryCount"] <= MAX_RETRIES, (tid, state)
        started = Counter(e["attempt"] for e in b.events(tid) if e["event"] == "AttemptStarted")
        assert all(n == 1 for n in started.values()), (tid, started)
        assert set(started) <= set(numbers), (tid, started, numbers)


def check_run(b: Backlog, done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr
    assert "no ticket left to run" in done.stdout, done.stdout
    assert b.final() == expected_final()
    check_cap_and_numbers(b)
    # Exactly the invocations each kind needs: a ticket driven twice at once would double them.
    calls = b.calls()
    for tid, kind in KIND.items():
        got = Counter((c["phase"], c["attempt"]) for c in calls if c["ticket"] == tid)
        assert got == CALLS[kind], (tid, kind, got)
    assert len({c["pid"] for c in calls}) == len(calls)  # one process per invocation
    for tid in KIND:
        b.holds(tid)  # strictly alternating start/finish, or it raises
    progress = (b.root / ".tf" / "ralph" / "progress.md").read_text()
    assert "- Status: COMPLETE" in progress
    assert f"- Total iterations: {WORKER_RUNS}" in progress
    assert "- b-03: BLOCKED" in progress and "BLOCKED (max retries exceeded)" in progress


def test_backlog_runs_the_same_with_one_and_four_workers(tmp_path: Path) -> None:
    one, four = Backlog(tmp_path / "one"), Backlog(tmp_path / "four")
    started = time.monotonic()
    check_run(one, one.ralph("--workers", "1"))
    serial = time.monotonic() - started
    started = time.monotonic()
    check_run(four, four.ralph("--workers", "4"))
    parallel = time.monotonic() - started
    assert one.final() == four.final()

    # With one worker, no two tickets were ever driven at the same time.
    spans = [(s, e, t) for t in KIND for s, e in one.holds(t)]
    spans.sort()
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(spans))

    # With four, some were; never two whose component tags overlap, never an untagged one
    # beside another ticket.
    spans = [(s, e, t) for t in KIND for s, e in four.holds(t)]
    overlapping = 0
    for i, (s1, e1, t1) in enumerate(spans):
        for s2, e2, t2 in spans[i + 1 :]:
            if t1 != t2 and s1 < e2 and s2 < e1:
                overlapping += 1
                assert TAGS[t1] and TAGS[t2], f"untagged {t1 if not TAGS[t1] else t2} ran beside"
                assert not TAGS[t1] & TAGS[t2], (t1, t2, TAGS[t1] & TAGS[t2])
    assert overlapping > 0, "four workers never ran two tickets at once"
    print(f"serial {serial:.1f}s, four workers {parallel:.1f}s")


def _open_attempts(b: Backlog) -> dict[str, int]:
    """The attempts in progress as the journal committed them (its last image of
    retry-state.json): a kill between the image and the file leaves the file behind it, and
    the next run goes by the journal."""
    out = {}
    for tid in KIND:
        images = [e for e in b.events(tid) if e["event"] == "ViewSaved"]
        mine = [e["content"] for e in images if e["file"] == "retry-state.json"]
        state = mine[-1] if mine else None
        if state and state["attempts"] and state["attempts"][-1]["status"] == "in_progress":
            out[tid] = state["attempts"][-1]["attemptNumber"]
    return out


def test_sigkill_mid_run_then_restart_loses_and_repeats_nothing(tmp_path: Path) -> None:
    b = Backlog(tmp_path / "killed")
    loop = subprocess.Popen(
        [sys.executable, "-m", "tf_fsm", *b.argv("--workers", "2")],
        env={**os.environ, **b.env()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the workers, not this test
    )
    deadline = time.monotonic() + 40
    try:
        # Kill once several runs are done and at least one attempt is in flight.
        while time.monotonic() < deadline:
            finished = sum(
                1 for tid in KIND for e in b.events(tid) if e["event"] == "AttemptFinished"
            )
            if finished >= 6 and _open_attempts(b):
                break
            time.sleep(0.01)
        else:
            pytest.fail("the loop never had an attempt in flight after 6 finished runs")
    finally:
        os.killpg(loop.pid, signal.SIGKILL)
        loop.wait(timeout=10)
    in_flight = _open_attempts(b)
    assert in_flight, "the kill should leave an attempt in progress"
    # Agents run in their own sessions (so an agent timeout kills all it started); the killed
    # workers' agents finish on their own. Let them, as a person restarting the loop would.
    for pid in {c["pid"] for c in b.calls()}:
        for _ in range(500):
            if not alive(pid):
                break
            time.sleep(0.01)

    done = b.ralph("--workers", "2")
    assert done.returncode == 0, done.stderr
    assert b.final() == expected_final()
    check_cap_and_numbers(b)
    for tid, number in in_flight.items():
        resumed = [e for e in b.events(tid) if e["event"] == "AttemptResumed"]
        assert any(e["attempt"] == number for e in resumed), (tid, number, resumed)
