from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DATA
from tf_fsm.errors import ProjectNotFoundError, SettingsError
from tf_fsm.settings.load import (
    PACKAGE_DEFAULTS,
    ROLES,
    deep_merge,
    find_project_root,
    load_settings,
    settings_from_dict,
)

PI = DATA / "pi-ticketflow"
WriteSettings = Callable[[dict[str, Any]], Path]


def test_pi_ticketflow_package_settings_load_unchanged(project: Path) -> None:
    path = project / ".tf/config/settings.json"
    original = (PI / "package-settings.json").read_bytes()
    path.write_bytes(original)
    loaded = load_settings(project)
    assert path.read_bytes() == original  # loading never rewrites
    assert loaded.workflow.failOn == []  # a loaded file keeps what it says
    assert loaded.settings.workflow.escalation.enabled is False
    assert loaded.max_retries == 3
    assert set(loaded.roles) == set(ROLES)
    # pi-ticketflow's `/tf` prompt names the worker's metaModel
    assert loaded.roles["worker"].model == "kimi-coding/k2p5"
    assert loaded.roles["worker"].source == "prompts.tf -> metaModels.worker"
    assert loaded.roles["fixer"].model == "zai/glm-4.7"  # agents.fixer -> general
    assert loaded.roles["reviewer-second-opinion"].thinking == "high"
    assert any("failOn is empty" in w for w in loaded.warnings)


def test_pi_ticketflow_project_settings_with_escalation_load(project: Path) -> None:
    (project / ".tf/config/settings.json").write_bytes((PI / "project-settings.json").read_bytes())
    loaded = load_settings(project)
    assert loaded.roles["fixer"].model == "zai/glm-5"
    assert loaded.escalated == {}


def test_no_settings_file_means_package_defaults(project: Path) -> None:
    loaded = load_settings(project)
    assert loaded.path is None
    assert loaded.workflow.failOn == ["Critical", "Major"]
    esc = loaded.workflow.escalation
    assert (esc.enabled, esc.maxRetries) == (False, 3)
    assert (esc.models.fixer, esc.models.reviewerSecondOpinion, esc.models.worker) == (
        None,
        None,
        None,
    )
    assert loaded.warnings == ()


def test_file_with_only_fail_on_is_valid(write_settings: WriteSettings, project: Path) -> None:
    write_settings({"workflow": {"failOn": ["critical"]}})
    loaded = load_settings(project)
    assert loaded.workflow.failOn == ["Critical"]
    assert loaded.workflow.enableReviewers == [
        "reviewer-general",
        "reviewer-spec-audit",
        "reviewer-second-opinion",
    ]


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (["critical", "MAJOR"], ["Critical", "Major"]),
        (["warning", "suggestion"], ["Warnings", "Suggestions"]),
        (["Warnings", "warnings", "Warning"], ["Warnings"]),
        (["**Minor**"], ["Minor"]),
        ([], []),
    ],
)
def test_fail_on_normalized(given: list[str], expected: list[str]) -> None:
    assert settings_from_dict({"workflow": {"failOn": given}}).workflow.failOn == expected


@pytest.mark.parametrize(
    ("raw", "key", "needle", "suggestion"),
    [
        (
            {"workflow": {"escalation": {"maxRetry": 3}}},
            "workflow.escalation.maxRetry",
            "unknown key",
            "maxRetries",
        ),
        ({"workfow": {}}, "workfow", "unknown key", "workflow"),
        (
            {"workflow": {"enableResearch": True}},
            "workflow.enableResearch",
            "unknown key",
            "enableResearcher",
        ),
        (
            {"ralph": {"parallelWorker": 2}},
            "ralph.parallelWorker",
            "unknown key",
            "parallelWorkers",
        ),
        (
            {"metaModels": {"x": {"model": "a/b", "thinkng": "low"}}},
            "metaModels.x.thinkng",
            "unknown key",
            "thinking",
        ),
        (
            {"workflow": {"escalation": {"models": {"fixr": "m"}}}},
            "workflow.escalation.models.fixr",
            "unknown key",
            "fixer",
        ),
        ({"workflow": {"failOn": ["Majr"]}}, "workflow.failOn", "unknown severity 'Majr'", None),
        (
            {"workflow": {"escalation": {"maxRetries": "3"}}},
            "workflow.escalation.maxRetries",
            "valid integer",
            None,
        ),
        (
            {"workflow": {"escalation": {"maxRetries": -1}}},
            "workflow.escalation.maxRetries",
            "greater than or equal to 0",
            None,
        ),
        ({"workflow": {"enableFixer": "yes"}}, "workflow.enableFixer", "valid boolean", None),
        ({"agents": {"fixer": "fixr"}}, "agents.fixer", "names metaModel 'fixr'", "fixer"),
        (
            {"prompts": {"tf-implement": "wrker"}},
            "prompts.tf-implement",
            "names metaModel 'wrker'",
            "worker",
        ),
        (
            {"workflow": {"enableReviewers": ["reviewer-genral"]}},
            "workflow.enableReviewers",
            "unknown reviewer role",
            None,
        ),
    ],
)
def test_bad_settings_name_file_key_and_fix(
    write_settings: WriteSettings,
    project: Path,
    raw: dict[str, Any],
    key: str,
    needle: str,
    suggestion: str | None,
) -> None:
    path = write_settings(raw)
    before = path.read_bytes()
    with pytest.raises(SettingsError) as info:
        load_settings(project)
    err = info.value
    assert err.path == path
    assert str(path) in err.message
    match = [p for p in err.problems if p.key == key]
    assert match, err.message
    assert needle in match[0].problem
    if suggestion:
        assert match[0].suggestion == suggestion
        assert f"did you mean {suggestion}?" in err.message
    assert path.read_bytes() == before


def test_several_problems_reported_together() -> None:
    with pytest.raises(SettingsError) as info:
        settings_from_dict({"workflow": {"failOn": "Critical", "enableFixr": True}})
    keys = {p.key for p in info.value.problems}
    assert keys == {"workflow.failOn", "workflow.enableFixr"}
    assert "2 problems" in info.value.message


def test_invalid_json_names_line_and_column(write_settings: WriteSettings, project: Path) -> None:
    path = project / ".tf/config/settings.json"
    path.write_text('{\n  "workflow": {\n    "failOn": ["Critical",]\n  }\n}\n')
    with pytest.raises(SettingsError, match=r"invalid JSON at line 3 column"):
        load_settings(project)


def test_top_level_must_be_object(project: Path) -> None:
    (project / ".tf/config/settings.json").write_text("[1, 2]")
    with pytest.raises(SettingsError, match="top level must be a JSON object"):
        load_settings(project)


def test_pi_only_keys_accepted_each_with_a_warning() -> None:
    raw = {
        "$schema": "https://example.invalid/schema.json",
        "checkers": {"python": {"lint": "ruff"}},
        "workflow": {
            "clarifyDefault": False,
            "mcpServers": ["exa"],
            "researchParallelAgents": 2,
            "exclude": ["x/**"],
        },
        "ralph": {
            "parallelWorktreesDir": "w",
            "parallelKeepWorktrees": True,
            "parallelAutoMerge": False,
        },
        "agents": {"review-merge": "general", "researcher-fetch": "research"},
        "prompts": {"tf-plan": "planning-that-does-not-exist", "tf-next": "general"},
    }
    loaded = settings_from_dict(raw)  # accepted: no SettingsError
    # ... and each ignored key the file sets is named in a warning (tests/test_settings_warnings.py)
    named = [w.split(" is set", 1)[0].split(" are set", 1)[0] for w in loaded.warnings]
    assert named == [
        "checkers",
        "workflow.clarifyDefault",
        "workflow.mcpServers",
        "workflow.researchParallelAgents",
        "workflow.exclude",
        "agents.researcher-fetch",
        "agents.review-merge",
        "prompts.tf-plan, prompts.tf-next",
    ]


def test_unresolvable_role_is_a_load_time_error() -> None:
    raw = {"metaModels": {"review-general": None}}
    with pytest.raises(SettingsError):
        settings_from_dict(raw)


def test_worker_resolution_precedence() -> None:
    meta = {"a": {"model": "p/a"}, "b": {"model": "p/b"}}
    assert (
        settings_from_dict({"metaModels": meta, "prompts": {"tf": "a"}}).roles["worker"].model
        == "p/a"
    )
    both = settings_from_dict({"metaModels": meta, "prompts": {"tf": "a", "tf-implement": "b"}})
    assert both.roles["worker"].model == "p/b"
    assert both.roles["worker"].source == "prompts.tf-implement -> metaModels.b"
    default = settings_from_dict({})
    assert default.roles["worker"].meta == "worker"


def test_escalation_model_may_name_a_meta_model_or_a_raw_id() -> None:
    loaded = settings_from_dict(
        {
            "metaModels": {"strong": {"model": "openai-codex/gpt-5.3-codex", "thinking": "xhigh"}},
            "workflow": {
                "escalation": {
                    "enabled": True,
                    "models": {"fixer": "strong", "worker": "x/raw-model"},
                }
            },
        }
    )
    assert loaded.escalated["fixer"].model == "openai-codex/gpt-5.3-codex"
    assert loaded.escalated["fixer"].thinking == "xhigh"
    assert loaded.escalated["worker"].model == "x/raw-model"
    assert loaded.escalated["worker"].thinking == loaded.roles["worker"].thinking
    assert "reviewer-second-opinion" not in loaded.escalated


def test_plan_spelling_of_second_opinion_key_accepted() -> None:
    loaded = settings_from_dict(
        {"workflow": {"escalation": {"models": {"reviewer-second-opinion": "x/y"}}}}
    )
    assert loaded.escalated["reviewer-second-opinion"].model == "x/y"


@pytest.mark.parametrize(
    ("raw", "needle"),
    [
        (
            {"workflow": {"escalation": {"enabled": True}}},
            "every workflow.escalation.models entry is null",
        ),
        ({"workflow": {"failOn": []}}, "failOn is empty"),
        ({"workflow": {"escalation": {"maxRetries": 0}}}, "maxRetries is 0"),
        (
            {"agents": {"fixr": "fixer"}},
            "agents.fixr is not a role tf_fsm runs (did you mean fixer?)",
        ),
        (
            {
                "metaModels": {"strong": {"model": "p/strong"}},
                "workflow": {"escalation": {"models": {"fixer": "strnog"}}},
            },
            "workflow.escalation.models.fixer is 'strnog', not a metaModels name (did you mean "
            "strong?)",
        ),
    ],
)
def test_load_time_warnings(raw: dict[str, Any], needle: str) -> None:
    loaded = settings_from_dict(raw)
    assert any(needle in w for w in loaded.warnings), loaded.warnings


def test_no_warning_for_a_raw_model_id_or_a_metamodel_name() -> None:
    metas = {"strong": {"model": "p/strong"}}
    for value in ("strong", "p/strnog", "opus"):  # a name, a provider/id, a preset's own id
        models = {"fixer": value}
        loaded = settings_from_dict(
            {"metaModels": metas, "workflow": {"escalation": {"models": models}}}
        )
        assert not [w for w in loaded.warnings if "escalation.models" in w], loaded.warnings


def test_no_warning_when_gate_disabled_and_fail_on_empty() -> None:
    loaded = settings_from_dict({"workflow": {"failOn": [], "enableQualityGate": False}})
    assert loaded.warnings == ()


def test_deep_merge_dicts_merge_lists_replace() -> None:
    merged = deep_merge({"a": {"b": 1, "c": [1, 2]}, "d": 1}, {"a": {"c": [3]}, "e": 2})
    assert merged == {"a": {"b": 1, "c": [3]}, "d": 1, "e": 2}
    assert PACKAGE_DEFAULTS["workflow"]["failOn"] == ["Critical", "Major"]  # not mutated


def test_find_project_root_walks_up(tmp_path: Path) -> None:
    top = tmp_path / "repo"
    (top / ".tickets").mkdir(parents=True)
    deep = top / "src" / "pkg"
    deep.mkdir(parents=True)
    assert find_project_root(deep, environ={}) == top.resolve()
    assert find_project_root(deep, environ={"TF_FSM_ROOT": str(tmp_path)}) == tmp_path.resolve()
    lonely = tmp_path / "elsewhere"
    lonely.mkdir()
    # tmp dirs have no .tf above them
    with pytest.raises(ProjectNotFoundError, match="tf-fsm init"):
        find_project_root(lonely, environ={})


def test_settings_file_is_json_serializable_roundtrip() -> None:
    # PACKAGE_DEFAULTS is what a key missing from the file means; it must itself be valid.
    loaded = settings_from_dict(json.loads(json.dumps(PACKAGE_DEFAULTS)))
    assert loaded.warnings == ()


def test_settings_record_vouches_only_for_the_same_bytes_and_tf_fsm_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The record `status` trusts (docs/settings.md): other bytes, or another tf_fsm version,
    are a miss, so the file is validated again."""
    import tf_fsm
    from tf_fsm.settings.project import (
        SETTINGS_RECORD_RELPATH,
        nothing_run,
        record_checked_settings,
    )

    settings = tmp_path / ".tf" / "config" / "settings.json"
    settings.parent.mkdir(parents=True)
    settings.write_bytes(b'{"workflow": {"knowledgeDir": "kd"}}')
    assert nothing_run(tmp_path) is False  # no record: look properly
    load_settings(tmp_path, record=True)
    record = json.loads((tmp_path / SETTINGS_RECORD_RELPATH).read_text())
    assert record["knowledgeDir"] == "kd"
    assert nothing_run(tmp_path) is True
    (tmp_path / "kd" / "tickets").mkdir(parents=True)
    assert nothing_run(tmp_path) is False  # the record's knowledge dir has tickets
    (tmp_path / "kd" / "tickets").rmdir()
    settings.write_bytes(b'{"workflow": {"knowledgeDir": "kd"}} ')
    assert nothing_run(tmp_path) is False
    record_checked_settings(tmp_path, settings.read_bytes(), "kd")
    assert nothing_run(tmp_path) is True
    monkeypatch.setattr(tf_fsm, "__version__", "0.0.0-other")
    assert nothing_run(tmp_path) is False


@pytest.mark.parametrize("prefix", ["/", "tf//", "-tf/", "tf/.", "tf/a..b", "tf/x.lock/"])
def test_a_branch_prefix_git_would_refuse_names_the_setting(prefix: str) -> None:
    with pytest.raises(SettingsError, match=r"workspace\.branchPrefix.*followed by a ticket id"):
        settings_from_dict({"workspace": {"branchPrefix": prefix}})


@pytest.mark.parametrize("prefix", ["tf/", "agents/tf-", "t"])
def test_a_branch_prefix_git_accepts_is_kept_as_written(prefix: str) -> None:
    loaded = settings_from_dict({"workspace": {"branchPrefix": prefix}})
    assert loaded.settings.workspace.branchPrefix == prefix
