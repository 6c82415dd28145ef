"""Settings: pi-ticketflow's `.tf/config/settings.json`, loaded strictly.

The project file is laid over tf_fsm's package defaults (dicts merge key by key, lists and
scalars replace), as pi-ticketflow lays its package config under the project's. Sections
tf_fsm owns reject unknown keys with the nearest valid one; keys pi-ticketflow uses but
tf_fsm does not act on are accepted, with a warning naming each (IGNORED_KEYS). Every role's
model chain is resolved at load time, so a broken mapping fails before any agent runs.
"""

from __future__ import annotations

import copy
import difflib
import json
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from tf_fsm._json_input import DuplicateKeyError, JsonLimitError, load_json
from tf_fsm.errors import SettingsError, SettingsProblem
from tf_fsm.fs.confine import check_knowledge_dir
from tf_fsm.settings.gate_reports import whole_gate_warnings

# The loaded settings' value types: they live in tf_fsm.settings.loaded, which reads no file
# (the pure core imports them from there); the rest of tf_fsm imports them from here.
from tf_fsm.settings.loaded import LoadedSettings as LoadedSettings
from tf_fsm.settings.loaded import RoleModel as RoleModel

# Re-exported: they live in tf_fsm.settings.project, so that finding the project does not
# load pydantic.
from tf_fsm.settings.project import ROOT_ENV as ROOT_ENV
from tf_fsm.settings.project import SETTINGS_RELPATH as SETTINGS_RELPATH
from tf_fsm.settings.project import find_project_root as find_project_root
from tf_fsm.settings.project import record_checked_settings

# The schema (tf_fsm.settings.schema): what this module uses, and what the rest of tf_fsm
# imports from here.
from tf_fsm.settings.schema import ESCALATION_KEYS as ESCALATION_KEYS
from tf_fsm.settings.schema import IGNORED_KEYS as IGNORED_KEYS
from tf_fsm.settings.schema import PACKAGE_DEFAULTS as PACKAGE_DEFAULTS
from tf_fsm.settings.schema import PI_ONLY_ROLES as PI_ONLY_ROLES
from tf_fsm.settings.schema import REVIEWER_ROLES as REVIEWER_ROLES
from tf_fsm.settings.schema import ROLES as ROLES
from tf_fsm.settings.schema import WORKER_PROMPT_KEYS as WORKER_PROMPT_KEYS
from tf_fsm.settings.schema import Escalation as Escalation
from tf_fsm.settings.schema import QualityGate as QualityGate
from tf_fsm.settings.schema import Settings as Settings
from tf_fsm.settings.schema import Workflow as Workflow


def knowledge_dir(root: Path, settings: LoadedSettings) -> Path:
    """`workflow.knowledgeDir`, relative to the project root unless absolute. Configured inside
    the project, it must not be a symlink out of it (UnsafePathError): the store's writes are
    confined to it (tf_fsm.fs.confine)."""
    configured = Path(settings.workflow.knowledgeDir)
    path = configured if configured.is_absolute() else root / configured
    check_knowledge_dir(root, path)
    return path


def init_settings() -> dict[str, Any]:
    """What `tf-fsm init` writes: every key tf_fsm reads, at its default (docs/settings.md)."""
    data = copy.deepcopy(PACKAGE_DEFAULTS)
    data["prompts"] = {"tf-implement": "worker"}
    data["workflow"]["postFixVerification"] = "rereview"
    data["workflow"]["qualityGates"] = []
    data["workflow"]["qualityGateMaxRetries"] = 3
    data["workflow"]["escalation"]["maxCostUsd"] = None
    data["workflow"]["escalation"]["sameFailure"] = "skip-tier"
    # the mode, so that the file says where tickets run; tf_fsm's own keys for the rest of
    # the workspace keep their defaults (docs/workspaces.md)
    data["workspace"] = {"mode": "auto"}
    data["executor"] = {
        "kind": "command",
        "preset": None,
        "command": None,
        "timeoutSeconds": 1800,
        "maxRestarts": 2,
        "restartBackoffSeconds": 2,
        "scenario": None,
    }
    return data


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """Dicts merge key by key; anything else in `over` replaces what `base` had."""
    out = copy.deepcopy(dict(base))
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_settings(root: Path, record: bool = False) -> LoadedSettings:
    """Load `<root>/.tf/config/settings.json` over the package defaults; no file = defaults.
    `record` (for commands that write anyway) notes a file that passed in the settings record
    (tf_fsm.settings.project.record_checked_settings)."""
    path = root / SETTINGS_RELPATH
    if not path.exists():
        return settings_from_dict({}, path=None)
    try:
        data = path.read_bytes()
        raw = _parse_json(path, data.decode("utf-8"))
    except json.JSONDecodeError as exc:
        problem = f"invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        raise SettingsError(path, [SettingsProblem("", problem)]) from None
    except JsonLimitError as exc:
        raise SettingsError(path, [SettingsProblem("", exc.problem)]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(path, [SettingsProblem("", f"cannot read: {exc}")]) from None
    if not isinstance(raw, dict):
        raise SettingsError(path, [SettingsProblem("", "the top level must be a JSON object")])
    loaded = settings_from_dict(raw, path=path)
    if record:
        record_checked_settings(root, data, loaded.workflow.knowledgeDir)
    return loaded


class _Pairs(list[tuple[str, Any]]):
    """A JSON object kept as its (key, value) pairs, repeats included (the slow path)."""


def _parse_json(path: Path, text: str) -> Any:
    """`load_json` (tf_fsm._json_input: JSON nested too deeply is JsonLimitError), except that a
    key given twice in one object is an error naming its dotted path. Only a file that repeats
    a key is parsed a second time, to find every repeat."""
    try:
        return load_json(text, unique_keys=True)
    except DuplicateKeyError:
        pass
    tree = load_json(text, object_pairs_hook=_Pairs)
    problem = "duplicate key: given {} times in one object (only the last would count); keep one"
    problems = [SettingsProblem(key, problem.format(n)) for key, n in _duplicates(tree, ())]
    raise SettingsError(path, problems)


def _duplicates(node: Any, loc: tuple[str, ...]) -> list[tuple[str, int]]:
    """(dotted key, times given) for every repeated key in a `_Pairs` tree, outer keys first;
    list items are named by index, as validation errors name them."""
    out: list[tuple[str, int]] = []
    if isinstance(node, _Pairs):
        counts: dict[str, int] = {}
        for key, _ in node:
            counts[key] = counts.get(key, 0) + 1
        out += [(".".join((*loc, key)), n) for key, n in counts.items() if n > 1]
        for key, value in node:  # a repeated key's every value is searched too
            out += _duplicates(value, (*loc, key))
    elif isinstance(node, list):
        for index, item in enumerate(node):
            out += _duplicates(item, (*loc, str(index)))
    return out


def settings_from_dict(raw: Mapping[str, Any], path: Path | None = None) -> LoadedSettings:
    raw = _plan_spelling(raw, path)
    merged = deep_merge(PACKAGE_DEFAULTS, raw)
    try:
        settings = Settings.model_validate(merged)
    except ValidationError as exc:
        raise SettingsError(path, [_problem(err) for err in exc.errors()]) from None
    roles, escalated, problems = _resolve_roles(settings, raw)
    if problems:
        raise SettingsError(path, problems)
    return LoadedSettings(settings, path, roles, escalated, tuple(_warnings(settings, raw)))


def _plan_spelling(raw: Mapping[str, Any], path: Path | None) -> Mapping[str, Any]:
    """The approved plan spelled `reviewerSecondOpinion` as `reviewer-second-opinion`; a file
    copied from it is read as the implemented key."""
    models = _section(_section(_section(raw, "workflow"), "escalation"), "models")
    if "reviewer-second-opinion" not in models:
        return raw
    if "reviewerSecondOpinion" in models:
        key = "workflow.escalation.models"
        problem = "sets both reviewerSecondOpinion and reviewer-second-opinion; keep one"
        raise SettingsError(path, [SettingsProblem(key, problem)])
    fixed = {k: v for k, v in models.items() if k != "reviewer-second-opinion"}
    fixed["reviewerSecondOpinion"] = models["reviewer-second-opinion"]
    workflow = raw["workflow"]
    escalation = {**workflow["escalation"], "models": fixed}
    return {**raw, "workflow": {**workflow, "escalation": escalation}}


def _problem(err: Mapping[str, Any]) -> SettingsProblem:
    loc = tuple(str(part) for part in err["loc"])
    key = ".".join(loc)
    if err["type"] == "extra_forbidden":
        valid = _keys_at(loc[:-1])
        near = difflib.get_close_matches(loc[-1], valid, n=1, cutoff=0.6)
        return SettingsProblem(key, "unknown key", near[0] if near else None)
    msg = str(err["msg"]).removeprefix("Value error, ")
    got = err.get("input")
    if err["type"] != "value_error" and not isinstance(got, dict | list):
        msg = f"{msg} (got {json.dumps(got)})"
    return SettingsProblem(key, msg)


def _keys_at(loc: tuple[str, ...]) -> list[str]:
    """The keys the section at `loc` accepts, for 'did you mean' suggestions."""
    annotation: Any = Settings
    parts = list(loc)
    while parts:
        part = parts.pop(0)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            info = annotation.model_fields.get(part)
            if info is None:
                return []
            annotation = _unwrap(info.annotation)
        elif typing.get_origin(annotation) is dict:
            annotation = _unwrap(typing.get_args(annotation)[1])  # `part` was the free-form key
        elif typing.get_origin(annotation) is list:
            annotation = _unwrap(typing.get_args(annotation)[0])  # `part` was the index
        else:
            return []
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [info.alias or name for name, info in annotation.model_fields.items()]
    return []


def _unwrap(annotation: Any) -> Any:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return args[0] if len(args) == 1 else annotation
    return annotation


def _section(raw: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = raw.get(name)
    return value if isinstance(value, Mapping) else {}


def _resolve_meta(
    settings: Settings, role: str, name: str, key: str
) -> tuple[RoleModel | None, SettingsProblem | None]:
    meta = settings.metaModels.get(name)
    if meta is None:
        near = difflib.get_close_matches(name, list(settings.metaModels), n=1)
        problem = f"names metaModel {name!r}, which metaModels does not define"
        return None, SettingsProblem(key, problem, near[0] if near else None)
    return RoleModel(role, meta.model, meta.thinking, name, f"{key} -> metaModels.{name}"), None


def _resolve_roles(
    settings: Settings, raw: Mapping[str, Any]
) -> tuple[dict[str, RoleModel], dict[str, RoleModel], list[SettingsProblem]]:
    roles: dict[str, RoleModel] = {}
    problems: list[SettingsProblem] = []
    worker_prompt = _worker_prompt(raw)
    for role in ROLES:
        if role == "worker":
            # The project's own prompts entry wins; pi-ticketflow names the worker prompt `tf`.
            name = settings.prompts[worker_prompt] if worker_prompt else "worker"
            key = f"prompts.{worker_prompt}" if worker_prompt else "metaModels.worker (default)"
        elif role in settings.agents:
            key, name = f"agents.{role}", settings.agents[role]
        else:
            problems.append(
                SettingsProblem(f"agents.{role}", "no metaModel is mapped to this role")
            )
            continue
        resolved, problem = _resolve_meta(settings, role, name, key)
        if resolved:
            roles[role] = resolved
        if problem:
            problems.append(problem)

    escalated: dict[str, RoleModel] = {}
    models = settings.workflow.escalation.models
    for key, role in ESCALATION_KEYS.items():
        value = getattr(models, key)
        if value is None or role not in roles:
            continue
        where = f"workflow.escalation.models.{key}"
        meta = settings.metaModels.get(value)
        if meta is not None:
            escalated[role] = RoleModel(
                role, meta.model, meta.thinking, value, f"{where} -> metaModels.{value}"
            )
        else:  # a raw provider/model id keeps the role's base thinking level
            escalated[role] = RoleModel(role, value, roles[role].thinking, None, where)
    return roles, escalated, problems


def _worker_prompt(raw: Mapping[str, Any]) -> str | None:
    """The prompts entry the project's file names the worker's metaModel with, if any."""
    prompts = _section(raw, "prompts")
    return next((key for key in WORKER_PROMPT_KEYS if key in prompts), None)


def _warnings(settings: Settings, raw: Mapping[str, Any]) -> list[str]:
    wf, out = settings.workflow, []
    esc = wf.escalation
    if esc.enabled and all(getattr(esc.models, k) is None for k in ESCALATION_KEYS):
        out.append(
            "workflow.escalation.enabled is true but every workflow.escalation.models entry is "
            "null: retries will run with the base models (nothing escalates)"
        )
    if wf.enableQualityGate and not wf.failOn:
        out.append(
            "workflow.enableQualityGate is true but workflow.failOn is empty: "
            "review findings will never block a ticket"
        )
    if esc.maxRetries < 1:
        out.append(
            f"workflow.escalation.maxRetries is {esc.maxRetries}: "
            "no ticket may run even one attempt (use 1 or more)"
        )
    for key in ESCALATION_KEYS:
        value = getattr(esc.models, key)
        if value is None or value in settings.metaModels or "/" in value:
            continue
        near = difflib.get_close_matches(value, list(settings.metaModels), n=1, cutoff=0.75)
        if near:
            out.append(
                f"workflow.escalation.models.{key} is {value!r}, not a metaModels name (did you "
                f"mean {near[0]}?); it is used as a raw model id"
            )
    for role in _section(raw, "agents"):
        if role in ROLES or role in PI_ONLY_ROLES:
            continue
        near = difflib.get_close_matches(role, ROLES, n=1, cutoff=0.75)
        if near:
            out.append(f"agents.{role} is not a role tf_fsm runs (did you mean {near[0]}?)")
    return out + whole_gate_warnings(wf) + _ignored_keys(raw)


def _ignored_keys(raw: Mapping[str, Any]) -> list[str]:
    """One warning per pi-ticketflow key the project's file sets and tf_fsm does not act on;
    the prompts entries other than the worker's share one (pi-ticketflow's file has ~25)."""
    one = "is set, but tf_fsm ignores it"
    out = [f"{key} {one}: {why}" for key, why in IGNORED_KEYS.items() if _sets(raw, key)]
    agents = _section(raw, "agents")
    out += [
        f"agents.{role} {one}: a pi-ticketflow role tf_fsm does not run"
        for role in sorted(PI_ONLY_ROLES)
        if role in agents
    ]
    worker = _worker_prompt(raw)
    unused = [f"prompts.{key}" for key in _section(raw, "prompts") if key != worker]
    if unused:
        verb = one if len(unused) == 1 else "are set, but tf_fsm ignores them"
        readable = ", else ".join(f"prompts.{k}" for k in WORKER_PROMPT_KEYS)
        out.append(f"{', '.join(unused)} {verb}: it reads only the worker's entry ({readable})")
    return out


def _sets(raw: Mapping[str, Any], dotted: str) -> bool:
    """Whether the project's file itself sets the key at dotted path `dotted`."""
    *sections, key = dotted.split(".")
    for name in sections:
        raw = _section(raw, name)
    return key in raw
