"""Where the project is and where its files go, answered without loading the settings models.

tf_fsm.config validates settings with pydantic, whose import alone takes longer than the
start-up budget of a command (benchmarks/bench_startup.py). Commands that only need the
project root (`tf-fsm tickets`) or that can tell there is nothing to do without settings
(`tf-fsm status` on a project with no settings file and no runs) start from here instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tf_fsm.errors import ProjectNotFoundError

SETTINGS_RELPATH = Path(".tf/config/settings.json")
ROOT_ENV = "TF_FSM_ROOT"
#: `workflow.knowledgeDir`'s package default (tf_fsm.config.PACKAGE_DEFAULTS uses this value)
DEFAULT_KNOWLEDGE_DIR = ".tf/knowledge"


def find_project_root(start: Path | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """`TF_FSM_ROOT` if set, else the nearest directory at or above `start` holding `.tf/` or
    `.tickets/` (as tk walks up for `.tickets/`)."""
    env = os.environ if environ is None else environ
    if env.get(ROOT_ENV):
        return Path(env[ROOT_ENV]).resolve()
    here = (start or Path.cwd()).resolve()
    for candidate in (here, *here.parents):
        if (candidate / ".tf").is_dir() or (candidate / ".tickets").is_dir():
            return candidate
    raise ProjectNotFoundError(here)


def nothing_run_with_defaults(root: Path) -> bool:
    """True when the project has no settings file (so the package defaults apply: nothing to
    validate) and the default knowledge dir holds no ticket state: no ticket has been run.
    False means "look properly", with the settings loaded."""
    if (root / SETTINGS_RELPATH).exists():
        return False
    return not (root / DEFAULT_KNOWLEDGE_DIR / "tickets").is_dir()
