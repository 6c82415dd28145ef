"""A ticket's files made what the history holds (`TicketFiles`), on the host about to run it:
the ticket branch at the history's sha, the ticket's directory rewritten from the knowledge
commit and the journal's lines. Never appended to a stale local copy: a try whose result the
history refused leaves nothing behind that the next one would build on.

What a refused try left in the ticket's worktree is never dropped: its commits are kept
under `refs/tf/<id>/refused`, its uncommitted edits under `refs/tf/<id>/refused-uncommitted`
(`-2`, `-3`, ... when taken), as every set-aside of docs/workspaces.md.

The journal's WorkspaceReady names the worktree of the host that made it. The engine never
runs there: it finds the ticket's worktree by the settings (`ralph.parallelWorktreesDir`),
and makes it again from the ticket's branch when it is missing (docs/workspaces.md, "A
worktree removed by hand"). So a phase on a second host resumes in that host's own worktree,
made from the branch at the history's sha."""

from __future__ import annotations

import os
import time
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path

from tf_fsm.core.journal import Event, PhaseCompleted
from tf_fsm.errors import WorkspaceError
from tf_fsm.settings.load import LoadedSettings, knowledge_dir, load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.storage.protocol import Store
from tf_fsm.storage.ticket_files import confined
from tf_fsm.temporal.fence import REMOTE
from tf_fsm.temporal.knowledge import knowledge_ref, restore_knowledge
from tf_fsm.temporal.orders import TicketFiles
from tf_fsm.workspace import checkpoint, worktree
from tf_fsm.workspace.git import Git, said
from tf_fsm.workspace.model import branch_name

#: where a refused try's work is kept (refs/tf/<id>/<name>)
REFUSED = "refused"


@dataclass(frozen=True)
class Materialized:
    """The ticket's files as rewritten from `files`: its store, the ticket's directory, and
    what was set aside (one line each)."""

    files: TicketFiles
    settings: LoadedSettings
    store: Store
    directory: Path
    notes: list[str]


def fetch_shas(git: Git, *shas: str | None) -> None:
    """Bring the commits the history names from the remote, those this clone lacks."""
    missing = [sha for sha in shas if sha is not None and git.rev(sha) is None]
    if not missing:
        return
    fetched = git.run("fetch", "--quiet", "--no-write-fetch-head", REMOTE, *missing, check=False)
    if fetched.exit_code != 0 or any(git.rev(sha) is None for sha in missing):
        raise WorkspaceError(
            f"the remote {REMOTE} does not have {', '.join(missing)}, which the history "
            f"names: {said(fetched)}"
        )


def materialize(root: Path, ticket: str, files: TicketFiles) -> Materialized:
    """Make the ticket's files on this host those of `files` (the history's)."""
    settings = load_settings(root)
    git = Git(root)
    fetch_shas(git, files.branch, files.knowledge)
    notes = place_branch(root, settings, ticket, files.branch)
    store, directory = rewrite_files(root, settings, ticket, files)
    return Materialized(files, settings, store, directory, notes)


def rewrite_files(
    root: Path, settings: LoadedSettings, ticket: str, files: TicketFiles
) -> tuple[Store, Path]:
    """The ticket's directory rewritten from the history's knowledge commit and journal lines
    (the commit fetched when this clone lacks it); no branch or worktree touched: what a
    dispatcher's clone keeps of a ticket that ran elsewhere. The store and the directory."""
    git = Git(root)
    fetch_shas(git, files.knowledge)
    store = open_store(root, settings, ticket)
    if not store.capabilities.pi_ticketflow_files:
        raise WorkspaceError(
            f"{ticket}: many hosts need the ticket's files on disk (storage backend `files`)"
        )
    knowledge = knowledge_dir(root, settings)
    directory = knowledge / "tickets" / ticket
    with store.lock("tf-fsm: the ticket's files rewritten from the history"):
        store.files.check_paths()
        restore_knowledge(git, directory, files.knowledge, knowledge)
        store.replace_journal(files.journal)
        in_journal_order(directory, store.read_events().events)
    ref = knowledge_ref(ticket)
    if files.knowledge is not None:
        git.run("update-ref", ref, files.knowledge)
    else:
        git.run("update-ref", "-d", ref, check=False)
    return store, directory


def in_journal_order(directory: Path, events: list[Event]) -> None:
    """Give the phases' files mtimes in the order the journal completed them: a resume takes
    an artifact older than an earlier phase's for a stale one (tf_fsm.core.resume), and git
    keeps no mtime, so the files rewritten from a commit are all of one moment."""
    names: list[str] = []
    for event in events:
        if isinstance(event, PhaseCompleted):
            names += [event.artifact, *(event.files or {})]
    start = time.time_ns()
    for step, name in enumerate(names):
        path = confined(directory, name, "the ticket directory")
        with suppress(FileNotFoundError):
            if not path.is_symlink():
                stamp = start + step * 1000
                os.utime(path, ns=(stamp, stamp))


def place_branch(root: Path, settings: LoadedSettings, ticket: str, sha: str | None) -> list[str]:
    """Put the ticket's branch at `sha` (no branch when None), its worktree too when there is
    one; whatever they held that `sha` lacks is set aside first. One note per ref kept."""
    git = Git(root)
    ws = worktree.find(root, settings, ticket)
    if ws is None:
        if sha is not None:
            git.run("update-ref", f"refs/heads/{branch_name(settings, ticket)}", sha, "")
        return []
    whole = worktree.intact(git.common_dir(), ws.tree)
    if sha is None:  # the history has no branch: a refused try made this one
        removed = worktree.remove(ws, delete_branch=True, force=True)
        return [f"{ticket}: the workspace of a refused try: {note}" for note in removed]
    kept: list[str | None] = []
    if whole:
        if checkpoint.head(ws) != sha:
            kept.append(checkpoint.keep_uncommitted(ws, f"{REFUSED}-uncommitted"))
            kept.append(checkpoint.reset_to(ws, sha, REFUSED))
        else:
            kept.append(checkpoint.set_aside(ws, f"{REFUSED}-uncommitted"))
    else:
        tip = git.rev(f"refs/heads/{ws.branch}")
        if tip is not None and tip != sha:
            kept.append(checkpoint.save_ref(ws, REFUSED, tip))
        git.run("update-ref", f"refs/heads/{ws.branch}", sha)
    return [f"{ticket}: a refused try's work kept as {ref}" for ref in kept if ref is not None]
