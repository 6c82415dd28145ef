"""Audit fixes: unreadable template overrides, `run --plan --retry-reset`, `prompts show
--ticket/--attempt` and the real artifact names, `doctor` resolving models as a run does."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli, tk_ticket

NEVER = {"id": "N", "severity": "Major", "text": "`src/parser.py:42` - unbounded", "fixedBy": []}
TICKET_DIR = Path(".tf/knowledge/tickets/pt-1")


def setup(project: Path, findings: list[dict[str, Any]], max_retries: int = 3) -> None:
    (project / ".tickets").mkdir(exist_ok=True)
    (project / ".tickets/pt-1.md").write_text(tk_ticket("pt-1"))
    (project / "scenario.json").write_text(json.dumps({"findings": findings}))
    settings = {
        "workflow": {
            "failOn": ["Critical", "Major"],
            "escalation": {"enabled": True, "maxRetries": max_retries},
        },
        "executor": {"kind": "scripted", "scenario": "scenario.json"},
    }
    (project / ".tf/config/settings.json").write_text(json.dumps(settings))


def files(project: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in project.rglob("*") if p.is_file()}


# -- 1. a template override that is not UTF-8 ------------------------------------------------


@pytest.mark.parametrize("name", ["tf-fix.md.j2", "_context.md.j2"])
def test_a_template_that_is_not_utf8_is_bad_input_naming_the_file(project: Path, name: str) -> None:
    setup(project, [])
    (project / ".tf/prompts").mkdir()
    bad = project / ".tf/prompts" / name
    bad.write_bytes(b"caf\xe9 {{ output }}")
    commands = [("prompts", "show", "fix"), ("run", "pt-1", "--plan"), ("run", "pt-1")]
    if name == "tf-fix.md.j2":  # `list` reads each role's own template, not the includes
        commands.insert(0, ("prompts", "list"))
    for args in commands:
        result = run_cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert f"prompt template {bad}:1: not valid UTF-8 (byte 3" in result.stderr, args
        assert "internal error" not in result.stderr
    assert not (project / TICKET_DIR / "retry-state.json").exists()
    assert "status: open" in (project / ".tickets/pt-1.md").read_text()


# -- 2. run --plan --retry-reset -------------------------------------------------------------


def test_plan_with_retry_reset_shows_the_reset_and_attempt_1_writing_nothing(
    project: Path,
) -> None:
    setup(project, [NEVER], max_retries=1)
    assert run_cli("run", "pt-1").returncode == 4  # exhausted
    plain = json.loads(run_cli("run", "pt-1", "--plan", "--json").stdout)
    assert plain["action"] == "exhausted" and "retryReset" not in plain
    before = files(project)
    result = run_cli("run", "pt-1", "--plan", "--retry-reset", "--json")
    text = run_cli("run", "pt-1", "--retry-reset", "--plan")
    assert files(project) == before, "--plan --retry-reset changed files"
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["action"], data["attempt"], data["trigger"], data["tier"]) == (
        "new_attempt",
        1,
        "initial",
        1,
    )
    assert data["priorFailure"] is False and "sameFailure" not in data
    assert re.fullmatch(r"retry-state\.json\.bak\.\d{8}T\d{6}Z", data["retryReset"]["backup"])
    assert text.returncode == 0, text.stderr
    assert "--retry-reset: retry-state.json would be moved aside to retry-state.json.bak." in (
        text.stdout
    )
    assert "new attempt: first attempt" in text.stdout and "exhausted" not in text.stdout
    # ... and it is what the run then does
    ran = run_cli("run", "pt-1", "--retry-reset", "--once")
    assert "after attempt 1 " in ran.stderr + ran.stdout
    backups = list((project / TICKET_DIR).glob("retry-state.json.bak.*"))
    assert len(backups) == 1


def test_plan_with_retry_reset_over_a_corrupt_state_file(project: Path) -> None:
    setup(project, [])
    state = project / TICKET_DIR / "retry-state.json"
    state.parent.mkdir(parents=True)
    state.write_text("{")
    refused = run_cli("run", "pt-1", "--plan")
    assert refused.returncode == 2 and "--retry-reset" in refused.stderr
    result = run_cli("run", "pt-1", "--plan", "--retry-reset", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert (data["action"], data["attempt"]) == ("new_attempt", 1)
    assert data["retryReset"]["backup"].startswith("retry-state.json.bak.")
    assert state.read_text() == "{" and not list(state.parent.glob("*.bak.*"))
    fresh = run_cli("run", "pt-2", "--plan", "--retry-reset", "--json")  # no state: no backup
    assert fresh.returncode == 2  # no such ticket
    (project / ".tickets/pt-2.md").write_text(tk_ticket("pt-2"))
    fresh = run_cli("run", "pt-2", "--plan", "--retry-reset", "--json")
    assert json.loads(fresh.stdout)["retryReset"]["backup"] is None


# -- 3. prompts show --ticket / --attempt, and the real artifact names ----------------------


def test_prompts_show_for_a_ticket_no_attempt_would_run_on(project: Path) -> None:
    setup(project, [NEVER], max_retries=1)
    assert run_cli("run", "pt-1").returncode == 4  # attempt 1 blocked, no retry allowed
    none = run_cli("prompts", "show", "fix", "--ticket", "pt-1")
    assert none.returncode == 2 and none.stdout == ""
    assert "pt-1: no attempt would run (exhausted: max retries (1) exceeded" in none.stderr
    assert "--attempt N" in none.stderr and str(project / TICKET_DIR / "prompts") in none.stderr
    ran = run_cli("prompts", "show", "fix", "--ticket", "pt-1", "--attempt", "1")
    assert ran.returncode == 2 and "attempt 1 already ran" in ran.stderr
    later = run_cli("prompts", "show", "fix", "--ticket", "pt-1", "--attempt", "2")
    assert later.returncode == 0, later.stderr
    assert "EXAMPLE-1" not in later.stdout and "example finding" not in later.stdout
    assert "# Fix: pt-1" in later.stdout and "- Attempt: 2 (trigger: quality_gate" in later.stdout
    assert "Attempt 1 was blocked" in later.stdout and "src/parser.py:42" in later.stdout
    assert f"- Write: `{project / TICKET_DIR / 'fixes.md'}`" in later.stdout


def test_prompts_show_for_a_closed_ticket_and_a_conflicting_attempt(project: Path) -> None:
    setup(project, [])
    conflict = run_cli("prompts", "show", "fix", "--ticket", "pt-1", "--attempt", "2")
    assert conflict.returncode == 2 and conflict.stdout == ""
    assert "--attempt 2 --ticket pt-1: the ticket's next attempt is 1" in conflict.stderr
    same = run_cli("prompts", "show", "verify", "--ticket", "pt-1", "--attempt", "1")
    assert same.returncode == 0, same.stderr
    assert str(project / TICKET_DIR / "post-fix-review-general.md") in same.stdout
    assert run_cli("run", "pt-1").returncode == 0  # closed
    closed = run_cli("prompts", "show", "fix", "--ticket", "pt-1")
    assert closed.returncode == 2 and closed.stdout == ""
    assert "no attempt would run (already closed" in closed.stderr


def test_prompts_show_without_a_project_but_with_a_ticket(tmp_path: Path) -> None:
    result = run_cli(
        "prompts", "show", "fix", "--ticket", "pt-1", cwd=tmp_path, env={"TF_FSM_ROOT": ""}
    )
    assert result.returncode == 2, result.stderr
    assert "no tf_fsm project found" in result.stderr and "internal error" not in result.stderr


@pytest.mark.parametrize(
    ("args", "output"),
    [
        (("fix",), "fixes.md"),
        (("review",), "review-general.md"),
        (("review", "--role", "reviewer-spec-audit"), "review-spec.md"),
        (("verify", "--role", "reviewer-second-opinion"), "post-fix-review-second.md"),
        (("research",), "research.md"),
        (("close",), "close-notes.md"),
    ],
)
def test_example_prompts_name_the_real_artifact(args: tuple[str, ...], output: str) -> None:
    result = run_cli("prompts", "show", *args)
    assert result.returncode == 0, result.stderr
    assert f"- Write: `<artifact dir>/{output}`" in result.stdout


# -- 4. doctor resolves models as a run does -------------------------------------------------


def test_doctor_uses_template_frontmatter_and_names_every_role(
    tmp_path: Path, project: Path, write_settings: Callable[..., Path]
) -> None:
    pi = tmp_path / "pi"
    pi.write_text("#!/bin/sh\necho 0.73.1\n")
    pi.chmod(0o755)
    write_settings({"executor": {"preset": "pi", "program": str(pi)}})
    (project / ".tf/prompts").mkdir()
    for name in ("tf-implement.md.j2", "tf-fix.md.j2"):
        (project / ".tf/prompts" / name).write_text(
            "---\nmodel: acme/pro\nthinking: max\n---\nDo {{ ticket.id }} into {{ output }}\n"
        )
    result = run_cli("doctor", "--json")
    assert result.returncode == 3, result.stdout + result.stderr
    data = json.loads(result.stdout)
    commands = {c["role"]: c for c in data["commands"]}
    for role in ("worker", "fixer"):
        assert commands[role]["argv"][-2:] == ["--model", "acme/pro"]  # no --thinking
        assert (commands[role]["model"], commands[role]["thinking"]) == ("acme/pro", "max")
        assert any(p.startswith(f"{role} (attempt 1): thinking 'max'") for p in data["problems"])
    text = run_cli("doctor")
    assert text.returncode == 3 and "ok:" not in text.stdout
    assert text.stdout.count("cannot map:") == 2
    # the same models as the run would use
    (project / ".tickets").mkdir()
    (project / ".tickets/pt-1.md").write_text(tk_ticket("pt-1"))
    planned = json.loads(run_cli("run", "pt-1", "--plan", "--json").stdout)
    for phase in planned["phases"]:
        for call in phase["invocations"]:
            command = commands[call["role"]]
            assert (command["model"], command["thinking"]) == (call["model"], call["thinking"])
