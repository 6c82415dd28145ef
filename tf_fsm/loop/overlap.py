"""The loop's rule against conflicts it can see coming (docs/workspaces.md, "Fewer conflicts to
begin with"): a ticket whose branch is known to change files that a running ticket's branch
changes too (or that either conflicted in before) waits until that ticket is done, instead of
running beside it into a merge conflict. What "known" means is `core.conflicts.overlap`'s
rule; this module gathers the facts it looks at: each branch's files from git, and the files
a ticket's merges conflicted in from its journal."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from tf_fsm.core.conflicts import conflict_files, overlap
from tf_fsm.errors import CorruptStateError
from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.protocol import Store
from tf_fsm.workspace.touched import BranchFiles


class KeptApart:
    def __init__(self, root: Path, settings: LoadedSettings, store: Callable[[str], Store]):
        self.branches = BranchFiles(root, settings)
        self.store = store
        self._conflicts: dict[str, tuple[int, frozenset[str]]] = {}

    def refresh(self) -> None:
        """Look at the branches again (before each round of starting tickets)."""
        self.branches.refresh()

    def clash(self, ticket_id: str, running: Iterable[str]) -> tuple[str, list[str]] | None:
        """The running ticket `ticket_id` must not start beside, and the files they share."""
        mine = self.known(ticket_id)
        return overlap(mine, {r: self.known(r) for r in running}) if mine else None

    def known(self, ticket_id: str) -> frozenset[str]:
        """The files a ticket with a branch is known to change or to have conflicted in."""
        if not self.branches.has_branch(ticket_id):
            return frozenset()
        return self.branches.of(ticket_id) | self._conflicted(ticket_id)

    def _conflicted(self, ticket_id: str) -> frozenset[str]:
        store = self.store(ticket_id)
        size = store.journal_size()
        if size is None:
            return frozenset()
        cached = self._conflicts.get(ticket_id)
        if cached is None or cached[0] != size:
            try:
                files = conflict_files(store.read_events().events)
            except CorruptStateError:  # `run` names it; the rule does without
                files = frozenset()
            cached = self._conflicts[ticket_id] = (size, files)
        return cached[1]
