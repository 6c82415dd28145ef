"""What may stand at a ticket's worktree path that is not a worktree, and what tf_fsm may
clear there: a directory a killed `git worktree add` left (empty, or holding only a `.git`
file cut short or naming a registry entry that is gone), or one holding nothing but tf_fsm's
copies of the ticket's files (the mirror, whose record is the ticket's store: what an older
tf_fsm made of a worktree removed by hand). Anything else is somebody's and is refused,
untouched.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from tf_fsm.errors import WorkspaceError
from tf_fsm.workspace.agent_files import read_if_present, remove_entry


def gitfile_target(tree: Path) -> Path | None:
    """The git directory a worktree's `.git` file names, None when it is not such a file."""
    gitfile = tree / ".git"
    try:
        if not stat.S_ISREG(os.lstat(gitfile).st_mode):
            return None
    except OSError:
        return None
    text = read_if_present(gitfile) or ""
    if not text.startswith("gitdir: ") or not text.endswith("\n"):
        return None  # not one, or git was killed while writing it
    return Path(os.path.realpath(tree / text[len("gitdir: ") :].strip()))


def clear_leftover(tree: Path, common: Path, mirror: Path | None) -> list[str]:
    """An unregistered directory at `tree` may only be empty, hold nothing but a `.git` file a
    killed `git worktree add` left (cut short, or naming a registry entry gone), or hold
    nothing but the ticket's `mirror`: tf_fsm's copies of the ticket's files, whose record is
    the ticket's store (what an older tf_fsm made of a worktree removed by hand)."""
    if not os.path.lexists(tree):
        return []
    if tree.is_symlink() or not tree.is_dir():
        raise foreign(tree, "is not a directory")
    names = [p.name for p in tree.iterdir()]
    if names in ([], [".git"]) and _stale_gitfile(tree, common) in (True, None):
        remove_entry(tree / ".git")
        tree.rmdir()
        return [f"removed the empty {tree}, left by a worktree never finished"]
    if only_mirror(tree, common, mirror):
        shutil.rmtree(tree)
        held = os.path.relpath(mirror or tree, tree)
        return [
            f"removed {tree}: it was not a worktree, only tf-fsm's copies of the ticket's "
            f"files ({held}), which the ticket's store keeps"
        ]
    raise foreign(tree, "holds files and is not a worktree of this repository")


def _stale_gitfile(tree: Path, common: Path) -> bool | None:
    """Is `tree/.git` a file a killed `git worktree add` left (cut short, or naming a registry
    entry that is gone or of this repository)? None when there is no `.git` at all."""
    gitfile = tree / ".git"
    if not os.path.lexists(gitfile):
        return None
    if not gitfile.is_file() or gitfile.is_symlink():
        return False
    target = gitfile_target(tree)
    return target is None or not target.exists() or target.parent == common / "worktrees"


def only_mirror(tree: Path, common: Path, mirror: Path | None) -> bool:
    """Does `tree` hold nothing but the directories down to `mirror` and what is in it (and
    at most a stale `.git` file)? Nothing of a person's is there then."""
    if mirror is None or not mirror.is_relative_to(tree) or mirror == tree:
        return False
    here, skip = tree, {".git"} if _stale_gitfile(tree, common) else set()
    for part in mirror.relative_to(tree).parts:
        try:
            entries = [e for e in os.scandir(here) if e.name not in skip]
        except OSError:
            return False
        if len(entries) != 1 or entries[0].name != part:
            return False
        if not entries[0].is_dir(follow_symlinks=False):
            return False
        here, skip = here / part, set()
    return True


def foreign(tree: Path, why: str) -> WorkspaceError:
    return WorkspaceError(
        f"{tree} {why}; tf-fsm leaves it as it is: move it away (or remove it) and run again, "
        "or set ralph.parallelWorktreesDir"
    )
