"""The `tf-fsm` commands as a user runs them: real processes (`python -m tf_fsm`), real files."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, tk_ticket
from tf_fsm.core.state import SEVERITIES
from tf_fsm.settings.load import load_settings

DOCS = Path(__file__).resolve().parent.parent / "docs"
STRONG = "openai-codex/gpt-5.3-codex"

TICKET = tk_ticket("{id}")


def write_ticket(root: Path, ticket_id: str = "pt-1") -> Path:
    path = root / ".tickets" / f"{ticket_id}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TICKET.format(id=ticket_id), encoding="utf-8")
    return path


def ticket_dir(root: Path, ticket_id: str = "pt-1") -> Path:
    return root / ".tf" / "knowledge" / "tickets" / ticket_id


def json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Any]:
    """One `tf-fsm demo --dir` run, shared by the read-only tests below."""
    where = tmp_path_factory.mktemp("demo") / "project"
    result = run_cli("demo", "--dir", str(where), env={"TF_FSM_ROOT": ""})
    return where, result


# --- init -----------------------------------------------------------------------------------


def _leaf_keys(data: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out += _leaf_keys(value, f"{dotted}.")
        else:
            out.append(dotted)
    return out


@pytest.mark.parametrize("how", ["--root", "cwd"])
def test_init_writes_loadable_settings_and_tickets_dir(tmp_path: Path, how: str) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    if how == "--root":
        result = run_cli("--root", str(fresh), "init")
    else:
        result = run_cli("init", cwd=fresh, env={"TF_FSM_ROOT": ""})
    assert result.returncode == 0, result.stderr
    path = fresh / ".tf" / "config" / "settings.json"
    assert f"wrote {path}" in result.stdout
    assert (fresh / ".tickets").is_dir()
    assert list((fresh / ".tickets").iterdir()) == []
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["executor"]["command"] is None
    assert data["executor"]["kind"] == "command"
    loaded = load_settings(fresh)
    assert loaded.path == path
    assert loaded.warnings == ()
    assert loaded.workflow.failOn == ["Critical", "Major"]
    assert loaded.settings.executor.timeoutSeconds == 1800
    settings = run_cli("--root", str(fresh), "settings")
    assert settings.returncode == 0
    assert "warning" not in settings.stderr


def test_second_init_exits_2_and_keeps_the_file(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert run_cli("--root", str(fresh), "init").returncode == 0
    path = fresh / ".tf" / "config" / "settings.json"
    path.write_bytes(path.read_bytes() + b"\n")  # a user's edit; init must not touch it
    before = path.read_bytes()
    mtime = path.stat().st_mtime_ns
    again = run_cli("--root", str(fresh), "init")
    assert again.returncode == 2
    assert "already exists" in again.stderr
    assert str(path) in again.stderr
    assert path.read_bytes() == before
    assert path.stat().st_mtime_ns == mtime
    assert again.stdout == ""


def test_every_init_key_is_documented(tmp_path: Path) -> None:
    assert run_cli("--root", str(tmp_path), "init").returncode == 0
    data = json.loads((tmp_path / ".tf/config/settings.json").read_text(encoding="utf-8"))
    doc = (DOCS / "settings.md").read_text(encoding="utf-8")
    spans = re.findall(r"`([^`\n]+)`", doc)
    missing = []
    for dotted in _leaf_keys(data):
        parts = dotted.split(".")
        if parts[0] == "agents":
            continue  # role names: the agents table documents each role
        if parts[0] == "metaModels":
            parts = parts[2:]  # metaModels names are the user's; their fields are documented
        leaf = parts[-1]
        word = re.compile(rf"(?<![\w-]){re.escape(leaf)}(?![\w-])")
        if not any(word.search(span) for span in spans):
            missing.append(dotted)
    assert missing == []
    for expected in ("maxRetries", "postFixVerification", "timeoutSeconds", "tf-implement"):
        assert expected in {k.split(".")[-1] for k in _leaf_keys(data)}


# --- demo, status, gate ---------------------------------------------------------------------


def test_status_json_on_demo(demo: tuple[Path, Any]) -> None:
    where, _ = demo
    result = run_cli("--root", str(where), "status", "--json")
    assert result.returncode == 0, result.stderr
    rows = json_lines(result.stdout)
    assert len(rows) == 1 == len(result.stdout.splitlines())
    row = rows[0]
    assert row["ticket"] == "demo-1"
    assert row["state"] == "closed"
    assert row["attempt"] == 2
    assert row["retryCount"] == 0
    assert row["escalatedRoles"] == ["fixer"]
    assert row["lastFailure"] is None
    named = run_cli("--root", str(where), "status", "demo-1", "--json")
    assert json_lines(named.stdout) == rows


def test_status_table_on_demo(demo: tuple[Path, Any]) -> None:
    where, _ = demo
    result = run_cli("--root", str(where), "status")
    assert result.returncode == 0
    row = next(ln for ln in result.stdout.splitlines() if "demo-1" in ln)
    assert "closed" in row
    assert "reset on close" in row
    assert "fixer" in row


def test_status_without_tickets(project: Path) -> None:
    result = run_cli("status")
    assert result.returncode == 0
    assert result.stdout.strip() == "no tickets have been run yet"
    assert run_cli("status", "--json").stdout == ""


_STATUS_PROBE = """\
import sys
from tf_fsm.cli.main import main
try:
    code = main(["status"])
except SystemExit as exc:
    code = exc.code
print("EXIT", code)
print("PYDANTIC", "pydantic" in sys.modules)
"""


def _status_probe(root: Path) -> list[str]:
    """`tf-fsm status` in a fresh interpreter: its output lines, exit code, and whether it
    imported pydantic (the start-up budget's cost, issue #10)."""
    done = subprocess.run(
        [sys.executable, "-c", _STATUS_PROBE], cwd=root, capture_output=True, text=True, timeout=60
    )
    return done.stdout.splitlines()


def test_status_after_init_answers_from_the_settings_record(project: Path) -> None:
    assert run_cli("init").returncode == 0
    record = project / ".tf" / "cache" / "settings-checked.json"
    assert json.loads(record.read_text())["knowledgeDir"] == ".tf/knowledge"
    assert _status_probe(project) == ["no tickets have been run yet", "EXIT 0", "PYDANTIC False"]


def test_status_validates_settings_the_record_does_not_vouch_for(project: Path) -> None:
    assert run_cli("init").returncode == 0
    record = project / ".tf" / "cache" / "settings-checked.json"
    before = record.read_bytes()
    settings = project / ".tf" / "config" / "settings.json"
    data = json.loads(settings.read_text())
    data["workflow"]["failOn"] = ["Bogus"]
    settings.write_text(json.dumps(data, indent=2))
    result = run_cli("status")
    assert result.returncode == 2
    assert "workflow.failOn" in result.stderr and str(settings) in result.stderr
    assert record.read_bytes() == before  # status writes nothing, the record included
    # Valid again but changed: loaded properly (pydantic), and still not recorded by status.
    data["workflow"]["failOn"] = ["Critical"]
    settings.write_text(json.dumps(data, indent=2))
    assert _status_probe(project) == ["no tickets have been run yet", "EXIT 0", "PYDANTIC True"]
    assert record.read_bytes() == before


def test_status_record_follows_the_knowledge_dir_and_survives_garbage(project: Path) -> None:
    assert run_cli("init").returncode == 0
    record = project / ".tf" / "cache" / "settings-checked.json"
    (project / ".tf" / "knowledge" / "tickets" / "pt-1").mkdir(parents=True)
    # The record says where tickets live: a ticket directory there is a row to load.
    assert _status_probe(project)[-1] == "PYDANTIC True"
    record.write_text("{not json")
    lines = _status_probe(project)
    assert lines[-2:] == ["EXIT 0", "PYDANTIC True"], lines
    # A command that writes anyway (init's own check, run, ralph, watch) records it again.
    from tf_fsm.settings.load import load_settings

    load_settings(project, record=True)
    assert json.loads(record.read_text())["knowledgeDir"] == ".tf/knowledge"


def test_gate_json_on_demo(demo: tuple[Path, Any]) -> None:
    where, _ = demo
    result = run_cli("--root", str(where), "gate", "demo-1", "--json")
    assert result.returncode == 0, result.stderr
    rows = json_lines(result.stdout)
    assert len(rows) == 1 == len(result.stdout.splitlines())
    row = rows[0]
    assert {"ticket", "blocked", "status", "source", "counts", "reason"} <= set(row)
    assert row["ticket"] == "demo-1"
    assert row["blocked"] is False
    assert row["status"] == "closed"
    assert row["source"] == "close-summary.md"
    assert list(row["counts"]) == list(SEVERITIES)
    assert row["counts"] == {"Critical": 0, "Major": 0, "Minor": 0, "Warnings": 0, "Suggestions": 1}
    assert row["reason"] == "close-summary.md says CLOSED"


def test_gate_on_two_tickets_prints_two_lines(demo: tuple[Path, Any], tmp_path: Path) -> None:
    where = tmp_path / "demo"
    shutil.copytree(demo[0], where)
    write_ticket(where, "never-run")  # a ticket file, no state: `gate` reports it, not found
    result = run_cli("--root", str(where), "gate", "demo-1", "never-run", "--json")
    assert result.returncode == 0, result.stderr
    rows = json_lines(result.stdout)
    assert len(result.stdout.splitlines()) == 2
    assert [r["ticket"] for r in rows] == ["demo-1", "never-run"]
    assert rows[1]["blocked"] is False
    assert rows[1]["source"] == "none"
    human = run_cli("--root", str(where), "gate", "demo-1", "never-run")
    assert human.returncode == 0
    assert human.stdout.startswith("demo-1: not blocked (status closed, from close-summary.md)")
    assert "\nnever-run: not blocked" in human.stdout


@pytest.mark.parametrize("command", [["gate", "demo-1", "--json"], ["status", "--json"]])
def test_root_after_the_subcommand(demo: tuple[Path, Any], command: list[str]) -> None:
    """Regression: at 8ccc9d9 --root was accepted only before the subcommand."""
    where, _ = demo
    result = run_cli(*command, "--root", str(where), env={"TF_FSM_ROOT": ""})
    assert result.returncode == 0, result.stderr
    assert json_lines(result.stdout)[0]["ticket"] == "demo-1"


def test_run_with_unreadable_scenario_exits_2(
    project: Path, write_settings: Callable[[dict[str, Any]], Path]
) -> None:
    (project / "scenarios").mkdir()
    write_settings({"executor": {"kind": "scripted", "scenario": "scenarios"}})
    write_ticket(project)
    result = run_cli("run", "pt-1")
    assert result.returncode == 2, result.stderr
    assert "executor.scenario" in result.stderr
    assert "internal error" not in result.stderr
    assert not (ticket_dir(project) / "retry-state.json").exists()


@pytest.mark.parametrize(
    "args",
    [
        ("gate", "../x"),
        ("gate", "demo-1", "../x", "--json"),
        ("status", "../x"),
        ("status", "../x", "--json"),
        ("run", "../x"),
    ],
)
def test_invalid_ticket_id_exits_2(project: Path, args: tuple[str, ...]) -> None:
    result = run_cli(*args)
    assert result.returncode == 2
    assert "invalid ticket id '../x'" in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert not (project / ".tf" / "knowledge").exists()


# --- run: executor checks and flags -----------------------------------------------------------


def test_run_with_missing_agent_program_exits_2(
    project: Path, write_settings: Callable[[dict[str, Any]], Path]
) -> None:
    write_settings(
        {"executor": {"kind": "command", "command": ["definitely-not-a-real-agent-xyz"]}}
    )
    ticket = write_ticket(project)
    before = ticket.read_bytes()
    result = run_cli("run", "pt-1")
    assert result.returncode == 2
    assert "executor.command" in result.stderr
    assert "definitely-not-a-real-agent-xyz" in result.stderr
    assert "not found on PATH" in result.stderr
    assert not (ticket_dir(project) / "retry-state.json").exists()
    assert ticket.read_bytes() == before  # not even set to in_progress


def test_run_without_executor_command_exits_2(
    project: Path, write_settings: Callable[[dict[str, Any]], Path]
) -> None:
    write_settings({})
    write_ticket(project)
    result = run_cli("run", "pt-1")
    assert result.returncode == 2
    assert "executor.command" in result.stderr
    assert "is not set" in result.stderr
    assert not (ticket_dir(project) / "retry-state.json").exists()


def test_run_help_lists_flags_and_exit_codes() -> None:
    result = run_cli("run", "--help", env={"COLUMNS": "200"})
    assert result.returncode == 0
    for flag in ("--no-research", "--with-research", "--once", "--retry-reset"):
        assert flag in result.stdout
    codes = re.findall(r"^\s+(\d+)\s", result.stdout.split("exit codes:")[1], re.MULTILINE)
    assert codes == ["0", "1", "2", "3", "4", "5", "6", "7", "69", "74", "75", "130", "141"]


@pytest.mark.parametrize(
    ("flags", "research"),
    [
        (["--no-research", "--with-research"], True),
        (["--with-research", "--no-research"], False),
        (["--no-research"], False),
        (["--with-research"], True),
        ([], None),
    ],
)
def test_last_research_flag_wins(
    project: Path,
    write_settings: Callable[[dict[str, Any]], Path],
    flags: list[str],
    research: bool | None,
) -> None:
    write_settings({"executor": {"kind": "scripted"}})
    write_ticket(project)
    result = run_cli("run", "pt-1", "--once", *flags)
    assert result.returncode == 3, result.stderr  # the demo scenario blocks attempt 1
    context = json.loads((ticket_dir(project) / "chain-context.json").read_text("utf-8"))
    assert context["flags"]["research"] is research
    assert context["flags"]["once"] is True
    assert context["phases"]["research"]["runs"] is (research is not False)
    assert (ticket_dir(project) / "research.md").exists() is (research is not False)


@pytest.mark.parametrize(
    "content",
    [b'{"version": 1, "ticketId": ', b"[]", b"", b"\xff\xfe", b'{"version": 1}'],
)
@pytest.mark.parametrize("command", [["status"], ["status", "pt-1", "--json"], ["run", "pt-1"]])
def test_corrupt_retry_state_exits_2_and_is_left_untouched(
    project: Path,
    write_settings: Callable[[dict[str, Any]], Path],
    content: bytes,
    command: list[str],
) -> None:
    write_settings({"executor": {"kind": "scripted"}})
    write_ticket(project)
    path = ticket_dir(project) / "retry-state.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(content)
    mtime = path.stat().st_mtime_ns
    result = run_cli(*command)
    assert result.returncode == 2, result.stderr
    assert str(path) in result.stderr
    assert "--retry-reset" in result.stderr
    assert "Traceback" not in result.stderr
    assert path.read_bytes() == content
    assert path.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith("retry-state")) == [
        "retry-state.json"
    ]
