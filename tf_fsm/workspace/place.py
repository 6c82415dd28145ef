"""Where the tickets' worktrees go (`ralph.parallelWorktreesDir`, docs/workspaces.md "Names"):
its spelling is checked when the settings load (tf_fsm.settings.workspace); here it is checked
against the project when a workspace is made (no symlink out of the project, not the root,
nothing git tracks in it), and kept out of `git status` at the root by a line in the
repository's own info/exclude. Lines tf_fsm added there for an earlier directory are taken
out again: they would keep hiding new files from git.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePosixPath

from tf_fsm.errors import WorkspaceError
from tf_fsm.fs.atomic import atomic_write_text
from tf_fsm.fs.confine import check_within
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.workspace.agent_files import read_if_present
from tf_fsm.workspace.git import Git, literal, paths_of
from tf_fsm.workspace.model import worktrees_dir

#: the comment tf_fsm writes above the line it adds to the repository's info/exclude
EXCLUDE_COMMENT = "# tf-fsm: the tickets' worktrees (ralph.parallelWorktreesDir)"
#: how many tracked files a refusal names
_SHOWN = 3
#: (project root, worktrees directory) git answered for in this process: tracking nothing
#: there, and ignoring it. Asked when a process makes its first worktree there, not for
#: every ticket's: the directory is the settings', and a run's worktrees go where its first
#: went (a file committed there meanwhile is refused by the next run)
_UNTRACKED: set[tuple[str, str]] = set()
_IGNORED: set[tuple[str, str]] = set()


def check_directory(git: Git, root: Path, directory: Path) -> None:
    """The worktrees' `directory` is one of their own: not the project root or above it,
    not led out of the project by a symlink, and holding no file git tracks (the directory
    is kept out of git's view, which would hide new files there)."""
    if root.resolve().is_relative_to(directory.resolve()):
        raise WorkspaceError(
            f"ralph.parallelWorktreesDir is {directory}, the project root {root} or above "
            "it: the worktrees need a directory of their own"
        )
    check_within(directory, root)  # a symlink must not lead the worktrees out of the project
    posix = _posix(root, directory)
    asked = (str(root.resolve()), posix)
    if asked in _UNTRACKED:
        return
    tracked = paths_of(git.out("ls-files", "-z", "--", *literal([posix])))
    if tracked:
        shown = ", ".join(tracked[:_SHOWN]) + (", ..." if len(tracked) > _SHOWN else "")
        raise WorkspaceError(
            f"ralph.parallelWorktreesDir is {posix!r}, which holds files git tracks ({shown}): "
            "the tickets' worktrees need a directory of their own, which tf-fsm keeps out of "
            "git status; set it to a directory git does not track (the default is "
            "'.tf/ralph/worktrees')"
        )
    _UNTRACKED.add(asked)


def ensure_ignored(git: Git, common: Path, root: Path, settings: LoadedSettings) -> list[str]:
    """Keep the worktrees out of `git status` at the root: unless the project's ignore rules
    already do, a line in the repository's own info/exclude (no config, nothing committed).
    Lines tf_fsm added there for another directory are removed first."""
    posix = _posix(root, worktrees_dir(root, settings))
    exclude = common / "info" / "exclude"
    line = "/" + re.sub(r"([\\*?\[])", r"\\\1", posix) + "/"
    text = read_if_present(exclude) or ""
    kept, stale = _without_stale(text, line)
    notes = [
        f"removed {old} from {exclude}: tf-fsm had added it for an earlier "
        "ralph.parallelWorktreesDir, and it would keep new files there hidden from git"
        for old in stale
    ]
    if stale:
        atomic_write_text(exclude, kept, within=common)
    asked = (str(root.resolve()), posix)
    if asked in _IGNORED:
        return notes
    if git.ok("check-ignore", "--quiet", f"{posix}/"):
        _IGNORED.add(asked)
        return notes
    if line in kept.splitlines():
        return notes  # already there: a rule of the project re-includes it, and it wins
    kept += "" if not kept or kept.endswith("\n") else "\n"
    atomic_write_text(exclude, f"{kept}{EXCLUDE_COMMENT}\n{line}\n", within=common)
    return [*notes, f"added {line} to {exclude}, so that git status at {root} does not show it"]


def _without_stale(text: str, line: str) -> tuple[str, list[str]]:
    """`text` without the lines tf_fsm added (each under EXCLUDE_COMMENT) other than `line`,
    and those lines."""
    lines = text.splitlines(keepends=True)
    kept: list[str] = []
    stale: list[str] = []
    i = 0
    while i < len(lines):
        added = lines[i + 1].rstrip("\n") if i + 1 < len(lines) else None
        if lines[i].rstrip("\n") == EXCLUDE_COMMENT and added is not None and added != line:
            stale.append(added)
            i += 2
            continue
        kept.append(lines[i])
        i += 1
    return "".join(kept), stale


def _posix(root: Path, directory: Path) -> str:
    return PurePosixPath(Path(os.path.relpath(directory, root))).as_posix()
