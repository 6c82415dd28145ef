"""The CLI at its edges, as a user meets them: roles a phase does not use, a closed stdout
(`| head`), tickets that do not exist, a --root that is not a directory, no command at all, and
the README agreeing with the parser. Real processes (`python -m tf_fsm`), real directories."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, tk_ticket
from tf_fsm.cli.exits import EXIT_STDOUT_CLOSED, OUTCOME_CODES
from tf_fsm.cli.main import build_parser

README = Path(__file__).resolve().parent.parent / "README.md"
REVIEWERS = "reviewer-general, reviewer-spec-audit, reviewer-second-opinion"


def write_ticket(root: Path, ticket_id: str) -> Path:
    path = root / ".tickets" / f"{ticket_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(tk_ticket(ticket_id), encoding="utf-8")
    return path


# --- prompts show: --role and --attempt -------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "role", "accepts"),
    [
        ("review", "fixer", REVIEWERS),
        ("review", "reviewer-genral", REVIEWERS),
        ("verify", "closer", REVIEWERS),
        ("fix", "worker", "fixer"),
        ("implement", "reviewer-general", "worker"),
    ],
)
def test_prompts_show_with_a_role_the_phase_does_not_use_exits_2(
    phase: str, role: str, accepts: str
) -> None:
    result = run_cli("prompts", "show", phase, "--role", role)
    assert result.returncode == 2, result.stderr
    assert "internal error" not in result.stderr
    assert f"--role {role}:" in result.stderr
    assert f"{phase} accepts: {accepts}" in result.stderr
    assert result.stdout == ""


def test_prompts_show_suggests_the_role_meant() -> None:
    result = run_cli("prompts", "show", "review", "--role", "reviewer-genral")
    assert "did you mean reviewer-general?" in result.stderr


@pytest.mark.parametrize(("phase", "role"), [("review", "reviewer-spec-audit"), ("fix", "fixer")])
def test_prompts_show_with_a_role_the_phase_uses(phase: str, role: str) -> None:
    result = run_cli("prompts", "show", phase, "--role", role)
    assert result.returncode == 0, result.stderr
    assert "EXAMPLE-1" in result.stdout


@pytest.mark.parametrize("attempt", ["0", "-1"])
def test_prompts_show_attempt_below_1_exits_2(attempt: str) -> None:
    result = run_cli("prompts", "show", "fix", f"--attempt={attempt}")
    assert result.returncode == 2, result.stderr
    assert "argument --attempt: must be a whole number of at least 1" in result.stderr
    assert result.stdout == ""


# --- a closed standard output ---------------------------------------------------------------


def run_into_closed_pipe(*args: str) -> subprocess.CompletedProcess[str]:
    """tf-fsm writing into a pipe nobody reads any more, as `tf-fsm ... | head -0` does once
    head has exited (deterministic: the read end is closed before tf-fsm starts)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "tf_fsm", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args",
    [
        ("tickets", "ready"),
        ("run", "pt-1", "--plan"),
        ("run", "pt-1", "--plan", "--json"),
        ("status", "pt-1"),  # a rich table
        ("prompts", "list"),  # a rich table
        ("prompts", "show", "implement"),
    ],
)
def test_closed_stdout_exits_141_quietly(project: Path, args: tuple[str, ...]) -> None:
    for n in range(1, 4):
        write_ticket(project, f"pt-{n}")
    assert run_cli(*args).returncode == 0  # the same command, read to the end
    result = run_into_closed_pipe(*args)
    assert result.returncode == EXIT_STDOUT_CLOSED == 141
    assert result.stderr == ""


def test_a_broken_pipe_that_is_not_stdout_stays_an_internal_error(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Only a closed standard output is quiet: a pipe to some other process breaking is a bug."""
    import tf_fsm.cli.parser as cli_parser
    from tf_fsm.cli.main import main

    def broken(args: argparse.Namespace) -> int:
        raise BrokenPipeError(32, "an agent's stdin")

    monkeypatch.setattr(cli_parser, "cmd_status", broken)
    assert main(["status"]) == 1
    assert "internal error: BrokenPipeError" in capfd.readouterr().err


# --- status and gate on tickets that do not exist ----------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        ("status", "nosuch"),
        ("status", "nosuch", "--json"),
        ("gate", "nosuch"),
        ("gate", "nosuch", "--json"),
        ("gate", "pt-1", "nosuch"),
    ],
)
def test_status_and_gate_on_a_ticket_that_does_not_exist_exit_2(
    project: Path, args: tuple[str, ...]
) -> None:
    write_ticket(project, "pt-1")
    result = run_cli(*args)
    assert result.returncode == 2, result.stdout
    assert f"{project / '.tickets' / 'nosuch.md'}: ticket nosuch not found" in result.stderr
    assert "initial" not in result.stdout
    assert not (project / ".tf" / "knowledge" / "tickets" / "nosuch").exists()


def test_gate_run_on_a_ticket_that_does_not_exist_exits_2_before_any_gate(
    project: Path,
) -> None:
    marker = project / "gate-ran"
    settings = project / ".tf" / "config" / "settings.json"
    settings.write_text(
        '{"workflow": {"qualityGates": [{"name": "t", "command": "touch gate-ran"}]}}',
        encoding="utf-8",
    )
    result = run_cli("gate", "nosuch", "--run")
    assert result.returncode == 2, result.stdout
    assert "ticket nosuch not found" in result.stderr
    assert not marker.exists()


@pytest.mark.parametrize("command", ["status", "gate"])
def test_a_ticket_with_state_but_no_file_is_still_shown(project: Path, command: str) -> None:
    """A ticket deleted after it ran keeps its state directory, and `status` still shows it."""
    (project / ".tf" / "knowledge" / "tickets" / "gone-1").mkdir(parents=True)
    result = run_cli(command, "gone-1", "--json")
    assert result.returncode == 0, result.stderr
    assert '"ticket": "gone-1"' in result.stdout


@pytest.mark.parametrize("command", ["status", "gate"])
def test_a_ticket_never_run_is_shown(project: Path, command: str) -> None:
    write_ticket(project, "pt-1")
    result = run_cli(command, "pt-1", "--json")
    assert result.returncode == 0, result.stderr
    assert '"ticket": "pt-1"' in result.stdout


# --- --root and $TF_FSM_ROOT ------------------------------------------------------------------


ROOT_COMMANDS = [
    ("tickets", "ready"),
    ("status",),
    ("settings",),
    ("gate", "pt-1"),
    ("run", "pt-1", "--plan"),
    ("prompts", "list"),
    ("doctor",),
]


@pytest.mark.parametrize("args", ROOT_COMMANDS)
def test_root_that_does_not_exist_exits_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    missing = tmp_path / "does" / "not" / "exist"
    result = run_cli("--root", str(missing), *args)
    assert result.returncode == 2, result.stdout
    assert f"--root {missing}: no such directory" in result.stderr
    assert result.stdout == ""
    assert not missing.exists()


@pytest.mark.parametrize("args", ROOT_COMMANDS)
def test_root_that_is_a_file_exits_2(tmp_path: Path, args: tuple[str, ...]) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("", encoding="utf-8")
    result = run_cli(*args, "--root", str(a_file))
    assert result.returncode == 2, result.stdout
    assert f"--root {a_file}: not a directory" in result.stderr


def test_tf_fsm_root_that_does_not_exist_exits_2(tmp_path: Path) -> None:
    missing = tmp_path / "gone"
    result = run_cli("tickets", "ready", env={"TF_FSM_ROOT": str(missing)})
    assert result.returncode == 2, result.stdout
    assert f"$TF_FSM_ROOT {missing}: no such directory" in result.stderr


def test_init_creates_a_missing_root(tmp_path: Path) -> None:
    fresh = tmp_path / "a" / "b"
    result = run_cli("--root", str(fresh), "init")
    assert result.returncode == 0, result.stderr
    assert (fresh / ".tf" / "config" / "settings.json").is_file()
    assert (fresh / ".tickets").is_dir()


@pytest.mark.parametrize("below", [False, True])
def test_init_with_a_root_that_is_a_file_exits_2(tmp_path: Path, below: bool) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("", encoding="utf-8")
    root = a_file / "sub" if below else a_file
    result = run_cli("--root", str(root), "init")
    assert result.returncode == 2, result.stderr
    assert "internal error" not in result.stderr
    assert f"--root {root}: " in result.stderr
    assert a_file.read_text(encoding="utf-8") == ""


# --- no command; the help's exit codes ------------------------------------------------------


@pytest.mark.parametrize("args", [(), ("--verbose",)])
def test_no_command_is_a_usage_error(args: tuple[str, ...]) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.startswith("usage: tf-fsm")
    assert "a COMMAND is required" in result.stderr


def _readme_exit_codes() -> set[str]:
    text = README.read_text(encoding="utf-8").split("### Exit codes", 1)[1]
    return set(re.findall(r"^\| (\d+) \|", text, flags=re.MULTILINE))


def test_help_lists_the_readme_exit_codes() -> None:
    result = run_cli("--help", env={"COLUMNS": "200"})
    epilog = result.stdout.split("exit codes:", 1)[1]
    assert set(re.findall(r"^  (\d+) ", epilog, flags=re.MULTILINE)) == _readme_exit_codes()
    assert {"130", "141"} <= _readme_exit_codes()


# --- the README agrees with the parser ----------------------------------------------------------


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def _readme_rows(command: str) -> str:
    lines = README.read_text(encoding="utf-8").splitlines()
    rows = [ln for ln in lines if re.match(rf"\| `tf-fsm {command}[ `]", ln)]
    if command == "run":  # its flags have their own table
        rows += [ln for ln in lines if ln.startswith("| `--")]
    return "\n".join(rows)


@pytest.mark.parametrize("command", sorted(_subcommands()))
def test_every_command_and_option_is_in_the_readme(command: str) -> None:
    rows = _readme_rows(command)
    assert rows, f"`tf-fsm {command}` is missing from the README's commands table"
    for action in _subcommands()[command]._actions:
        longs = [o for o in action.option_strings if o.startswith("--")]
        if not longs or action.help == argparse.SUPPRESS or longs[0] in ("--help", "--root"):
            continue
        if longs[0] == "--verbose":
            continue
        assert longs[0] in rows, f"tf-fsm {command} {longs[0]} is not in the README"


def test_readme_json_statuses_are_every_outcome() -> None:
    row = next(
        ln for ln in README.read_text(encoding="utf-8").splitlines() if ln.startswith("| `--json`")
    )
    for status in OUTCOME_CODES:
        assert re.search(rf"\b{status}\b", row), status


def test_readme_links_every_doc() -> None:
    text = README.read_text(encoding="utf-8").split("## Documentation", 1)[1].split("\n## ", 1)[0]
    for doc in sorted((README.parent / "docs").glob("*.md")):
        assert f"(docs/{doc.name})" in text, doc.name


# --- status over several tickets, one of them corrupt ----------------------------------------


def test_status_shows_every_ticket_when_one_state_file_is_corrupt(
    project: Path, write_settings: Any
) -> None:
    write_settings({"executor": {"kind": "scripted", "scenario": "scenario.json"}})
    (project / "scenario.json").write_text('{"findings": []}', encoding="utf-8")
    for ticket_id in ("a-1", "b-2", "c-3"):
        write_ticket(project, ticket_id)
        assert run_cli("run", ticket_id).returncode == 0
    state = project / ".tf/knowledge/tickets/b-2/retry-state.json"
    state.write_text('{"broken', encoding="utf-8")
    result = run_cli("status", "--json")
    assert result.returncode == 2, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["ticket"], r["state"]) for r in rows] == [
        ("a-1", "closed"),
        ("b-2", "corrupt"),
        ("c-3", "closed"),
    ]
    assert str(state) in result.stderr and str(state) in rows[1]["error"]
    assert state.read_text(encoding="utf-8") == '{"broken'  # left as it was
    table = run_cli("status")
    assert table.returncode == 2 and "a-1" in table.stdout and "c-3" in table.stdout


# --- the end of the process ---------------------------------------------------------------------

_WITH_ATEXIT = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('teardown ran', file=sys.stderr))\n"
    "from tf_fsm.cli.main import entry\n"
    "sys.argv = ['tf-fsm', *sys.argv[1:]]\n"
    "raise SystemExit(entry())\n"
)


@pytest.mark.parametrize(("args", "teardown"), [(("tickets", "ready"), False), (("status",), True)])
def test_only_tickets_ends_without_the_interpreter_s_teardown(
    project: Path, args: tuple[str, ...], teardown: bool
) -> None:
    """`tickets` (read-only) ends the process at once; its output and warnings still arrive in
    full. Every other command gets the normal exit, atexit hooks and all."""
    for n in range(1, 4):
        write_ticket(project, f"pt-{n}")
    (project / ".tickets" / "stray.md").write_text("no frontmatter\n", encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-c", _WITH_ATEXIT, *args],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert ("teardown ran" in done.stderr) is teardown
    if not teardown:
        assert [line.split()[0] for line in done.stdout.splitlines()] == ["pt-1", "pt-2", "pt-3"]
        assert "stray.md: no `id:` line in its frontmatter; tk skips it" in done.stderr


def test_tickets_under_a_profiler_keeps_the_normal_exit(project: Path) -> None:
    """`python -m cProfile -m tf_fsm tickets ready` prints its profile: a profiler (or coverage)
    writes its results at the interpreter's exit, which `tickets` otherwise skips."""
    write_ticket(project, "pt-1")
    done = subprocess.run(
        [sys.executable, "-m", "cProfile", "-m", "tf_fsm", "tickets", "ready"],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("pt-1 "), done.stdout[:200]
    assert "function calls" in done.stdout  # cProfile's report, written at exit


def test_the_readme_test_command_prints_pytests_summary_line() -> None:
    """The quick start's test command, with pyproject's addopts, must end in pytest's summary
    line ("N passed"): an extra -q on top of addopts' -q makes it -qq, which prints none."""
    import re
    import shlex
    import subprocess
    import sys

    text = README.read_text(encoding="utf-8").split("Run the whole test suite", 1)[1]
    command = next(ln for ln in text.splitlines() if "-m pytest" in ln)
    args = shlex.split(command.split("-m pytest", 1)[1])
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            *args,
            "-p",
            "no:cacheprovider",
            "tests/test_cli.py::test_version_both_entry_points",
        ],
        cwd=README.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"^1 passed in [\d.]+s", done.stdout, re.MULTILINE), done.stdout
