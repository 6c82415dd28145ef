"""A ticket's journal as lines another host wrote (the history's copy of it), and the views
rebuilt from them: what every store does when told "the ticket's journal is these lines"
(`Store.replace_journal`), in one place.

The lines are validated as the journal's reader validates it (each one a whole event of this
ticket) before anything is replaced, redacted with this host's redactor as every write is,
and kept byte for byte when the redactor finds nothing: the lines read back (`journal_lines`)
are then the very lines given."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from tf_fsm.core.journal import Event
from tf_fsm.core.journal_codec import JournalLineError, decode_line
from tf_fsm.errors import CorruptStateError
from tf_fsm.fs.atomic import json_text
from tf_fsm.storage.redact import Redactor
from tf_fsm.storage.redacted_json import redacted_line
from tf_fsm.storage.views import VIEWS, last_images


def journal_data(
    lines: Sequence[str], ticket_id: str, redactor: Redactor, where: Path
) -> tuple[bytes, list[Event]]:
    """The journal's bytes for `lines` (oldest first, without their newlines) and their
    events. CorruptStateError naming `where` and the line for a line that is not one whole
    event; ValueError for an event of another ticket."""
    data: list[bytes] = []
    events: list[Event] = []
    for number, line in enumerate(lines, 1):
        if "\n" in line or "\r" in line:
            raise CorruptStateError(where, f"line {number}: holds a line break", remedy=_REMEDY)
        try:
            event = decode_line(line.encode("utf-8"), number)
        except JournalLineError as exc:
            raise CorruptStateError(where, str(exc), remedy=_REMEDY) from None
        if event.ticket != ticket_id:
            raise ValueError(
                f"line {number}: event of {event.ticket!r} given to the store of {ticket_id!r}"
            )
        clean = redactor(line)
        data.append(
            (line + "\n").encode("utf-8") if clean == line else redacted_line(event, redactor)
        )
        events.append(event)
    return b"".join(data), events


_REMEDY = "the lines given are not the ticket's journal: nothing was replaced"


def rebuilt_views(events: Sequence[Event]) -> dict[str, str | None]:
    """Each view's text as the journal's last image of it makes it (pretty JSON, as the crash
    recovery writes it), None for a view the journal has no image of (or a retry state moved
    aside since): that view must not be there."""
    images = last_images(events)
    texts: dict[str, str | None] = {}
    for name in VIEWS:
        content = images.get(name)
        texts[name] = None if content is None else json_text(content)
    return texts


def complete_lines(data: bytes) -> list[str]:
    """The journal's whole lines (a torn tail left out), without their newlines; bytes that
    are not UTF-8 read as U+FFFD."""
    whole = data[: data.rfind(b"\n") + 1]
    return [line for line in whole.decode("utf-8", errors="replace").split("\n")[:-1] if line]
