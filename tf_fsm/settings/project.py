"""Where the project is and where its files go, answered without loading the settings models.

tf_fsm.settings.load validates settings with pydantic, whose import alone takes longer than the
start-up budget of a command (benchmarks/bench_startup.py). Commands that only need the
project root (`tf-fsm tickets`) or that can tell there is nothing to do without settings
(`tf-fsm status` on a project where nothing has run) start from here instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from tf_fsm.errors import ProjectNotFoundError
from tf_fsm.settings.defaults import DEFAULT_KNOWLEDGE_DIR

SETTINGS_RELPATH = Path(".tf/config/settings.json")
ROOT_ENV = "TF_FSM_ROOT"
#: a cache: which settings bytes last passed validation (record_checked_settings)
SETTINGS_RECORD_RELPATH = Path(".tf/cache/settings-checked.json")
#: what `tf-fsm init` writes so that git never sees tf_fsm's run state (docs/workspaces.md):
#: the tickets' records, the loop's files and worktrees, caches, `tf-fsm temporal dev`'s
#: history. Settings and prompt
#: overrides (`.tf/config`, `.tf/prompts`) and knowledge topics stay committable.
STATE_IGNORE_RELPATH = Path(".tf/.gitignore")
STATE_IGNORE = """\
# tf-fsm's run state: written by every run, never committed (docs/workspaces.md)
/knowledge/tickets/
/ralph/
/cache/
/temporal/
"""


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


def nothing_run(root: Path) -> bool:
    """True when no ticket has been run, answered without the settings models when that is
    safe: with no settings file the package defaults apply (nothing to validate); with one, only
    if the settings record says these exact bytes already passed validation (see
    `record_checked_settings`). False means "look properly", with the settings loaded."""
    try:
        data = (root / SETTINGS_RELPATH).read_bytes()
    except FileNotFoundError:
        configured: str | None = DEFAULT_KNOWLEDGE_DIR
    except OSError:
        return False  # load_settings reports it, naming the file
    else:
        configured = _recorded_knowledge_dir(root, _fingerprint(data))
    if configured is None:
        return False
    knowledge = Path(configured)
    knowledge = knowledge if knowledge.is_absolute() else root / knowledge
    return not (knowledge / "tickets").is_dir()


#: the modules whose code decides whether settings are valid (tf_fsm.settings: this package),
#: fingerprinted by size and mtime
_VALIDATOR_MODULES = (
    "load.py",
    "schema.py",
    "section.py",
    "workspace.py",
    "severity.py",
    "project.py",
    "defaults.py",
)


def _fingerprint(data: bytes) -> str:
    """The settings bytes and the code that judged them: another tf_fsm version, or an edited
    validator module, must not trust a record an older validator wrote."""
    import hashlib

    import tf_fsm

    package = Path(__file__).parent
    stats = [(package / name).stat() for name in _VALIDATOR_MODULES]
    code = " ".join(f"{st.st_size}:{st.st_mtime_ns}" for st in stats)
    digest = hashlib.sha256(f"tf_fsm {tf_fsm.__version__} {code}\0".encode())
    digest.update(data)
    return digest.hexdigest()


def _recorded_knowledge_dir(root: Path, fingerprint: str) -> str | None:
    """The record's `knowledgeDir` if it was written for `fingerprint`. A missing, unreadable
    or foreign record is only a slower path, never an error."""
    from tf_fsm._json_input import load_json

    try:
        record = load_json((root / SETTINGS_RECORD_RELPATH).read_text(encoding="utf-8"))
    except (OSError, ValueError):  # ValueError: not UTF-8, not JSON, or beyond load_json's limits
        return None
    if not isinstance(record, dict) or record.get("fingerprint") != fingerprint:
        return None
    configured = record.get("knowledgeDir")
    return configured if isinstance(configured, str) else None


def record_checked_settings(root: Path, data: bytes, knowledge_dir: str) -> None:
    """Remember that the settings file with these bytes passed validation, so that `tf-fsm
    status` on a project where nothing has run answers without loading pydantic. Written by the
    commands that write anyway (init, run, ralph, watch), and only when it changed; a cache
    (docs/settings.md), so a project directory that refuses the write costs only speed."""
    fingerprint = _fingerprint(data)
    if _recorded_knowledge_dir(root, fingerprint) == knowledge_dir:
        return
    from contextlib import suppress

    from tf_fsm.errors import StorageError, UnsafePathError
    from tf_fsm.fs.atomic import atomic_write_text, json_text

    record = {"fingerprint": fingerprint, "knowledgeDir": knowledge_dir}
    # A disk that refuses the write, or a symlink leading out of the project, only costs speed;
    # so does a record a power cut takes (not fsynced: a cache).
    with suppress(OSError, StorageError, UnsafePathError):
        path = root / SETTINGS_RECORD_RELPATH
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json_text(record), within=root, durable=False)
