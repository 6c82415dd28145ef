"""The one rule for where tf_fsm writes: no write follows a symlink out of its boundary.

A project is untrusted input: a cloned repository may carry `.tf/knowledge`, a ticket
directory or `events.jsonl` as symlinks to anywhere. Every writer names the boundary it writes
under (the project root, or the knowledge directory) and calls `check_within` first. A link
that stays inside the boundary is followed as usual; one that leads out is refused with
UnsafePathError, before anything is written.

A knowledge directory configured outside the project (`workflow.knowledgeDir`, absolute or
`../`) is the deliberate exception, as pi-ticketflow allows it: it is a boundary of its own.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tf_fsm.errors import UnsafePathError


def _inside(path: str, boundary: str) -> bool:
    return path == boundary or path.startswith(boundary.rstrip(os.sep) + os.sep)


def check_within(path: Path, boundary: Path) -> None:
    """Raise UnsafePathError if a symlink among `path`'s components below `boundary` (the file
    itself included) resolves outside `boundary`. One lstat per existing component: only when
    one is a link is the whole path resolved. (On the hot path of every write: plain strings,
    not Path objects, which cost more than the lstat calls.)"""
    where, home = os.fspath(path), os.fspath(boundary).rstrip(os.sep) or os.sep
    if not _inside(where, home):
        raise UnsafePathError(path, where, boundary, f"is not inside {boundary}")
    below = home.rstrip(os.sep)
    for part in where[len(home) :].split(os.sep):  # noqa: PTH206 - strings, see above
        if not part:
            continue
        below = f"{below}{os.sep}{part}"
        try:
            is_link = stat.S_ISLNK(os.lstat(below).st_mode)
        except FileNotFoundError:
            return  # the rest is created by the writer itself: no link can be in it yet
        if is_link:
            _check_link(Path(below), path, boundary)
            return


def _check_link(link: Path, path: Path, boundary: Path) -> None:
    real = os.path.realpath(boundary)
    target = os.path.realpath(link)
    if not _inside(target, real):
        raise UnsafePathError(link, target, boundary)
    full = os.path.realpath(path)
    if not _inside(full, real):  # a link further down leads out
        raise UnsafePathError(path, full, boundary)


def check_knowledge_dir(root: Path, knowledge: Path) -> None:
    """A knowledge directory configured inside the project must not be a symlink (or lie
    under one) that leads out of it; one configured outside is the user's choice."""
    lexical = os.path.normpath(root / knowledge)
    if _inside(lexical, os.path.normpath(root)):
        check_within(Path(lexical), root)
