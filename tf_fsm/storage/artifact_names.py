"""Which names an artifact may have: a file name, or a relative path of plain segments, that
can neither leave the ticket's directory nor replace a file the store keeps itself."""

from __future__ import annotations

import functools
import re
from pathlib import PurePosixPath

from tf_fsm.errors import InvalidArtifactNameError
from tf_fsm.storage.layout import JOURNAL, RETRY_STATE

_SEGMENT = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
# Files with their own API (and their own integrity rules) that write_artifact must not replace.
_RESERVED = frozenset({RETRY_STATE, JOURNAL})


def artifact_segments(name: str) -> list[str]:
    """`name`'s segments (`prompts/attempt-1/x.md` -> three), or InvalidArtifactNameError."""
    if not isinstance(name, str) or not name:
        raise InvalidArtifactNameError(str(name), "must be a non-empty string")
    return list(_segments(name))


@functools.lru_cache(maxsize=1024)
def _segments(name: str) -> tuple[str, ...]:
    """The checks of a name that is a non-empty string; remembered, since a run names the
    same few artifacts many times (an invalid name raises, and is not remembered)."""
    if "\\" in name or "\0" in name:
        raise InvalidArtifactNameError(name, "must not contain '\\' or NUL")
    if PurePosixPath(name).is_absolute() or re.match(r"[A-Za-z]:", name):
        raise InvalidArtifactNameError(name, "must be relative to the ticket directory")
    segments = name.split("/")
    for segment in segments:
        if segment in ("", ".", ".."):
            raise InvalidArtifactNameError(name, "has an empty, '.' or '..' segment")
        if not _SEGMENT.fullmatch(segment):
            raise InvalidArtifactNameError(
                name,
                f"segment {segment!r} must be ASCII letters, digits, '-', '_', '.' "
                "and not start with '.' or '-'",
            )
    if segments[0] in _RESERVED or segments[0].startswith(RETRY_STATE):
        raise InvalidArtifactNameError(name, "is a state file the store writes itself")
    return tuple(segments)
