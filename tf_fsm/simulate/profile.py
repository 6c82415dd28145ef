"""The simulation's profile: the backlog's hidden difficulty and each model's capability and
price (docs/simulate.md). JSON or TOML; the default one ships as `default-profile.json`."""

from __future__ import annotations

import tomllib
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from tf_fsm._json_input import load_json
from tf_fsm.core.state import SEVERITIES
from tf_fsm.errors import SettingsError, SettingsProblem
from tf_fsm.settings.load import ESCALATION_KEYS, ROLES

Probability = Field(ge=0.0, le=1.0)


class _Strict(BaseModel):
    # Infinity or NaN would turn every sum into inf/nan (agent hours "inf")
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ModelProfile(_Strict):
    #: dollars one invocation of this model costs (what its CLI would report)
    costUsd: float = Field(ge=0.0)
    #: how long one invocation takes (agent time, summed into the simulated wall time)
    seconds: float = Field(default=60.0, ge=0.0)
    #: the hardest finding (hidden hardness 0..1) this model can fix at all
    reach: float = Probability
    #: per attempt, the chance its fix clears a reported finding within reach, per severity
    clears: dict[str, Annotated[float, Field(ge=0.0, le=1.0)]] = Field(default_factory=dict)
    #: the chance that its (re-)implementation clears an open finding within reach
    rewrite: float = Field(default=0.0, ge=0.0, le=1.0)
    #: as a reviewer: the chance it reports an open finding (the fixer fixes what it is told)
    recall: float = Field(default=1.0, ge=0.0, le=1.0)
    #: the chance an invocation fails transiently (a provider error; it bills nothing)
    transient: float = Field(default=0.0, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _severities(self) -> ModelProfile:
        for severity, p in self.clears.items():
            if severity not in SEVERITIES:
                raise ValueError(f"clears: unknown severity {severity!r}")
            if not 0.0 <= p <= 1.0:
                raise ValueError(f"clears.{severity}: a probability must be in [0, 1]")
        return self


class Difficulty(_Strict):
    #: a ticket's hidden difficulty is Beta(alpha, beta); each finding's hardness is the
    #: difficulty plus a uniform offset in [-spread, +spread], clipped to [0, 1]
    alpha: float = Field(default=2.0, gt=0)
    beta: float = Field(default=3.0, gt=0)
    spread: float = Field(default=0.15, ge=0, le=1)


class Profile(_Strict):
    tickets: int = Field(default=500, ge=1)
    maxRetries: int = Field(default=5, ge=1)
    failOn: list[str] = Field(default_factory=lambda: ["Critical", "Major"])
    #: the per-ticket budget of the budget run (workflow.escalation.maxCostUsd)
    budgetUsd: float = Field(default=4.0, gt=0)
    difficulty: Difficulty = Difficulty()
    #: mean findings per ticket per severity at difficulty 0.5 (scaled by 0.5 + difficulty)
    findings: dict[str, Annotated[float, Field(ge=0.0)]] = Field(default_factory=dict)
    roles: dict[str, str]
    escalation: dict[str, str | None] = Field(default_factory=dict)
    models: dict[str, ModelProfile]

    @model_validator(mode="after")
    def _consistent(self) -> Profile:
        for role, model in self.roles.items():
            if role not in ROLES:
                raise ValueError(f"roles.{role}: not a role ({', '.join(ROLES)})")
            if model not in self.models:
                raise ValueError(f"roles.{role}: model {model!r} has no entry in models")
        missing = [r for r in ROLES if r not in self.roles]
        if missing:
            raise ValueError(f"roles: no model for {', '.join(missing)}")
        for key, escalated in self.escalation.items():
            if key not in ESCALATION_KEYS:
                raise ValueError(f"escalation.{key}: not one of {', '.join(ESCALATION_KEYS)}")
            if escalated is not None and escalated not in self.models:
                raise ValueError(f"escalation.{key}: model {escalated!r} has no entry in models")
        for severity in [*self.findings, *self.failOn]:
            if severity not in SEVERITIES:
                raise ValueError(f"unknown severity {severity!r}; valid: {', '.join(SEVERITIES)}")
        return self

    def strongest(self) -> str:
        """The model policy (d) gives every escalatable role: the one with the longest reach
        (then the best Major clear rate)."""
        models = self.models
        return max(models, key=lambda m: (models[m].reach, models[m].clears.get("Major", 0.0)))


DEFAULT_NAME = "default-profile.json"


def default_profile_text() -> str:
    return resources.files("tf_fsm.simulate").joinpath(DEFAULT_NAME).read_text(encoding="utf-8")


def load_profile(path: Path | None) -> Profile:
    """The profile at `path` (`.toml` read as TOML, anything else as JSON), or the default."""
    where = path or Path(DEFAULT_NAME)
    try:
        text = default_profile_text() if path is None else path.read_text(encoding="utf-8")
        data: Any = tomllib.loads(text) if where.suffix == ".toml" else load_json(text)
    except FileNotFoundError:
        raise SettingsError(where, [SettingsProblem("", "profile file not found")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(where, [SettingsProblem("", f"cannot read: {exc}")]) from None
    except (ValueError, tomllib.TOMLDecodeError) as exc:  # JSON, or past its limits
        raise SettingsError(where, [SettingsProblem("", f"not valid: {exc}")]) from None
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        problems = [
            SettingsProblem(
                ".".join(map(str, e["loc"])), str(e["msg"]).removeprefix("Value error, ")
            )
            for e in exc.errors()
        ]
        raise SettingsError(where, problems) from None
