"""What tk's statuses mean to tf_fsm: closed, and ready (`tk ready`'s rule). The one answer
for the loop's selection, the board's ready column and `tf-fsm tickets ready`; kept apart
from the rest of the read model (tf_fsm.core.ticket_rules) so that listing a backlog imports
nothing else (benchmarks/bench_selection.py)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

#: the tk statuses of a ticket still to do
ACTIVE = ("open", "in_progress")


def is_closed(status: str | None) -> bool:
    """Does tk call the ticket closed?"""
    return status == "closed"


def is_ready(status: str | None, deps: Sequence[str], closed: Collection[str]) -> bool:
    """`tk ready`'s rule: the ticket is open or in progress and each of its deps is closed
    (`closed`: the ids tk calls closed; an empty dep counts as met, as tk skips it)."""
    return status in ACTIVE and all(not dep or dep in closed for dep in deps)
