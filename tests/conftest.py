from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from tests.e2e.conftest import Harness

DATA = Path(__file__).parent / "data"
#: the browser tests' fixtures (`browser`, `page`): tests/browser.py
pytest_plugins = ["tests.browser"]

#: the slow trials, by directory or module (relative to the repository): kill and crash soaks,
#: mutant runs, the Temporal dev server, real agent CLIs and long end-to-end runs; with every
#: test that drives a browser, they are marked `slow` and the quick command
#: (`-m "not slow"`, README) leaves them out. The full command runs them all.
SLOW = (
    "tests/crash/",
    "tests/temporal/",
    "tests/e2e/",
    "tests/workspace/",
    "tests/conformance/test_mutants.py",
    # more than 10 s of test time each in a quick run on 2 cores: many tf-fsm processes,
    # real git repositories and worktrees, the board's server
    *(
        f"tests/test_{name}.py"
        for name in (
            "backlog_scan", "bad_numbers", "cli_commands", "cli_edges", "diagrams",
            "gate_audit", "gate_warnings", "one_answer", "one_decision",
            "plan_gates", "prompt_audit", "prompt_sandbox", "prompts", "ralph",
            "reset_command", "resume", "status_all", "stop_command", "terminal_safety",
            "transient", "ui", "ui_board", "ui_edit_http", "ui_limits", "ui_work_actions",
            "workspace_views", "workspaces_cmd",
        )
    ),
)  # fmt: skip
BROWSER_FIXTURES = {"browser", "page"}

# A test run started in the background (`pytest ... &` in a script) inherits SIGINT ignored, and
# so would every tf-fsm it starts: the tests that interrupt a run, a loop or watch as Ctrl-C
# does would wait in vain. Python's own handler here gives the processes it starts the default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        where = item.path.relative_to(config.rootpath).as_posix()
        if where.startswith(SLOW) or BROWSER_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)


def tk_ticket(
    ticket_id: str,
    title: str = "Add a depth limit to the parser",
    body: str = "The parser recurses without bound on nested input.",
    tags: str = "[component:parser]",
) -> str:
    """A ticket file as `tk create` writes it."""
    return (
        f"---\nid: {ticket_id}\nstatus: open\ndeps: []\nlinks: []\n"
        f"created: 2026-02-10T12:00:00Z\ntype: task\npriority: 2\ntags: {tags}\n---\n"
        f"# {title}\n\n{body}\n"
    )


@pytest.fixture(autouse=True)
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test gets its own empty project root, and tf_fsm is pointed at it."""
    root = tmp_path / "project"
    (root / ".tf" / "config").mkdir(parents=True)
    monkeypatch.setenv("TF_FSM_ROOT", str(root))
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def temp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's own TMPDIR, for every process it starts (to see what is left in it), and no
    PYTEST_ADDOPTS of the run that runs the test."""
    place = tmp_path / "temp"
    place.mkdir()
    monkeypatch.setenv("TMPDIR", str(place))
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)
    return place


@pytest.fixture
def plain_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pytest a test's own project runs (its gate) loads none of this venv's plugins, as
    the project's own would not: it needs none, and their imports (hypothesis's above all)
    cost about a second per pytest start."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


@pytest.fixture
def write_settings(project: Path) -> Callable[[dict[str, Any]], Path]:
    def write(data: dict[str, Any]) -> Path:
        path = project / ".tf" / "config" / "settings.json"
        path.write_text(json.dumps(data, indent=2), encoding="utf-8")
        return path

    return write


@pytest.fixture
def e2e(project: Path, tmp_path: Path, write_settings: Callable[..., Path]) -> Harness:
    """The end-to-end harness (tests/e2e/conftest.py) on this test's project."""
    from tests.e2e.conftest import Harness

    return Harness(project, tmp_path, write_settings)


def run_cli(
    *args: str, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """tf-fsm as a real process, the way a user runs it."""
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "tf_fsm", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def run_with_terminal_stderr(
    argv: list[str], env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], str]:
    """tf-fsm (`python -m tf_fsm` + argv) with its stderr on a pseudo-terminal, as a user
    watching a live view has it: the process, and everything the terminal received."""
    import pty
    import threading

    master, slave = pty.openpty()
    seen = bytearray()

    def drain() -> None:  # a full pty would block the writes
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:
                return
            if not chunk:
                return
            seen.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    done = subprocess.run(
        [sys.executable, "-m", "tf_fsm", *argv],
        env={**os.environ, **env},
        stderr=slave,
        stdout=subprocess.PIPE,
        text=True,
        timeout=60,
        check=False,
    )
    os.close(slave)
    reader.join(timeout=5)
    os.close(master)
    return done, seen.decode("utf-8", "replace")


def wait_for(condition: Callable[[], object], timeout: float, what: str) -> None:
    """Until `condition()` is true, polled; fails naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(0.05)


@contextmanager
def lock_held_elsewhere(
    project: Path, ticket: str = "pt-1", note: str | None = None
) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the ticket's lock, as a run of it would (`note`: the lock's
    note, as `tf-fsm watch` leaves one)."""
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from pathlib import Path\n"
            "from tf_fsm.storage.store import TicketStore\n"
            f"with TicketStore(Path('.tf/knowledge'), {ticket!r}).lock({note!r}):\n"
            "    print('READY', flush=True); time.sleep(30)",
        ],
        cwd=project,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "READY"
        yield holder
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
