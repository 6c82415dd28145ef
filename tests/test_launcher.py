"""tf_fsm.process.launcher: the process that starts tf_fsm's children and ends them when
tf_fsm ends (real processes throughout; Linux only, as the launcher is)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import wait_for
from tf_fsm.process import launcher
from tf_fsm.process.door import run_process
from tf_fsm.process.strays import OWNER_ENV

pytestmark = pytest.mark.skipif(not launcher.available(), reason="the launcher is Linux's")
PY = sys.executable


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _owned_by(pid: int) -> list[int]:
    """The live processes whose mark says `pid` started them (tf_fsm.process.strays)."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"{OWNER_ENV}={pid}.".encode() in environ and _alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def test_a_child_is_the_launchers_and_leads_a_session_of_its_own(tmp_path: Path) -> None:
    code = "import os; print(os.getppid(), os.getsid(0) == os.getpid())"
    parent, leads = run_process([PY, "-c", code], cwd=tmp_path).stdout.split()
    boot = launcher.launcher()
    assert boot is not None and int(parent) == boot.server.pid != os.getpid()
    assert leads == "True"


def test_arguments_reach_the_child_as_given_empty_and_long_ones_too(tmp_path: Path) -> None:
    code = "import sys; print(len(sys.argv[1:]), [len(a) for a in sys.argv[1:]])"
    long = ["x" * 100_000] * 3  # more than a message holds: the request goes in a memory file
    said = run_process([PY, "-c", code, "", "a b", *long, ""], cwd=tmp_path).stdout
    assert said == "6 [0, 3, 100000, 100000, 100000, 0]\n"
    env = {"A": "1", "EMPTY": ""}
    shown = run_process(
        [PY, "-c", "import os; print(sorted((k, os.environ[k]) for k in ('A', 'EMPTY')))"],
        cwd=tmp_path,
        env=env,
    ).stdout
    assert shown == "[('A', '1'), ('EMPTY', '')]\n"


def test_what_cannot_be_started_raises_as_popen_does(tmp_path: Path) -> None:
    script = tmp_path / "plain.sh"
    script.write_text("#!/bin/sh\necho hi\n")  # not executable
    with pytest.raises(PermissionError):
        run_process([str(script)], cwd=tmp_path)
    with pytest.raises(FileNotFoundError) as missing_dir:
        run_process([PY, "-c", "pass"], cwd=tmp_path / "nowhere")
    assert missing_dir.value.filename == str(tmp_path / "nowhere")
    assert run_process([PY, "-c", "print('still serving')"], cwd=tmp_path).stdout == (
        "still serving\n"
    )


def test_a_start_asked_for_as_tf_fsm_is_killed_leaves_nothing_running(tmp_path: Path) -> None:
    """tf_fsm is SIGKILLed the instant after it asked for an agent, before it heard back: the
    launcher starts the agent, then reads the end of tf_fsm's line and ends it. No agent is
    left behind, and no launcher either."""
    started = tmp_path / "started"
    agent = f"import time; open({str(started)!r}, 'w').close(); time.sleep(300)"
    parent = f"""
import os, signal, sys
from pathlib import Path
from tf_fsm.process import door, launcher

boot = launcher.launcher()
print(boot.server.pid, flush=True)
real = boot.control

class Dying:
    def sendmsg(self, *args):
        real.sendmsg(*args)
        os.kill(os.getpid(), signal.SIGKILL)

boot.control = Dying()
door.run_process([sys.executable, "-c", {agent!r}], cwd=Path({str(tmp_path)!r}))
"""
    proc = subprocess.Popen([PY, "-c", parent], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    server = int(proc.stdout.readline())
    assert proc.wait(timeout=60) == -signal.SIGKILL
    wait_for(lambda: not _alive(server), 20, "the launcher ending with tf_fsm")
    assert _owned_by(proc.pid) == []


def test_a_launcher_killed_from_outside_takes_no_child_with_it_unended(tmp_path: Path) -> None:
    """Someone SIGKILLs the launcher while an agent runs: tf_fsm ends the agent itself (by
    its pidfd and its mark), says it was killed, and the next start gets a new launcher."""
    pid_file = tmp_path / "agent.pid"
    agent = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    )
    results = []
    runner = threading.Thread(
        target=lambda: results.append(run_process([PY, "-c", agent], cwd=tmp_path, timeout=120))
    )
    runner.start()
    wait_for(lambda: pid_file.exists() and pid_file.read_text() != "", 30, "the agent's start")
    boot = launcher.launcher()
    assert boot is not None
    os.kill(boot.server.pid, signal.SIGKILL)
    runner.join(60)
    assert results and results[0].exit_code == -signal.SIGKILL
    assert not _alive(int(pid_file.read_text()))
    again = run_process([PY, "-c", "import os; print(os.getppid())"], cwd=tmp_path).stdout
    renewed = launcher.launcher()
    assert renewed is not None and renewed is not boot and int(again) == renewed.server.pid


def test_a_sigterm_to_the_launcher_ends_nothing_and_signal_children_reaches_its_children(
    tmp_path: Path,
) -> None:
    """A SIGTERM meant for a run's children or leftovers (`end_marked` ends the launcher with
    its owner) leaves the launcher serving, so it still ends its children when tf_fsm ends;
    `signal_children` reaches the children the launcher started, which are not tf_fsm's own.
    In a process of its own: `signal_children` signals every child of the process it runs in
    (this test's worker has others, a Temporal dev server among them)."""
    pid_file = tmp_path / "agent.pid"
    agent = (
        "import os, signal, sys, time\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))\n"
        f"open({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
        "time.sleep(300)\n"
    )
    owner = f"""
import os, signal, sys, threading, time
from pathlib import Path
from tf_fsm.process import door, launcher

pid_file, results = Path({str(pid_file)!r}), []
runner = threading.Thread(target=lambda: results.append(
    door.run_process([sys.executable, "-c", {agent!r}], cwd=pid_file.parent, timeout=120)))
runner.start()
while not (pid_file.exists() and pid_file.read_text()):
    time.sleep(0.01)
boot = launcher.launcher()
os.kill(boot.server.pid, signal.SIGTERM)
print(boot.server.pid, int(pid_file.read_text()), runner.is_alive(), flush=True)
print(door.signal_children(signal.SIGTERM), flush=True)
runner.join(60)
print(results[0].exit_code, launcher.launcher() is boot, flush=True)
"""
    proc = subprocess.Popen([PY, "-c", owner], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    server, agent_pid, running = proc.stdout.readline().split()
    assert signal.SIGTERM in _ignored(int(server))  # so a SIGTERM is never its end
    assert _alive(int(server)) and _alive(int(agent_pid)) and running == "True"
    assert int(proc.stdout.readline()) >= 1  # the agent, through the launcher
    code, same = proc.stdout.readline().split()
    assert code == "7" and same == "True"  # its own SIGTERM handler: asked, not killed
    assert proc.wait(timeout=60) == 0
    # what the launcher ignores, its children do not inherit
    shown = run_process(["sh", "-c", "grep SigIgn /proc/$$/status"], cwd=tmp_path).stdout
    ignored = int(shown.split()[1], 16)
    assert not ignored >> (signal.SIGTERM - 1) & 1 and not ignored >> (signal.SIGINT - 1) & 1


def _ignored(pid: int) -> set[int]:
    """The signals process `pid` ignores (its SigIgn mask in /proc)."""
    status = Path(f"/proc/{pid}/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("SigIgn:"))
    mask = int(line.split()[1], 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


def _in_a_forked_child(answer: Callable[[], bytes]) -> bytes:
    """What `answer` returns in a child forked without exec (reported through a pipe)."""
    reader, writer = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        os.close(reader)
        os.write(writer, answer())
        os._exit(0)
    os.close(writer)
    with os.fdopen(reader, "rb") as said:
        got = said.read()
    os.waitpid(pid, 0)
    return got


def test_a_forked_process_gets_a_launcher_of_its_own(tmp_path: Path) -> None:
    first = launcher.launcher()
    assert first is not None

    def own_launcher() -> bytes:
        mine = launcher.launcher()
        said = run_process([PY, "-c", "import os; print(os.getppid())"], cwd=tmp_path).stdout
        return (
            b"1"
            if mine is not None and mine is not first and int(said) == mine.server.pid
            else b"0"
        )

    assert _in_a_forked_child(own_launcher) == b"1"
    assert first.alive() and launcher.launcher() is first  # the parent's own serves on


def test_a_forked_child_lets_go_of_its_parents_line_to_the_launcher() -> None:
    """A process forked without exec (tk's reader, the loop's fork server) holds no copy of
    its parent's line to the launcher: the launcher ends the parent's children when that line
    ends, which such a copy would put off for as long as the child lives."""
    boot = launcher.launcher()
    assert boot is not None
    line = boot.control.fileno()

    def holds_the_line() -> bytes:
        try:
            os.fstat(line)
        except OSError:
            return b"let go"
        return b"held"

    assert _in_a_forked_child(holds_the_line) == b"let go"
    assert boot.alive() and launcher.launcher() is boot  # the parent's line is untouched
