"""Loaded settings as the rest of tf_fsm sees them: the validated file, every role's model
resolved. A value, made by tf_fsm.settings.load (which reads the file); this module reads
nothing, so the pure core may take one as an argument."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from tf_fsm.settings.schema import Settings, Workflow


@dataclass(frozen=True)
class RoleModel:
    """The model a role runs with, and the settings keys the answer came from."""

    role: str
    model: str
    thinking: str | None
    meta: str | None  # metaModels name, None for a raw model id
    source: str  # e.g. "agents.fixer -> metaModels.fixer"


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    path: Path | None  # None when no settings file exists (pure defaults)
    roles: Mapping[str, RoleModel]
    escalated: Mapping[str, RoleModel]  # roles with a non-null escalation model
    warnings: tuple[str, ...] = field(default=())

    @property
    def workflow(self) -> Workflow:
        return self.settings.workflow

    @property
    def max_retries(self) -> int:
        return self.settings.workflow.escalation.maxRetries
