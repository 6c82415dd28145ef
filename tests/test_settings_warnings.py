"""Settings pi-ticketflow honours and tf_fsm does not act on load, and each one the project's
file sets draws a warning naming it and saying that tf_fsm ignores it (docs/settings.md)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA, run_cli, tk_ticket
from tf_fsm.settings.load import settings_from_dict

WriteSettings = Callable[[dict[str, Any]], Path]

#: (the settings file's content, the dotted key its warning names)
IGNORED = [
    ({"checkers": {"python": {"lint": "ruff check {files}"}}}, "checkers"),
    ({"workflow": {"clarifyDefault": True}}, "workflow.clarifyDefault"),
    ({"workflow": {"mcpServers": ["exa"]}}, "workflow.mcpServers"),
    ({"workflow": {"researchParallelAgents": 3}}, "workflow.researchParallelAgents"),
    ({"workflow": {"exclude": ["dist/**"]}}, "workflow.exclude"),
    ({"workflow": {"chainMode": "auto"}}, "workflow.chainMode"),
    ({"agents": {"review-merge": "general"}}, "agents.review-merge"),
    ({"agents": {"researcher-fetch": "research"}}, "agents.researcher-fetch"),
]


def _ignored_warnings(warnings: tuple[str, ...] | list[str]) -> list[str]:
    return [w for w in warnings if "tf_fsm ignores" in w]


@pytest.mark.parametrize(("raw", "key"), IGNORED, ids=[k for _, k in IGNORED])
def test_each_ignored_key_the_file_sets_warns_once(raw: dict[str, Any], key: str) -> None:
    loaded = settings_from_dict(raw)
    [warning] = _ignored_warnings(loaded.warnings)
    assert warning.startswith(f"{key} is set, but tf_fsm ignores it")


#: pi-ticketflow's worktree keys: tf_fsm acts on them (docs/workspaces.md), so no warning
WORKTREE_KEYS = {
    "parallelWorktreesDir": "w",
    "parallelKeepWorktrees": True,
    "parallelAutoMerge": False,
    "serialUseWorktree": True,
}


def test_pi_ticketflow_s_worktree_keys_are_read_without_a_warning() -> None:
    loaded = settings_from_dict({"ralph": WORKTREE_KEYS})
    assert _ignored_warnings(loaded.warnings) == []
    assert {k: getattr(loaded.settings.ralph, k) for k in WORKTREE_KEYS} == WORKTREE_KEYS


@pytest.mark.parametrize("key", sorted(WORKTREE_KEYS))
def test_a_worktree_key_of_the_wrong_type_is_refused_naming_it(key: str) -> None:
    from tf_fsm.errors import SettingsError

    wrong = 5 if key == "parallelWorktreesDir" else "yes"
    with pytest.raises(SettingsError, match=f"ralph.{key}"):
        settings_from_dict({"ralph": {key: wrong}})


def test_prompts_other_than_the_worker_s_are_one_warning_listing_them() -> None:
    prompts = {"tf-implement": "worker", "tf": "general", "tf-plan": "worker", "tf-next": "fast"}
    loaded = settings_from_dict({"prompts": prompts})
    assert _ignored_warnings(loaded.warnings) == [
        "prompts.tf, prompts.tf-plan, prompts.tf-next are set, but tf_fsm ignores them: it "
        "reads only the worker's entry (prompts.tf-implement, else prompts.tf)"
    ]
    # the worker's own entry, whichever of the two it is, is never in the list
    for worker_only in ({"tf-implement": "worker"}, {"tf": "worker"}):
        assert _ignored_warnings(settings_from_dict({"prompts": worker_only}).warnings) == []


def test_a_key_the_file_does_not_set_draws_no_warning() -> None:
    assert _ignored_warnings(settings_from_dict({}).warnings) == []
    # A key the file sets to its default is still set: pi-ticketflow would read it.
    raw = {"workflow": {"failOn": ["Major"], "enableFixer": True}, "ralph": {"parallelWorkers": 1}}
    assert settings_from_dict(raw).warnings == ()


def test_pi_ticketflow_default_file_warns_per_key_and_once_for_prompts() -> None:
    raw = json.loads((DATA / "pi-ticketflow/package-settings.json").read_text("utf-8"))
    warnings = _ignored_warnings(settings_from_dict(raw).warnings)
    [prompts] = [w for w in warnings if w.startswith("prompts.")]
    listed = prompts.split(" are set", 1)[0].split(", ")
    assert sorted(listed) == sorted(f"prompts.{k}" for k in raw["prompts"] if k != "tf")
    singles = {w.split(" is set", 1)[0] for w in warnings if w != prompts}
    assert singles == {k for _, k in IGNORED if _sets(raw, k)}
    assert len(warnings) == len(singles) + 1


def _sets(raw: dict[str, Any], key: str) -> bool:
    node: Any = raw
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_settings_prints_the_warnings_and_exits_0(
    project: Path, write_settings: WriteSettings
) -> None:
    write_settings({"workflow": {"mcpServers": ["exa"], "chainMode": "auto"}})
    result = run_cli("settings")
    assert result.returncode == 0, result.stderr
    assert "warning: workflow.chainMode is set, but tf_fsm ignores it" in result.stderr
    assert "warning: workflow.mcpServers is set, but tf_fsm ignores it" in result.stderr
    data = json.loads(run_cli("settings", "--json").stdout)
    assert len(_ignored_warnings(data["warnings"])) == 2


def test_ralph_prints_the_warnings_at_its_start(
    project: Path, write_settings: WriteSettings
) -> None:
    write_settings({"executor": {"kind": "scripted"}, "workflow": {"chainMode": "auto"}})
    (project / ".tickets").mkdir()
    (project / ".tickets" / "pt-1.md").write_text(tk_ticket("pt-1"), encoding="utf-8")
    result = run_cli("ralph", "--dry-run")
    assert result.returncode == 0, result.stderr
    first = result.stderr.splitlines()[0]
    assert first.startswith("warning: workflow.chainMode is set, but tf_fsm ignores it: ")


def test_init_s_own_settings_draw_no_warning(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert run_cli("--root", str(fresh), "init").returncode == 0
    result = run_cli("--root", str(fresh), "settings", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["warnings"] == []
    assert "warning" not in result.stderr
