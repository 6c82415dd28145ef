"""The ticket's files as an agent in a worktree sees them.

The ticket's store stays in the project root's knowledge directory, where `status`, the
locks and the loop find it. An agent in a worktree finds the ticket's files at the same
relative path from its working directory as in the shared tree, inside the worktree: some
agent CLIs cannot write outside their working directory (Codex's `--sandbox
workspace-write`). So before each invocation the files an agent reads are copied into the
worktree's copy of the ticket directory (the mirror), and afterwards what it wrote there is
copied back into the store, where it is checked and redacted like any agent's file. The store
is the record; the mirror is rebuilt from it before every invocation.

The mirror is made inside the worktree, never in its place: a worktree that is gone is not
made again by writing the mirror where it stood (a directory with no code and no git, in which
agents would run); it is made again from its branch (tf_fsm.engine.worktree).
"""

from __future__ import annotations

import os
from pathlib import Path

from tf_fsm.core.artifacts import REPORTS
from tf_fsm.errors import InvalidArtifactNameError, WorkspaceError
from tf_fsm.fs.atomic import atomic_write_bytes, make_dirs
from tf_fsm.fs.confine import check_within
from tf_fsm.storage.artifact_names import artifact_segments
from tf_fsm.storage.layout import CHAIN_CONTEXT

#: files of the store an agent never gets and never gives back: tf_fsm's own records
_NOT_COPIED = frozenset({CHAIN_CONTEXT})  # written to both sides by tf_fsm


def _shared_names(directory: Path) -> dict[str, Path]:
    """The top-level files of a ticket directory that may pass between the store and the
    mirror: artifact names (no state file, no dot file, no temp file)."""
    names: dict[str, Path] = {}
    try:
        entries = list(os.scandir(directory))
    except FileNotFoundError:
        return names
    for entry in entries:
        if not entry.is_file(follow_symlinks=False):
            continue
        try:
            artifact_segments(entry.name)
        except InvalidArtifactNameError:
            continue  # retry-state.json, events.jsonl, .lock, temp files
        names[entry.name] = Path(entry.path)
    return names


def _copy(source: Path, target: Path, within: Path) -> bool:
    """Copy `source` over `target` unless it already holds the same bytes."""
    data = source.read_bytes()
    try:
        if target.read_bytes() == data:
            return False
    except FileNotFoundError:
        pass
    atomic_write_bytes(target, data, within=within, sync_dir=False)
    return True


def fill(store_dir: Path, mirror: Path, extra: list[Path], within: Path) -> None:
    """Before an invocation: the store's artifacts (and `extra` files of it, e.g. the prompt
    and chain-context.json) into the mirror, inside the worktree `within`, which must exist.
    Nothing in the mirror is deleted: an agent's scratch files are its own."""
    _make_below(mirror, within)
    for name, path in _shared_names(store_dir).items():
        _copy(path, mirror / name, within)
    for path in extra:
        target = mirror / path.relative_to(store_dir)
        _make_below(target.parent, within)
        _copy(path, target, within)


def _make_below(directory: Path, tree: Path) -> None:
    """`mkdir -p` of `directory` below `tree`, never `tree` itself: a worktree that is gone
    is not made again here."""
    check_within(directory, tree)
    if not tree.is_dir():
        raise WorkspaceError(f"the worktree {tree} is gone: the ticket's files are not copied")
    make_dirs(directory, within=tree)


def collect(mirror: Path, store_dir: Path, output: str) -> list[str]:
    """After an invocation: the files the agent wrote or changed in the mirror, back into the
    store (names: the invocation's `output` first). The reports tf_fsm writes itself and
    chain-context.json are never taken from the mirror: an agent cannot forge them."""
    taken = []
    for name, path in sorted(_shared_names(mirror).items(), key=lambda kv: kv[0] != output):
        if name in REPORTS or name in _NOT_COPIED:
            continue
        if _copy(path, store_dir / name, store_dir):
            taken.append(name)
    return taken
