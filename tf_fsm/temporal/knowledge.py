"""A ticket's artifacts as a git commit (its knowledge commit, `refs/tf/<id>/knowledge`), and
the way back: the ticket's directory rewritten from one.

The artifacts are everything in `.tf/knowledge/tickets/<id>/` but the journal and the views
rebuilt from it (which travel as the history's journal lines, `Store.replace_journal`) and
the lock (hidden files: the lock, its owner note, a killed writer's temp files). The commit
is made with git's plumbing (hash-object, mktree, commit-tree) through the one git door: no
worktree, no index, nothing of the user's checkout touched. Its parent is the ticket's
previous knowledge commit, so the ref's log is the ticket's artifacts phase by phase.

Regular files only: a symlink in the ticket's directory is not an artifact another host
could read, and is left out. Every write of the way back is confined to the ticket's
directory (a symlink there cannot lead a write out of it)."""

from __future__ import annotations

import os
import shutil
import tempfile
from contextlib import suppress
from pathlib import Path

from tf_fsm.fs.atomic import atomic_write_bytes, make_dirs
from tf_fsm.storage.layout import JOURNAL
from tf_fsm.storage.ticket_files import confined
from tf_fsm.storage.views import VIEWS
from tf_fsm.workspace.git import Git
from tf_fsm.workspace.model import ticket_ref

#: what travels as the journal's lines, not as files
_FROM_THE_JOURNAL = frozenset({JOURNAL, *VIEWS})
#: the phase's report, in the commit beside the artifacts (never written to the directory):
#: a later try of the phase that finds its publication on the remote returns it, running
#: nothing again (tf_fsm.temporal.activities)
REPORT = ".tf-fsm-phase-report.json"
_FILE_MODE = "100644"


def knowledge_ref(ticket: str) -> str:
    return ticket_ref(ticket, "knowledge")


def artifact_names(directory: Path) -> list[str]:
    """The ticket's artifacts in `directory`: regular files, as `/`-separated relative
    names, sorted; hidden ones, symlinks, the journal and its views left out."""
    names: list[str] = []
    for top, dirs, files in os.walk(directory):
        dirs[:] = [d for d in dirs if not d.startswith(".")]  # os.walk follows no link
        here = Path(top).relative_to(directory)
        for name in files:
            path = Path(top) / name
            relative = (here / name).as_posix()
            if name.startswith(".") or path.is_symlink() or relative in _FROM_THE_JOURNAL:
                continue
            names.append(relative)
    return sorted(names)


def commit_knowledge(
    git: Git, directory: Path, parent: str | None, message: str, report: str | None = None
) -> str:
    """The knowledge commit of `directory`'s artifacts on top of `parent` (the previous
    one), with the phase's `report` beside them: `parent` itself when it holds the same."""
    names = artifact_names(directory)
    blobs: list[str] = []
    if names:
        paths = "\n".join(str(directory / name) for name in names) + "\n"
        blobs = git.out("hash-object", "-w", "--no-filters", "--stdin-paths", stdin=paths).split()
    found = dict(zip(names, blobs, strict=True))
    if report is not None:
        found[REPORT] = git.out("hash-object", "-w", "--no-filters", "--stdin", stdin=report)
    tree = _tree(git, found)
    if parent is not None and git.out("rev-parse", f"{parent}^{{tree}}") == tree:
        return parent
    args = ["commit-tree", tree, "-m", message]
    if parent is not None:
        args += ["-p", parent]
    return git.run(*args, env=git.commit_env()).stdout.strip()


def _tree(git: Git, blobs: dict[str, str]) -> str:
    """The tree of `blobs` (name -> blob), one mktree per directory, deepest first."""
    entries: dict[str, list[str]] = {"": []}
    for name, blob in blobs.items():
        *parents, leaf = name.split("/")
        entries.setdefault("/".join(parents), []).append(f"{_FILE_MODE} blob {blob}\t{leaf}")
        for depth in range(len(parents)):
            entries.setdefault("/".join(parents[:depth]), [])
            entries.setdefault("/".join(parents[: depth + 1]), [])
    for folder in sorted(entries, key=lambda f: (-f.count("/"), f) if f else (1, "")):
        if not folder:
            continue
        sha = git.out("mktree", stdin="".join(e + "\n" for e in entries[folder]))
        *above, leaf = folder.split("/")
        entries["/".join(above)].append(f"040000 tree {sha}\t{leaf}")
    return git.out("mktree", stdin="".join(e + "\n" for e in entries[""]))


def restore_knowledge(git: Git, directory: Path, commit: str | None, within: Path) -> None:
    """Make `directory`'s artifacts those of `commit` (none when None): each written
    atomically, confined to the directory; every other artifact removed. The journal, its
    views and hidden files (the lock) are left alone. `within`: what the directory itself
    must stay inside."""
    make_dirs(directory, within=within)
    staging = Path(tempfile.mkdtemp(prefix="tf-fsm-knowledge-", dir=git.common_dir()))
    try:
        wanted = _check_out(git, commit, staging) if commit is not None else []
        for name in wanted:
            path = confined(directory, name, "the ticket directory")
            make_dirs(path.parent, within=directory)
            atomic_write_bytes(path, (staging / "files" / name).read_bytes(), within=directory)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    keep = set(wanted)
    for top, dirs, files in os.walk(directory, topdown=False):
        here = Path(top).relative_to(directory)
        for name in [*files, *(d for d in dirs if (Path(top) / d).is_symlink())]:
            relative = (here / name).as_posix()
            if name.startswith(".") or relative in keep or relative in _FROM_THE_JOURNAL:
                continue
            with suppress(FileNotFoundError):
                (Path(top) / name).unlink()  # a symlink itself, never what it leads to
        if Path(top) != directory and not Path(top).name.startswith("."):
            with suppress(OSError):
                Path(top).rmdir()  # only when empty


def _check_out(git: Git, commit: str, staging: Path) -> list[str]:
    """`commit`'s files written under `staging/files` by git itself (bytes as committed,
    through a throw-away index of the staging's own), and their names."""
    env = {"GIT_INDEX_FILE": str(staging / ".index")}
    (staging / "files").mkdir()
    git.run("read-tree", commit, env=env)
    git.run(f"--work-tree={staging / 'files'}", "checkout-index", "-a", "-f", env=env)
    listed = git.run("ls-tree", "-r", "--name-only", "-z", commit).stdout
    return [name for name in listed.split("\0") if name and name != REPORT]


def report_of(git: Git, commit: str) -> str | None:
    """The phase report a knowledge commit holds (None: none, as before phases had one)."""
    found = git.run("cat-file", "blob", f"{commit}:{REPORT}", check=False)
    return found.stdout if found.exit_code == 0 else None
