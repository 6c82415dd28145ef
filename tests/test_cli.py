from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.conftest import DATA, run_cli
from tf_fsm import __version__


def test_version_both_entry_points() -> None:
    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"tf-fsm {__version__}"


def test_help_documents_exit_codes() -> None:
    result = run_cli("--help")
    assert result.returncode == 0
    assert "exit codes:" in result.stdout
    assert "settings" in result.stdout


def test_help_wraps_at_the_terminal_width_from_columns() -> None:
    """The width comes from $COLUMNS as shutil would give it, without importing shutil."""
    for columns in (50, 120):
        result = run_cli("tickets", "--help", env={"COLUMNS": str(columns)})
        options = result.stdout.split("\noptions:\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert max(len(line) for line in options) <= columns - 2
        assert max(len(line) for line in options) > 48 or columns == 50, options


def test_usage_error_exits_2() -> None:
    result = run_cli("no-such-command")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_settings_shows_escalation_per_attempt(
    write_settings: Callable[[dict[str, Any]], Path],
) -> None:
    write_settings(
        {
            "metaModels": {"strong": {"model": "openai-codex/gpt-5.3-codex", "thinking": "high"}},
            "workflow": {"escalation": {"enabled": True, "models": {"fixer": "strong"}}},
        }
    )
    result = run_cli("settings", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    fixer = data["roles"]["fixer"]["byAttempt"]
    assert fixer["1"] == "zai/glm-5"
    assert fixer["2"] == fixer["3"] == "openai-codex/gpt-5.3-codex"
    assert data["roles"]["worker"]["byAttempt"]["3"] == data["roles"]["worker"]["model"]
    table = run_cli("settings")
    assert table.returncode == 0
    assert "openai-codex/gpt-5.3-codex *" in table.stdout


def test_settings_shows_a_template_frontmatter_model_as_a_run_would_use_it(
    project: Path, write_settings: Callable[[dict[str, Any]], Path]
) -> None:
    write_settings(
        {
            "metaModels": {"strong": {"model": "openai-codex/gpt-5.3-codex"}},
            "workflow": {"escalation": {"enabled": True, "models": {"fixer": "strong"}}},
        }
    )
    (project / ".tf/prompts").mkdir()
    (project / ".tf/prompts/tf-fix.md.j2").write_text("---\nmodel: p/fm-fixer\n---\nFix it.\n")
    data = json.loads(run_cli("settings", "--json").stdout)
    fixer = data["roles"]["fixer"]
    assert fixer["frontmatter"] == "p/fm-fixer" and fixer["model"] == "zai/glm-5"
    assert fixer["byAttempt"] == {
        "1": "p/fm-fixer",
        "2": "openai-codex/gpt-5.3-codex",
        "3": "openai-codex/gpt-5.3-codex",
    }
    assert data["roles"]["worker"]["frontmatter"] is None
    table = run_cli("settings").stdout
    assert "p/fm-fixer ^" in table and "openai-codex/gpt-5.3-codex *" in table


def test_settings_on_pi_ticketflow_file_warns_but_succeeds(project: Path) -> None:
    (project / ".tf/config/settings.json").write_bytes(
        (DATA / "pi-ticketflow/package-settings.json").read_bytes()
    )
    result = run_cli("settings")
    assert result.returncode == 0
    assert (
        "warning: workflow.enableQualityGate is true but workflow.failOn is empty" in result.stderr
    )
    assert "kimi-coding/k2p5" in result.stdout


def test_settings_typo_exits_2_naming_file_key_and_fix(
    write_settings: Callable[[dict[str, Any]], Path],
) -> None:
    path = write_settings({"workflow": {"escalation": {"maxRetry": 3}}})
    result = run_cli("settings")
    assert result.returncode == 2
    assert str(path) in result.stderr
    assert "workflow.escalation.maxRetry: unknown key (did you mean maxRetries?)" in result.stderr
    assert "Traceback" not in result.stderr


def test_no_project_exits_2(tmp_path: Path) -> None:
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    result = run_cli("settings", cwd=lonely, env={"TF_FSM_ROOT": ""})
    assert result.returncode == 2
    assert "no tf_fsm project found" in result.stderr


def test_root_flag_overrides_env(
    tmp_path: Path, write_settings: Callable[[dict[str, Any]], Path]
) -> None:
    other = tmp_path / "other"
    (other / ".tf/config").mkdir(parents=True)
    (other / ".tf/config/settings.json").write_text('{"workflow": {"failOn": ["minor"]}}')
    result = run_cli("--root", str(other), "settings", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["failOn"] == ["Minor"]
