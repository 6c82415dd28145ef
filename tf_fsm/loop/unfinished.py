"""Tickets the loop must finish although tk calls them closed, and a ticket's read model as
the loop's worker meets it.

In a workspace, the merge commit that puts a ticket on the base branch also closes its tk
file; the run records the merge just after, then removes the ticket's worktree and branch
(docs/workspaces.md). A run killed in between leaves a ticket tk calls closed with its
attempt still open, or with its worktree or branch still there. `tk ready` never lists it
again, so the loop looks for it among the workspaces (the worktree directories, the ticket
branches and the marks of removals the journal may not record yet) and runs it once more
when the decision of what runs next says something is left to finish: the merge is found
and recorded, the worktree and branch are removed.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path

from tf_fsm.core.ticket import TicketView
from tf_fsm.core.tk_rules import is_closed
from tf_fsm.errors import InvalidTicketIdError, TfFsmError
from tf_fsm.executors.failures import MERGE_CONFLICT, MERGE_REFUSED
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.protocol import Store
from tf_fsm.tk import tickets
from tf_fsm.views.status import ticket_view
from tf_fsm.workspace.git import Git, repository_root
from tf_fsm.workspace.model import a_tickets, worktree_path, worktrees_dir
from tf_fsm.workspace.removal import marked_removals, unmark_removal

#: the steps that finish what a ticket began, never a new attempt: a plan's trigger names them
FINISHING = frozenset({"resume", "close_tk", "remove_workspace"})
#: an attempt the merge queue refused: a person acts first, so the loop does not rerun it
MERGE_FAILURES = frozenset({MERGE_CONFLICT, MERGE_REFUSED})


def loop_view(
    root: Path, settings: LoadedSettings, store: Store, ticket: tickets.Ticket
) -> TicketView:
    """The ticket's read model as the loop's worker (tf_fsm.loop.work) meets it: the tk file as
    it parsed it, its retries recorded as `ralph_retry`."""
    return ticket_view(
        root, settings, store.ticket_id, store, tk_file=lambda: ticket, retry_trigger="ralph_retry"
    )


def error_policy(view: TicketView, resume_errors: bool, resumed: Collection[str]) -> str | None:
    """Why the loop leaves the ticket's attempt in error alone (None: it resumes it): a merge
    the merge queue refused waits for a person, any other error for `--resume-errors`, and
    an attempt is resumed once per loop."""
    cur = view.retry_state.current if view.retry_state else None
    if cur is None:
        return None
    if view.failure_class in MERGE_FAILURES and not resume_errors:
        return cur.reason or "the merge was refused"  # it says what to do
    if not resume_errors:
        return (
            f"attempt {cur.attemptNumber} failed in {cur.phase or 'a phase'} (error); "
            "--resume-errors resumes it"
        )
    if view.ticket_id in resumed:
        return f"attempt {cur.attemptNumber} failed again after being resumed"
    return None


def unfinished_merges(
    root: Path, settings: LoadedSettings, stores: Callable[[str], Store]
) -> list[str]:
    """The tickets with a workspace, or what is left of one, that tk calls closed and for
    which `run` has something to finish (an open attempt, a workspace a merge left), by id.
    A removal mark whose ticket has nothing left to finish goes (its journal records it)."""
    found = []
    try:
        listed = list(worktrees_dir(root, settings).iterdir())
    except OSError:
        listed = []  # no worktrees at all
    marked = marked_removals(p.name for p in listed)
    for name in sorted(_with_workspace(root, settings, listed) | marked):
        if _to_finish(root, settings, stores, name):
            found.append(name)
        elif name in marked:
            unmark_removal(worktree_path(root, settings, name))
    return found


def _to_finish(
    root: Path, settings: LoadedSettings, stores: Callable[[str], Store], name: str
) -> bool:
    try:
        ticket = tickets.read(root, name)
        if not is_closed(ticket.status):
            return False  # tk ready lists it
        view = loop_view(root, settings, stores(name), ticket)
    except (InvalidTicketIdError, TfFsmError):
        return False  # not a ticket's workspace, or its files say why elsewhere (`status`)
    return view.status is not None and view.step.action in FINISHING


def _with_workspace(root: Path, settings: LoadedSettings, listed: list[Path]) -> set[str]:
    """The ids with a directory among `listed` (the worktrees directory's entries) or a branch
    `workspace.branchPrefix<id>` (one git process; branches only when the root is the top of
    a git working tree)."""
    ids = {p.name for p in listed if p.is_dir() and a_tickets(p.name)}
    top = repository_root(root)
    if top is None or top.resolve() != root.resolve():
        return ids
    heads, prefix = "refs/heads/", settings.settings.workspace.branchPrefix
    refs = Git(root).out("for-each-ref", "--format=%(refname)", heads).splitlines()
    names = (ref.removeprefix(heads) for ref in refs)
    return ids | {name.removeprefix(prefix) for name in names if name.startswith(prefix)}
