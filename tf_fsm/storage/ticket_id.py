"""Ticket ids: what may name a ticket, checked before an id becomes a directory name or part
of a git branch (`<workspace.branchPrefix><id>`) or ref (`refs/tf/<id>/...`)."""

from __future__ import annotations

import re

from tf_fsm.errors import InvalidTicketIdError
from tf_fsm.settings.workspace import check_ref_part

MAX_TICKET_ID_LENGTH = 128
TICKET_ID_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def validate_ticket_id(ticket_id: str) -> str:
    """Return `ticket_id` if it is safe as one directory name and as one component of a git
    branch or ref name, else InvalidTicketIdError."""
    if not isinstance(ticket_id, str):
        raise InvalidTicketIdError(repr(ticket_id), "must be a string")
    reason = None
    if not ticket_id:
        reason = "must not be empty"
    elif len(ticket_id) > MAX_TICKET_ID_LENGTH:
        reason = f"is {len(ticket_id)} characters long (at most {MAX_TICKET_ID_LENGTH})"
    elif "/" in ticket_id or "\\" in ticket_id:
        reason = "must not contain a path separator ('/' or '\\')"
    elif "\0" in ticket_id:
        reason = "must not contain a NUL character"
    elif any(c.isspace() for c in ticket_id):
        reason = "must not contain whitespace"
    elif ".." in ticket_id:
        reason = "must not contain '..'"
    elif not TICKET_ID_RE.fullmatch(ticket_id[0]):
        reason = f"must start with a letter, digit or '_', not {ticket_id[0]!r}"
    elif not TICKET_ID_RE.fullmatch(ticket_id):
        bad = next(c for c in ticket_id if not re.fullmatch(r"[A-Za-z0-9_.-]", c))
        reason = f"contains {bad!r}; only ASCII letters, digits, '-', '_' and '.' are allowed"
    elif not _git_takes(ticket_id):
        reason = (
            "git cannot take it in a branch or ref name (git check-ref-format): an id may "
            "not end in '.lock' or '.'"
        )
    if reason is not None:
        raise InvalidTicketIdError(ticket_id, reason)
    return ticket_id


def _git_takes(ticket_id: str) -> bool:
    """Can the id be a component of a branch or ref name (workspace.branchPrefix is checked
    with an id after it when the settings load)? The one rule of git's names, with
    `branchPrefix` and `baseBranch`: tf_fsm.settings.workspace.check_ref_part."""
    try:
        check_ref_part(f"refs/tf/{ticket_id}", "ref")  # the id ends a branch name too
    except ValueError:
        return False
    return True
