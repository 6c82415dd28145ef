"""Settings input the JSON parser or the OS would mishandle: repeated keys, non-finite numbers,
NUL in paths. Each is a settings error (exit 2) naming the file and the dotted key."""

from __future__ import annotations

import json
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tests.conftest import run_cli
from tf_fsm.errors import SettingsError
from tf_fsm.settings.load import Settings, load_settings
from tf_fsm.settings.project import SETTINGS_RECORD_RELPATH

WriteSettings = Callable[[dict[str, Any]], Path]


def _write_raw(project: Path, text: str) -> Path:
    path = project / ".tf" / "config" / "settings.json"
    path.write_text(text, encoding="utf-8")
    return path


def _problem_keys(project: Path) -> tuple[SettingsError, dict[str, str]]:
    with pytest.raises(SettingsError) as info:
        load_settings(project, record=True)
    return info.value, {p.key: p.problem for p in info.value.problems}


# --- duplicate keys ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ('{"workflow": {"failOn": []}, "workflow": {"enableFixer": false}}', "workflow"),
        (
            '{"workflow": {"escalation": {"maxRetries": 1, "maxRetries": 5}}}',
            "workflow.escalation.maxRetries",
        ),
    ],
)
def test_duplicate_key_exits_2_naming_file_and_key(project: Path, text: str, key: str) -> None:
    path = _write_raw(project, text)
    result = run_cli("settings", "--json")
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    assert f"{path}: {key}: duplicate key: given 2 times" in result.stderr
    assert "internal error" not in result.stderr


def test_every_duplicate_is_reported_with_its_path(project: Path) -> None:
    path = _write_raw(
        project,
        '{"workflow": {"qualityGates": [{"name": "a", "name": "b", "command": "x"}],'
        ' "escalation": {"enabled": true, "enabled": false}},'
        ' "workflow": {}, "ralph": {}, "ralph": {}, "ralph": {}}',
    )
    err, problems = _problem_keys(project)
    assert err.path == path and str(path) in err.message
    assert set(problems) == {
        "workflow",
        "ralph",
        "workflow.qualityGates.0.name",  # inside the first `workflow`, which JSON would drop
        "workflow.escalation.enabled",
    }
    assert "given 3 times" in problems["ralph"]
    assert not (project / SETTINGS_RECORD_RELPATH).exists()  # never recorded as checked


def test_same_key_in_different_objects_is_not_a_duplicate(project: Path) -> None:
    _write_raw(
        project,
        '{"metaModels": {"a": {"model": "p/a"}, "b": {"model": "p/b"}},'
        ' "workflow": {"escalation": {"enabled": false}, "enableFixer": false}}',
    )
    loaded = load_settings(project)
    assert loaded.workflow.enableFixer is False


def test_invalid_json_after_a_duplicate_is_still_invalid_json(project: Path) -> None:
    _write_raw(project, '{"a": 1, "a": 2,\n')
    with pytest.raises(SettingsError, match="invalid JSON at line 2 column 1"):
        load_settings(project)


# --- non-finite numbers -----------------------------------------------------------------------


def _float_settings(model: type[BaseModel] = Settings, loc: str = "") -> list[str]:
    """Every float-valued key of the schema, dotted (a list's first item as `.0`)."""
    out: list[str] = []
    for name, info in model.model_fields.items():
        key = f"{loc}{info.alias or name}"
        annotation = info.annotation
        if typing.get_origin(annotation) is list:
            key, annotation = f"{key}.0", typing.get_args(annotation)[0]
        args = typing.get_args(annotation) or (annotation,)
        if float in args:
            out.append(key)
        for arg in args:
            if isinstance(arg, type) and issubclass(arg, BaseModel):
                out += _float_settings(arg, f"{key}.")
    return out


def _set(key: str, value: Any) -> dict[str, Any]:
    """A settings dict setting dotted `key` (a `.0` builds a one-item list: a quality gate)."""
    node: Any = value
    for part in reversed(key.split(".")):
        node = [{"name": "g", "command": "true", **node}] if part == "0" else {part: node}
    return dict(node)


def test_every_float_setting_is_covered() -> None:
    assert set(_float_settings()) >= {
        "workflow.escalation.maxCostUsd",
        "workflow.qualityGates.0.timeoutSeconds",
        "executor.timeoutSeconds",
        "executor.restartBackoffSeconds",
    }


@pytest.mark.parametrize("key", _float_settings())
@pytest.mark.parametrize("value", ["Infinity", "-Infinity", "NaN", "1e999"])
def test_non_finite_float_setting_is_rejected(project: Path, key: str, value: str) -> None:
    text = json.dumps(_set(key, "@@")).replace('"@@"', value)
    path = _write_raw(project, text)
    err, problems = _problem_keys(project)
    assert err.path == path
    assert key in problems, err.message
    assert "finite number" in problems[key]


@pytest.mark.parametrize("value", ["Infinity", "NaN"])
def test_infinite_budget_exits_2_and_prints_no_json(project: Path, value: str) -> None:
    path = _write_raw(project, f'{{"workflow": {{"escalation": {{"maxCostUsd": {value}}}}}}}')
    result = run_cli("settings", "--json")
    assert result.returncode == 2, result.stdout
    assert result.stdout == ""
    assert f"{path}: workflow.escalation.maxCostUsd: Input should be a finite number" in (
        result.stderr
    )


# --- NUL in paths -----------------------------------------------------------------------------


def test_nul_in_knowledge_dir_exits_2_not_a_crash(
    project: Path, write_settings: WriteSettings
) -> None:
    path = write_settings({"workflow": {"knowledgeDir": "a\x00b"}})
    assert "\\u0000" in path.read_text()
    result = run_cli("status", "t-1")
    assert result.returncode == 2, result.stderr
    assert "internal error" not in result.stderr
    assert f"{path}: workflow.knowledgeDir: contains a NUL character" in result.stderr


@pytest.mark.parametrize(
    ("raw", "key"),
    [
        ({"executor": {"program": "bin/a\x00"}}, "executor.program"),
        ({"executor": {"scenario": "s\x00.json"}}, "executor.scenario"),
        ({"executor": {"command": ["agent", "--x=\x00"]}}, "executor.command.1"),
        ({"executor": {"extraArgs": ["\x00"]}}, "executor.extraArgs.0"),
        (
            {"workflow": {"qualityGates": [{"name": "t", "command": "x", "cwd": "sub\x00"}]}},
            "workflow.qualityGates.0.cwd",
        ),
        ({"metaModels": {"m": {"model": "p/a\x00b"}}}, "metaModels.m.model"),
        ({"metaModels": {"m": {"model": "p/a", "thinking": "hi\x00"}}}, "metaModels.m.thinking"),
        ({"agents": {"worker": "m\x00"}}, "agents.worker"),
        (
            {"workflow": {"escalation": {"models": {"fixer": "p/\x00"}}}},
            "workflow.escalation.models.fixer",
        ),
        (
            {"workflow": {"qualityGates": [{"name": "t", "command": "pytest\x00"}]}},
            "workflow.qualityGates.0.command",
        ),
        (
            {"workflow": {"qualityGates": [{"name": "t", "command": ["pytest", "\x00"]}]}},
            "workflow.qualityGates.0.command",
        ),
    ],
)
def test_nul_in_any_path_or_argument_setting_is_rejected(
    project: Path, write_settings: WriteSettings, raw: dict[str, Any], key: str
) -> None:
    path = write_settings(raw)
    err, problems = _problem_keys(project)
    assert err.path == path and str(path) in err.message
    assert list(problems) == [key], err.message
    assert "NUL character" in problems[key]
