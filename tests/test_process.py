"""tf_fsm.process.door: the one place tf_fsm starts a subprocess (real processes throughout)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tf_fsm.process import launcher
from tf_fsm.process.door import TAIL_REDACT_MARGIN, run_process, tail

PY = sys.executable


def _running(pid: int) -> bool:
    """True while `pid` exists and is not a zombie (a zombie has already been killed)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # reused by another user's process: not ours, not running
        return False
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    state = next((ln.split()[1] for ln in status.splitlines() if ln.startswith("State:")), "?")
    return state not in ("Z", "X")


def _wait_gone(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _running(pid):
            return True
        time.sleep(0.05)
    return not _running(pid)


@pytest.mark.parametrize("code", [0, 1, 3, 42, 255])
def test_exit_codes(tmp_path: Path, code: int) -> None:
    result = run_process([PY, "-c", f"raise SystemExit({code})"], cwd=tmp_path)
    assert result.exit_code == code
    assert result.timed_out is False
    assert result.argv == (PY, "-c", f"raise SystemExit({code})")
    assert result.duration >= 0


def test_killed_by_signal_is_a_negative_exit_code(tmp_path: Path) -> None:
    result = run_process(["bash", "-c", "kill -TERM $$"], cwd=tmp_path)
    assert result.exit_code == -15
    assert result.timed_out is False


@pytest.mark.parametrize(
    "stdin",
    ["", "hello", "line 1\nline 2\n", "ünïcødé ✓\n", "x" * 1_000_000],
)
def test_stdin_is_delivered(tmp_path: Path, stdin: str) -> None:
    code = (
        "import sys; data = sys.stdin.buffer.read(); "
        "sys.stdout.write(str(len(data)) + ':' + data[:50].decode())"
    )
    result = run_process([PY, "-c", code], cwd=tmp_path, stdin=stdin)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == f"{len(stdin.encode())}:{stdin.encode()[:50].decode()}"


def test_no_stdin_means_empty_input(tmp_path: Path) -> None:
    code = "import sys; print(repr(sys.stdin.read()))"
    result = run_process([PY, "-c", code], cwd=tmp_path)
    assert result.stdout == "''\n"


def test_stdin_not_read_does_not_fail(tmp_path: Path) -> None:
    result = run_process([PY, "-c", "pass"], cwd=tmp_path, stdin="y" * 5_000_000)
    assert result.exit_code == 0


def test_stdout_and_stderr_are_captured_separately(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "for i in range(20000):\n"
        "    print('out', i)\n"
        "    print('err', i, file=sys.stderr)\n"
        "sys.stdout.write('last ✓')\n"
    )
    result = run_process([PY, "-c", code], cwd=tmp_path)
    assert result.exit_code == 0
    assert result.stdout.startswith("out 0\nout 1\n")
    assert result.stdout.endswith("out 19999\nlast ✓")
    assert "err" not in result.stdout
    assert result.stderr.count("\n") == 20000
    assert result.stderr.endswith("err 19999\n")


def test_invalid_utf8_output_is_replaced(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.buffer.write(b'ok \\xff\\xfe end')"
    result = run_process([PY, "-c", code], cwd=tmp_path)
    assert result.stdout == "ok \ufffd\ufffd end"


def test_env_is_passed_exactly(tmp_path: Path) -> None:
    code = "import os, json; print(json.dumps(dict(os.environ)))"
    env = {"TF_TICKET_ID": "pt-1", "ONLY_THIS": "yes ✓", "PATH": os.environ["PATH"]}
    result = run_process([PY, "-c", code], cwd=tmp_path, env=env)
    seen = json.loads(result.stdout)
    assert seen["TF_TICKET_ID"] == "pt-1"
    assert seen["ONLY_THIS"] == "yes ✓"
    # Nothing is inherited when env is given (Python itself may add LC_CTYPE under C locale),
    # and tf_fsm adds only the mark that tells its processes apart (tf_fsm.process.strays).
    assert set(seen) - set(env) <= {"LC_CTYPE", "TF_FSM_OWNER"}
    assert seen["TF_FSM_OWNER"].startswith(f"{os.getpid()}.")


def test_env_none_inherits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_FSM_TEST_INHERITED", "from-parent")
    result = run_process(["bash", "-c", 'printf %s "$TF_FSM_TEST_INHERITED"'], cwd=tmp_path)
    assert result.stdout == "from-parent"


def test_cwd_is_honoured(tmp_path: Path) -> None:
    work = tmp_path / "a dir with spaces"
    work.mkdir()
    (work / "marker.txt").write_text("here")
    result = run_process(["bash", "-c", "pwd; cat marker.txt"], cwd=work)
    assert result.stdout == f"{work}\nhere"


def test_missing_program_raises(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        run_process(["definitely-not-a-real-program-xyz"], cwd=tmp_path)


def test_a_relative_program_runs_from_cwd_and_a_non_executable_one_is_refused(
    tmp_path: Path,
) -> None:
    (tmp_path / "bin").mkdir()
    agent = tmp_path / "bin" / "agent.sh"
    agent.write_text('#!/usr/bin/env bash\necho "ran with $1"\n')
    agent.chmod(0o755)
    assert run_process(["bin/agent.sh", "x"], cwd=tmp_path).stdout == "ran with x\n"
    agent.chmod(0o644)
    with pytest.raises(PermissionError):
        run_process(["bin/agent.sh"], cwd=tmp_path)
    with pytest.raises(FileNotFoundError):
        run_process(["bin/missing.sh"], cwd=tmp_path)


def test_the_program_is_found_on_the_childs_path(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    tool = tmp_path / "tools" / "only-here"
    tool.write_text("#!/bin/sh\necho found\n")
    tool.chmod(0o755)
    env = {"PATH": f"{tmp_path / 'tools'}:{os.environ['PATH']}"}
    assert run_process(["only-here"], cwd=tmp_path, env=env).stdout == "found\n"
    with pytest.raises(FileNotFoundError):
        run_process(["only-here"], cwd=tmp_path)  # not on our own PATH


def test_without_the_launcher_the_child_has_the_parent_death_signal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(launcher, "available", lambda: False)
    code = (
        "import ctypes; v = ctypes.c_int(); "
        "ctypes.CDLL(None).prctl(2, ctypes.byref(v)); print(v.value)"  # PR_GET_PDEATHSIG
    )
    assert run_process([PY, "-c", code], cwd=tmp_path).stdout == f"{int(signal.SIGKILL)}\n"


@pytest.mark.parametrize("how", ["launcher", "setpriv", "preexec_fn"])
def test_an_agent_dies_with_a_killed_tf_fsm(tmp_path: Path, how: str) -> None:
    """SIGKILL the process that started an agent: the agent goes too. The launcher ends it;
    without a launcher, util-linux's setpriv on PATH sets the parent-death signal, and
    without that either (PATH emptied) a preexec_fn does."""
    pid_file = tmp_path / "agent.pid"
    agent = (
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(300)"
    )
    parent = (
        "import sys; from pathlib import Path; from tf_fsm.process import door, launcher; "
        f"launcher.available = lambda: {how == 'launcher'}; "
        "print(door.parent_death(), flush=True); "
        f"door.run_process([sys.executable, '-c', {agent!r}], cwd=Path({str(tmp_path)!r}))"
    )
    env = {**os.environ, "PATH": "" if how == "preexec_fn" else os.environ["PATH"]}
    proc = subprocess.Popen([PY, "-c", parent], env=env, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    said = proc.stdout.readline()
    if how == "setpriv" and shutil.which("setpriv") is None:
        how = "preexec_fn"
    assert {"launcher": "launcher", "setpriv": "setpriv", "preexec_fn": "a hook"}[how] in said
    deadline = time.monotonic() + 20
    while not (pid_file.exists() and pid_file.read_text()):
        assert time.monotonic() < deadline, "the agent never started"
        time.sleep(0.02)
    child = int(pid_file.read_text())
    proc.kill()
    proc.wait()
    assert _wait_gone(child), f"agent {child} outlived the killed parent"


def test_child_leads_its_own_process_group(tmp_path: Path) -> None:
    code = "import os; print(os.getpgid(0) == os.getpid(), os.getsid(0) == os.getpid())"
    result = run_process([PY, "-c", code], cwd=tmp_path)
    assert result.stdout.split() == ["True", "True"]


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    script = tmp_path / "agent.sh"
    script.write_text(
        "#!/usr/bin/env bash\n"
        "sleep 300 &\n"
        'echo $! > "$1"\n'
        "echo started\n"
        "echo working >&2\n"
        "sleep 300\n"
    )
    script.chmod(0o755)
    started = time.monotonic()
    # a timeout that leaves a loaded machine time to start bash and reach the sleep
    result = run_process([str(script), str(pid_file)], cwd=tmp_path, timeout=3.0)
    elapsed = time.monotonic() - started
    assert result.timed_out is True
    assert result.exit_code is None
    assert elapsed < 30  # nowhere near the 300 s the script wanted
    assert result.duration >= 3.0
    assert result.stdout == "started\n"  # what it printed before the kill is kept
    assert result.stderr == "working\n"
    child = int(pid_file.read_text().strip())
    assert _wait_gone(child), f"background child {child} survived the timeout"


def test_timeout_kills_a_child_that_ignores_sigterm(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    code = (
        "trap '' TERM\n"
        "bash -c 'trap \"\" TERM; sleep 300' &\n"
        'echo $! > "$1"\n'
        "while true; do sleep 1; done\n"
    )
    started = time.monotonic()
    result = run_process(["bash", "-c", code, "agent", str(pid_file)], cwd=tmp_path, timeout=3)
    assert result.timed_out is True
    assert result.exit_code is None
    assert time.monotonic() - started < 30
    assert _wait_gone(int(pid_file.read_text().strip()))


def test_fast_process_is_not_timed_out(tmp_path: Path) -> None:
    result = run_process([PY, "-c", "print('quick')"], cwd=tmp_path, timeout=30)
    assert result.timed_out is False
    assert result.exit_code == 0
    assert result.stdout == "quick\n"


# --- tail -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "lines", "limit", "expected"),
    [
        ("", 20, 2000, ""),
        ("one\n", 20, 2000, "one"),
        ("a\nb\nc\n", 2, 2000, "b\nc"),
        ("a\nb\nc", 1, 2000, "c"),
        ("a\nb\nc\n\n\n", 2, 2000, "b\nc"),  # trailing blank lines do not count
        ("a\r\nb\r\nc\r\n", 2, 2000, "b\nc"),
        ("abcdef", 20, 3, "def"),
        ("aaaa\nbbbb\ncccc", 3, 6, "b\ncccc"),
    ],
)
def test_tail_table(text: str, lines: int, limit: int, expected: str) -> None:
    assert tail(text, lines=lines, limit=limit) == expected


def test_tail_defaults_bound_lines_and_characters() -> None:
    many = "\n".join(f"line {i}" for i in range(1000))
    out = tail(many)
    assert out.split("\n") == [f"line {i}" for i in range(980, 1000)]
    wide = "\n".join("x" * 500 for _ in range(30))
    assert len(tail(wide)) == 2000
    assert tail(wide).endswith("x" * 500)


@pytest.mark.parametrize(("lines", "limit"), [(0, 2000), (20, 0)])
def test_tail_zero_bounds_give_nothing(lines: int, limit: int) -> None:
    """Regression: at 8ccc9d9 `[-0:]` returned the whole text."""
    assert tail("a\nb\nc", lines=lines, limit=limit) == ""


@pytest.mark.parametrize(
    ("text", "lines", "limit", "expected"),
    [
        ("a\nb\nc\n", 2, 2000, "b\nc"),
        ("a\r\nb\r\nc\r\n", 2, 2000, "b\nc"),
        ("abcdef", 20, 3, "def"),
    ],
)
def test_tail_with_redaction_is_the_same_tail_when_nothing_is_secret(
    text: str, lines: int, limit: int, expected: str
) -> None:
    assert tail(text, lines=lines, limit=limit, redact=lambda t: t) == expected


def test_tail_redaction_shortening_the_window_never_brings_back_a_cut_secret() -> None:
    """A window whose redaction shrinks a lot (a long secret after the cut one) still drops
    the start the window cut in part: the kept tail is never read from it."""
    secret = "Zq8vR3mK9pL2xW7nT4bY6cH1jF5gD0sAeU3iO8"
    long_one = "L" * 8170
    text = "y" * 100 + secret + long_one + "z" * 2000
    window = 2 * 1000 + TAIL_REDACT_MARGIN
    start = len(text) - window  # inside the secret
    assert len("y" * 100) < start < 100 + len(secret)

    def redact(t: str) -> str:
        return t.replace(long_one, "[REDACTED]").replace(secret, "[REDACTED]")

    out = tail(text, lines=20, limit=1000, redact=redact)
    assert secret[start - 100 :] not in out and out == "z" * 1000


# --- keep: bounded output --------------------------------------------------------------------


def test_keep_bounds_each_stream_and_says_what_was_dropped(tmp_path: Path) -> None:
    code = (
        "import sys\nfor i in range(200000): print(f'line {i:06d}')\nsys.stderr.write('E' * 10)\n"
    )
    result = run_process([PY, "-c", code], cwd=tmp_path, keep=64 * 1024)
    out = result.stdout
    assert len(out) < 2 * 64 * 1024 + 200
    assert out.startswith("line 000000\n") and out.endswith("line 199999\n")
    head, note, tail_ = out.partition("\n[... tf-fsm: ")
    assert note and head.endswith("\n") and len(head.splitlines()[-1]) == 11, "a whole line"
    dropped = int(tail_.split(" ", 1)[0])
    kept_tail = tail_.split("...]\n", 1)[1]
    assert dropped + len(head) + len(kept_tail) == 200000 * len("line 000000\n")
    assert kept_tail.startswith("line ")  # a whole line: no line is kept in part
    assert result.stderr == "E" * 10  # under the bound: untouched


def test_keep_at_the_bound_keeps_everything(tmp_path: Path) -> None:
    code = "import sys; sys.stdout.write('a' * 2048)"
    assert run_process([PY, "-c", code], cwd=tmp_path, keep=1024).stdout == "a" * 2048
    assert len(run_process([PY, "-c", code], cwd=tmp_path, keep=1000).stdout) < 2048 + 200


def test_keep_with_a_timeout_still_kills_and_keeps_the_output(tmp_path: Path) -> None:
    code = "import sys, time; print('x' * 100000, flush=True); time.sleep(60)"
    result = run_process([PY, "-c", code], cwd=tmp_path, timeout=3, keep=1000)
    assert result.timed_out and result.exit_code is None
    assert "bytes of output dropped" in result.stdout and result.duration < 30
