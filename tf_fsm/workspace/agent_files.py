"""The files agents need in a ticket's worktree that the branch may not hold (agent settings,
prompt overrides: `workspace.agentFiles`), copied from the project root, and the worktree's
record of them, which keeps them out of every checkpoint (docs/workspaces.md)."""

from __future__ import annotations

import glob
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from tf_fsm._json_input import load_json
from tf_fsm.fs.atomic import atomic_write_bytes, atomic_write_json, fsync_dir, make_dirs
from tf_fsm.fs.confine import check_within
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.workspace.git import Git, paths_of

#: the worktree's record, in its own git directory: the base branch it was made from and the
#: agent files copied into it ({"base": "main", "copied": ["AGENTS.md"]})
RECORD = "tf-fsm.json"
#: the suffix of an agent file's copy in the making, beside where it goes
_COPYING = ".tf-fsm-copy"


@dataclass(frozen=True)
class Record:
    base: str
    copied: tuple[str, ...]


def agent_entries(settings: LoadedSettings) -> list[str]:
    """`workspace.agentFiles` as POSIX paths (each checked, when the settings were loaded, to
    be a path inside the project)."""
    return [PurePosixPath(entry).as_posix() for entry in settings.settings.workspace.agentFiles]


def agent_files(
    root: Path, settings: LoadedSettings, tree: Path, admin: Path, base: str, *, made: bool
) -> tuple[Record, list[str]]:
    """Copy the agent files the worktree lacks from the root; the record, written before any
    copy (a copy cut off is redone, and never committed meanwhile). `made`: the worktree was
    just checked out into an empty directory, so every file in it is one its HEAD holds."""
    entries = agent_entries(settings)
    recorded = read_record(admin)
    record = recorded or Record(base, () if made else present_untracked(tree, entries))
    for entry in entries:
        _sweep_copy(tree / entry, tree)
    missing = [e for e in entries if _at_root(root, e) and not os.path.lexists(tree / e)]
    record = Record(record.base, tuple(sorted({*record.copied, *missing})))
    if record != recorded:
        atomic_write_json(
            admin / RECORD, {"base": record.base, "copied": list(record.copied)}, within=admin
        )
    for entry in missing:
        _copy_entry(root / entry, tree / entry, tree)
    return record, [f"copied {e} from the project root into {tree}" for e in missing]


def _at_root(root: Path, entry: str) -> bool:
    source = root / entry
    if source.parent != root:
        check_within(source.parent, root)  # read no project file through a link out of it
    return os.path.lexists(source)


def present_untracked(tree: Path, entries: list[str]) -> tuple[str, ...]:
    """The agent files in the worktree that its HEAD does not hold: taken for copies when the
    record is lost, so that no checkpoint commits them."""
    present = [e for e in entries if os.path.lexists(tree / e)]
    if not present:
        return ()
    held = set(paths_of(Git(tree).out("ls-tree", "-z", "--name-only", "HEAD", "--", *present)))
    return tuple(e for e in present if e not in held)


def _copy_entry(source: Path, dest: Path, tree: Path) -> None:
    """Copy a file, directory or symlink whole or not at all: built beside `dest` under a
    temporary name, then renamed into place."""
    temp = dest.with_name(f".{dest.name}{_COPYING}")
    check_within(temp, tree)
    remove_entry(temp)
    make_dirs(dest.parent, within=tree)
    _copy_into(source, temp, tree)
    temp.replace(dest)
    fsync_dir(dest.parent)


def _copy_into(source: Path, dest: Path, tree: Path) -> None:
    info = os.lstat(source)
    if stat.S_ISLNK(info.st_mode):
        dest.symlink_to(source.readlink())  # a link is copied as a link, never followed
        return
    if stat.S_ISDIR(info.st_mode):
        make_dirs(dest, within=tree)
        for child in sorted(source.iterdir()):
            _copy_into(child, dest / child.name, tree)
    elif stat.S_ISREG(info.st_mode):
        atomic_write_bytes(dest, source.read_bytes(), within=tree, sync_dir=False)
    else:
        return  # a socket or a pipe: nothing an agent reads as a file
    dest.chmod(stat.S_IMODE(info.st_mode))


def _sweep_copy(dest: Path, tree: Path) -> None:
    """Remove the half-made copy a crash left beside `dest` (and the temporary file of its
    atomic write, for a single file: `.<copy's name>.<pid>.<n>.tmp`)."""
    temp = dest.with_name(f".{dest.name}{_COPYING}")
    for leftover in [temp, *dest.parent.glob(f".{glob.escape(temp.name)}.*.tmp")]:
        if os.path.lexists(leftover):
            check_within(leftover, tree)
            remove_entry(leftover)


def remove_entry(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def read_record(admin: Path) -> Record | None:
    text = read_if_present(admin / RECORD)
    try:
        raw = load_json(text) if text is not None else None
    except ValueError:
        return None
    base, copied = (raw.get("base"), raw.get("copied")) if isinstance(raw, dict) else (0, 0)
    if not isinstance(copied, list) or not all(isinstance(c, str) for c in copied):
        return None
    return Record(base, tuple(copied)) if isinstance(base, str) else None


def read_if_present(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def drop_copies_held_by(tree: Path, copied: tuple[str, ...], git: Git, commit: str) -> list[str]:
    """Remove from the worktree the agent files copied into it that `commit` now holds (the
    base branch committed them meanwhile): a rebase onto it would refuse to overwrite them.
    They are only copies (the project root keeps its own); the notes say which went."""
    if not copied:
        return []
    held = paths_of(git.out("ls-tree", "-z", "--name-only", commit, "--", *copied))
    for entry in held:
        check_within(tree / entry, tree)
        remove_entry(tree / entry)
    return [f"removed the copy of {e} from {tree}: {commit[:12]} holds it now" for e in held]
