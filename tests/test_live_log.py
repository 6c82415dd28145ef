"""The live log (tf_fsm.executors.live_log): an agent's output on disk, redacted, while it runs,
removed when the invocation ends. Real agent processes through the command executor, a real
lifecycle through run_ticket, and LiveLog itself on real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from tests.e2e.conftest import Harness
from tests.gitrepo import isolate
from tests.test_executors import invocation
from tf_fsm.engine.orchestrator import RunOptions, run_ticket
from tf_fsm.executors import Invocation
from tf_fsm.executors.command import CommandExecutor
from tf_fsm.executors.live_log import LINE_LIMIT, LiveLog
from tf_fsm.process.door import TAIL_REDACT_MARGIN, run_process
from tf_fsm.storage.redact import Redactor

REPO = Path(__file__).resolve().parent.parent
# An OpenAI-style key the redactor knows by its shape, printed in two writes: its second half
# alone looks like nothing, so a live log that redacted each write apart would show it.
KEY_HEAD, KEY_TAIL = "sk-proj-A1b2C3d4E5", "F6g7H8i9J0k1L2m3N4o5"

# Prints lines, the key in two writes with a line on stderr in between, then waits for the
# file named by its first argument (the test's go) before its last line and its artifact.
SLOW_AGENT = f"""\
import os, sys, time
from pathlib import Path
go = Path(sys.argv[1])
print("first line", flush=True)
sys.stdout.write("OPENAI_API_KEY={KEY_HEAD}")
sys.stdout.flush()
print("stderr between", file=sys.stderr, flush=True)
time.sleep(0.2)
sys.stdout.write("{KEY_TAIL}\\n")
sys.stdout.flush()
print("second line", flush=True)
deadline = time.monotonic() + 10
while not go.exists() and time.monotonic() < deadline:
    time.sleep(0.02)
print("last line", flush=True)
Path(os.environ["TF_OUTPUT"]).write_text("done\\n", encoding="utf-8")
"""

QUICK_AGENT = """\
import os, sys
from pathlib import Path
for i in range(int(sys.argv[1]) if len(sys.argv) > 1 else 3):
    print(f"line {i} " + "x" * 60, flush=True)
Path(os.environ["TF_OUTPUT"]).write_text("done\\n", encoding="utf-8")
"""


def _agent(tmp_path: Path, text: str) -> Path:
    script = tmp_path / "agent.py"
    script.write_text(text, encoding="utf-8")
    return script


def _live(project: Path) -> Invocation:
    """An invocation whose live log is in the ticket's logs, beside its log file."""
    inv = invocation(project)
    return replace(inv, live_log=inv.log_file.with_suffix(".live.log"))


def _wait_for(check: Callable[[], bool], seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return check()


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""


# --- the command executor ------------------------------------------------------------------


def test_the_live_log_shows_lines_while_the_agent_runs_redacted_then_goes(
    project: Path, tmp_path: Path
) -> None:
    inv = _live(project)
    live = inv.live_log
    assert live is not None
    live.parent.mkdir(parents=True)
    live.write_text("stale text of a killed run\n", encoding="utf-8")
    go = tmp_path / "go"
    agent = _agent(tmp_path, SLOW_AGENT)
    executor = CommandExecutor([sys.executable, str(agent), str(go)], project)
    results = []
    worker = threading.Thread(target=lambda: results.append(executor.invoke(inv)))
    worker.start()
    seen: list[str] = []
    try:

        def second_line_shown() -> bool:
            seen.append(_read(live))
            return "second line" in seen[-1]

        assert _wait_for(second_line_shown), seen[-1]
        assert worker.is_alive()  # the agent waits for go: it has not ended
    finally:
        go.touch()
        worker.join(15)
    assert sorted(seen[-1].splitlines()) == sorted(
        ["first line", "stderr between", "OPENAI_API_KEY=[REDACTED]", "second line"]
    )
    for text in seen:  # no read, however early, saw the key or any part of it
        assert KEY_HEAD not in text and KEY_TAIL not in text
        assert "stale" not in text or "first line" not in text  # truncated on first output
    [result] = results
    assert result.ok, result.failure
    assert not live.exists()  # removed: the engine writes the whole log
    for line in ("first line", "second line", "last line", KEY_HEAD + KEY_TAIL):
        assert line in result.log  # the whole output, as before (redacted when written)
    assert "live log stopped" not in result.log


def test_a_symlink_at_the_live_log_is_not_followed(project: Path, tmp_path: Path) -> None:
    inv = _live(project)
    assert inv.live_log is not None
    outside = tmp_path / "outside.txt"
    outside.write_text("theirs\n", encoding="utf-8")
    inv.live_log.parent.mkdir(parents=True)
    inv.live_log.symlink_to(outside)
    agent = _agent(tmp_path, QUICK_AGENT)
    result = CommandExecutor([sys.executable, str(agent)], project).invoke(inv)
    assert result.ok, result.failure  # the view failed, not the agent
    assert outside.read_text(encoding="utf-8") == "theirs\n"
    assert inv.live_log.is_symlink()  # left as it was, not removed either
    [note] = [ln for ln in result.log.splitlines() if ln.startswith("# live log stopped: ")]
    assert str(inv.live_log) in note and "symlink" in note
    assert "line 2" in result.log


def test_a_quiet_agent_leaves_no_live_log_and_removes_a_stale_one(
    project: Path, tmp_path: Path
) -> None:
    inv = _live(project)
    assert inv.live_log is not None
    inv.live_log.parent.mkdir(parents=True)
    inv.live_log.write_text("stale text of a killed run\n", encoding="utf-8")
    agent = _agent(tmp_path, QUICK_AGENT)
    result = CommandExecutor([sys.executable, str(agent), "0"], project).invoke(inv)
    assert result.ok, result.failure
    assert not inv.live_log.exists()


def test_without_a_live_log_path_nothing_is_written_beside_the_log(
    project: Path, tmp_path: Path
) -> None:
    inv = invocation(project)
    agent = _agent(tmp_path, QUICK_AGENT)
    result = CommandExecutor([sys.executable, str(agent)], project).invoke(inv)
    assert result.ok and "line 2" in result.log
    assert not inv.log_file.parent.exists()  # the executor itself writes no log at all


# The disk refuses the live log's writes after its first 512 bytes (a file size limit: EFBIG,
# as a full disk would); the agent (which inherits the limit) writes only its small artifact.
_REFUSED_LIVE_LOG = """
import json, resource, signal, sys
from dataclasses import replace
from pathlib import Path
from tests.test_executors import invocation
from tf_fsm.executors.command import CommandExecutor

project, agent = Path(sys.argv[1]), sys.argv[2]
inv = invocation(project)
inv = replace(inv, live_log=inv.log_file.with_suffix(".live.log"))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG, not a signal
resource.setrlimit(resource.RLIMIT_FSIZE, (512, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
result = CommandExecutor([sys.executable, agent, "40"], project).invoke(inv)
print(json.dumps({"ok": result.ok, "log": result.log, "left": inv.live_log.exists()}))
"""


def test_a_disk_error_stops_the_live_log_not_the_agent(project: Path, tmp_path: Path) -> None:
    agent = _agent(tmp_path, QUICK_AGENT)
    done = subprocess.run(
        [sys.executable, "-c", _REFUSED_LIVE_LOG, str(project), str(agent)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["ok"] is True
    assert outcome["left"] is False  # the part written before the refusal is removed too
    notes = [ln for ln in outcome["log"].splitlines() if ln.startswith("# live log stopped: ")]
    assert notes == [
        f"# live log stopped: cannot write {project}/.tf/knowledge/tickets/pt-1/logs/attempt-1/"
        "review-reviewer-general.live.log: File too large"
    ]
    assert "line 39 " in outcome["log"]  # the agent's whole output is still in its log


# Both streams end with a partial line, and the disk refuses the write of what is left.
_REFUSED_AT_THE_END = """
import json, resource, signal, sys
from pathlib import Path
from tf_fsm.executors.live_log import LiveLog

path = Path(sys.argv[1]) / "logs" / "x.live.log"
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (100, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
with LiveLog(path, within=Path(sys.argv[1]), redact=str) as live:
    live.write(b"x" * 90 + b"\\n")
    live.write(b"out" * 20, "stdout")
    live.write(b"err" * 20, "stderr")
    shown = path.read_text()
print(json.dumps({"shown": shown, "stopped": live.stopped, "left": path.exists()}))
"""


def test_a_write_refused_at_the_end_is_reported_and_the_file_still_goes(project: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _REFUSED_AT_THE_END, str(project)],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["shown"] == "x" * 90 + "\n"  # the partial lines wait for the end
    path = project / "logs" / "x.live.log"
    assert outcome["stopped"] == f"cannot write {path}: File too large"
    assert outcome["left"] is False


# --- a whole run ---------------------------------------------------------------------------


def test_a_run_shows_each_live_log_while_its_agent_runs_and_leaves_none(
    e2e: Harness, tmp_path: Path, monkeypatch: object
) -> None:
    isolate(monkeypatch)
    reached, go = tmp_path / "reached", tmp_path / "go"
    e2e.plan(pause=[{"phase": "implement", "touch": str(reached), "until": str(go)}])
    for name, value in {
        "FAKE_AGENT_PLAN": str(e2e.plan_file),
        "FAKE_AGENT_LOG": str(e2e.log_file),
    }.items():
        monkeypatch.setenv(name, value)  # type: ignore[attr-defined]
    live = e2e.dir / "logs" / "attempt-1" / "implement-worker.live.log"
    shown: list[str] = []

    def watch() -> None:  # while implement waits: what its live log shows, then go
        if _wait_for(reached.exists, 10):
            _wait_for(lambda: "implement/worker" in _read(live), 2)
            shown.append(_read(live))
        go.touch()

    watcher = threading.Thread(target=watch)
    watcher.start()
    outcome = run_ticket(e2e.project, "pt-1", RunOptions())
    watcher.join(15)
    assert outcome.status == "closed", outcome.reason
    assert shown and shown[0].startswith("fake agent: implement/worker"), shown
    assert sorted(p.name for p in (e2e.project / ".tf").rglob("*.live.log")) == []
    log = (e2e.dir / "logs" / "attempt-1" / "implement-worker.log").read_text(encoding="utf-8")
    assert "fake agent: implement/worker" in log and "live log stopped" not in log


def test_a_knowledge_dir_outside_the_project_has_its_live_logs_too(
    e2e: Harness, tmp_path: Path, monkeypatch: object
) -> None:
    isolate(monkeypatch)
    knowledge = tmp_path / "knowledge"
    e2e.settings(knowledgeDir=str(knowledge))
    monkeypatch.setenv("FAKE_AGENT_PLAN", str(e2e.plan_file))  # type: ignore[attr-defined]
    outcome = run_ticket(e2e.project, "pt-1", RunOptions())
    assert outcome.status == "closed", outcome.reason
    logs = knowledge / "tickets" / "pt-1" / "logs" / "attempt-1"
    log = (logs / "implement-worker.log").read_text(encoding="utf-8")
    assert "fake agent: implement/worker" in log
    assert "live log stopped" not in log  # its boundary is the ticket's directory
    assert list(knowledge.rglob("*.live.log")) == []


# --- LiveLog on its own ----------------------------------------------------------------------


def test_a_killed_run_s_live_log_goes_when_the_next_one_starts(project: Path) -> None:
    path = project / "logs" / "x.live.log"
    path.parent.mkdir(parents=True)
    path.write_text("stale text of a killed run\n", encoding="utf-8")
    with LiveLog(path, within=project, redact=Redactor()) as live:
        assert not path.exists()  # not shown as this run's while its agent is silent
        live.write(b"partial")
        assert not path.exists()  # created with the first whole line
        live.write(b" line\n")
        assert _read(path) == "partial line\n"
    assert not path.exists()


def test_a_private_key_is_held_back_until_its_end_line(project: Path) -> None:
    path = project / "logs" / "x.live.log"
    body = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASC", "BKcwggSjAgEAAoIBAQC7VJTUt9Us8cKj"]
    with LiveLog(path, within=project, redact=Redactor()) as live:
        live.write(b"before\n-----BEGIN PRIVATE KEY-----\n")
        live.write(f"{body[0]}\n".encode())
        live.write(f"{body[1]}\n".encode())
        assert _read(path) == "before\n"  # the key's lines wait for its end
        live.write(b"-----END PRIVATE KEY-----\nafter\n")
        assert _read(path) == "before\n[REDACTED]\nafter\n"
    assert not path.exists()


TOKEN = "abcdefgh12345678ijklmnop"  # alone it looks like nothing: only its `Bearer` tells


def test_a_long_line_is_written_before_it_ends_never_cutting_a_secret(project: Path) -> None:
    path = project / "logs" / "x.live.log"
    # The last blanks far enough from the end are those of the header, around the token: cut
    # after `Bearer `, the token would reach the file alone, unrecognised.
    line = "-" * 60_000 + " Authorization: Bearer " + TOKEN + "!" * (TAIL_REDACT_MARGIN + 500)
    assert len(line) > LINE_LIMIT
    with LiveLog(path, within=project, redact=Redactor()) as live:
        live.write(line[:30_000].encode())
        live.write(line[30_000:].encode())
        shown = _read(path)
        assert shown.startswith("-" * 30_000) and "\n" not in shown  # before the line ended
        assert TOKEN[:8] not in shown and TOKEN[-8:] not in shown
        live.write(b" tail\n")
        shown = _read(path)
        assert shown.endswith(" tail\n") and "Authorization: [REDACTED]" in shown
        assert TOKEN[:8] not in shown and TOKEN[-8:] not in shown
    assert not path.exists()


def test_a_long_line_without_blanks_is_never_cut_in_a_secret(project: Path) -> None:
    path = project / "logs" / "x.live.log"
    secret = "ghp_" + "Ab1" * 12  # a GitHub token, across the point a plain cut would take
    line = "-" * 70_000 + secret + "-" * (TAIL_REDACT_MARGIN - 10)
    with LiveLog(path, within=project, redact=Redactor()) as live:
        live.write(line.encode())
        shown = _read(path)
        assert shown.startswith("-" * 60_000) and "[REDACTED]" in shown
        assert "Ab1Ab1" not in shown
        live.write(b"--\n")
        assert "Ab1Ab1" not in _read(path)


def test_run_process_hands_each_chunk_on_as_it_arrives(tmp_path: Path) -> None:
    """The process prints its second line only after the test was handed the first: a chunk
    held back until the process ends would leave it waiting, and its output would say so."""
    seen: list[tuple[str, bytes]] = []
    go = tmp_path / "go"
    script = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "print('out 1', flush=True)\n"
        "print('err 1', file=sys.stderr, flush=True)\n"
        "deadline = time.monotonic() + 60\n"
        "while not Path(sys.argv[1]).exists() and time.monotonic() < deadline:\n"
        "    time.sleep(0.01)\n"
        "print('out 2' if Path(sys.argv[1]).exists() else 'never handed on', flush=True)\n"
    )

    def handed_on(chunk: bytes, stream: str) -> None:
        seen.append((stream, chunk))
        if b"out 1" in chunk:
            go.touch()

    result = run_process([sys.executable, "-c", script, str(go)], cwd=tmp_path, on_output=handed_on)
    assert result.stdout == "out 1\nout 2\n" and result.stderr == "err 1\n"  # captured as ever
    assert b"".join(c for s, c in seen if s == "stdout") == b"out 1\nout 2\n"
    assert b"".join(c for s, c in seen if s == "stderr") == b"err 1\n"
