"""The tk ticket file a run closes: the closed text (status and note, as `tk close` and `tk
add-note` write them), written at the project root, or committed by the merge that closes
the ticket in a workspace (tf_fsm.engine.merge_step)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from tf_fsm.core.next_step import close_note
from tf_fsm.tk import tickets

if TYPE_CHECKING:
    from tf_fsm.engine.api import RunContext


def shown_path(run: RunContext, path: Path) -> str:
    """`path` as a note in the tk file names it: relative to the project root (tk files are
    committed and shared, where this machine's absolute paths mean nothing); absolute only
    when it lies outside the project (a knowledge directory configured there)."""
    try:
        return path.relative_to(run.root).as_posix()
    except ValueError:
        return str(path)


def closed_text(run: RunContext, number: int, started: str, reason: str) -> str:
    """The tk file as attempt `number` closes it. The note names the attempt, so a ticket a
    person reopened later is told apart from one whose close never reached the file."""
    note = f"{close_note(number, started)}: quality gate passed; {reason}"
    note += f". Artifacts: {shown_path(run, run.store.files.dir)}"
    # bytes, not read_text: its universal newlines would rewrite every CRLF and lone CR
    text = run.ticket.path.read_bytes().decode("utf-8")
    return tickets.with_note(tickets.with_field(text, "status", "closed"), note, run.now())


def close_ticket(run: RunContext, number: int, started: str, reason: str) -> None:
    """Close the tk ticket at the project root, unless the merge that closed the attempt
    already did (its commit holds the closed file)."""
    run.ticket = tickets.read(run.root, run.ticket_id)
    if run.ticket.status == "closed" and close_note(number, started) in run.ticket.body:
        return
    closed = closed_text(run, number, started, reason)
    run.edit_ticket(lambda text: closed)
    run.ticket = tickets.read(run.root, run.ticket_id)
