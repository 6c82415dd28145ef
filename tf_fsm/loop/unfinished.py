"""Tickets the loop must finish although tk calls them closed, and the decision of what runs
next for a ticket as the loop's worker meets it.

In a workspace, the merge commit that puts a ticket on the base branch also closes its tk
file; the run records the merge just after, then removes the ticket's worktree and branch
(docs/workspaces.md). A run killed in between leaves a ticket tk calls closed with its
attempt still open, or with its worktree or branch still there. `tk ready` never lists it
again, so the loop looks for it among the workspaces (the worktree directories and the ticket
branches) and runs it once more when the decision of what runs next says something is left
to finish: the merge is found and recorded, the worktree and branch are removed.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path

from tf_fsm.core.next_step import Facts, next_step
from tf_fsm.core.resume import gate_decided
from tf_fsm.core.state import RetryState
from tf_fsm.engine.accounting import unpriced_refusal
from tf_fsm.errors import InvalidTicketIdError, TfFsmError
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.store import TicketStore
from tf_fsm.tk import tickets
from tf_fsm.views.status import readable_journal
from tf_fsm.workspace.git import Git, repository_root
from tf_fsm.workspace.model import worktrees_dir

#: the steps that finish what a ticket began, never a new attempt: a plan's trigger names them
FINISHING = frozenset({"resume", "close_tk", "remove_workspace"})


def loop_facts(
    settings: LoadedSettings, store: TicketStore, ticket: tickets.Ticket, state: RetryState | None
) -> Facts:
    """What the decision of what runs next looks at, as the loop's worker (tf_fsm.loop.work)
    meets it; the journal read once, and only if the decision needs it."""
    journal = cache(lambda: readable_journal(store))  # a bad line: run names it
    return Facts(
        store.ticket_id, state, settings, tk_file=lambda: ticket, journal=journal,
        look=store.seen, gate_decided=lambda: gate_decided(store),
        budget_refusal=lambda: unpriced_refusal(settings, state, journal),
        retry_trigger="ralph_retry",
    )  # fmt: skip


def unfinished_merges(
    root: Path, settings: LoadedSettings, stores: Callable[[str], TicketStore]
) -> list[str]:
    """The tickets with a workspace, or what is left of one, that tk calls closed and for
    which `run` has something to finish (an open attempt, a workspace a merge left), by id."""
    found = []
    for name in sorted(_with_workspace(root, settings)):
        try:
            ticket = tickets.read(root, name)
            if ticket.status != "closed":
                continue  # tk ready lists it
            store = stores(name)
            state = store.load_retry_state()
            step = next_step(loop_facts(settings, store, ticket, state)) if state else None
        except (InvalidTicketIdError, TfFsmError):
            continue  # not a ticket's workspace, or its files say why elsewhere (`status`)
        if step is not None and step.action in FINISHING:
            found.append(name)
    return found


def _with_workspace(root: Path, settings: LoadedSettings) -> set[str]:
    """The ids with a directory under the worktrees directory or a branch
    `workspace.branchPrefix<id>` (one git process; branches only when the root is the top of
    a git working tree)."""
    folder = worktrees_dir(root, settings)
    try:
        ids = {p.name for p in folder.iterdir() if p.is_dir()}
    except OSError:
        ids = set()  # no worktrees at all
    top = repository_root(root)
    if top is None or top.resolve() != root.resolve():
        return ids
    heads, prefix = "refs/heads/", settings.settings.workspace.branchPrefix
    listed = Git(root).out("for-each-ref", "--format=%(refname)", heads).splitlines()
    names = (ref.removeprefix(heads) for ref in listed)
    return ids | {name.removeprefix(prefix) for name in names if name.startswith(prefix)}
