"""A commit read from git's object store itself, when git keeps it as a loose object: the
commit the merge queue has just made always is one, and reading it spares a git process per
ticket (the removal's question whether the base branch holds the ticket's work).

Only what git would show as it is: a repository with replace refs or grafts (which change
what git shows of a commit) is not read here, nor is an object in a pack or an alternate.
The caller then asks git.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

#: a commit object is a few hundred bytes; anything bigger is not read here
_MAX_BYTES = 1 << 20


@dataclass(frozen=True)
class LooseCommit:
    parents: tuple[str, ...]
    message: str


def loose_commit(common: Path, sha: str) -> LooseCommit | None:
    """The commit `sha` from its loose object in the repository whose common git directory
    is `common`, or None when git must be asked (see the module docstring)."""
    if _rewritten(common):
        return None
    try:
        packed = (common / "objects" / sha[:2] / sha[2:]).read_bytes()
        inflate = zlib.decompressobj()
        data = inflate.decompress(packed, _MAX_BYTES)
    except (OSError, zlib.error):
        return None
    if inflate.unconsumed_tail or not data.startswith(b"commit "):
        return None
    header, _, body = data.partition(b"\0")
    if header != b"commit %d" % len(body):
        return None
    head, _, message = body.partition(b"\n\n")
    parents = tuple(
        line[len(b"parent ") :].decode("ascii", "replace")
        for line in head.split(b"\n")
        if line.startswith(b"parent ")
    )
    return LooseCommit(parents, message.decode("utf-8", "replace"))


def _rewritten(common: Path) -> bool:
    """Could git show another commit than the object holds (replace refs, grafts)?"""
    if (common / "info" / "grafts").exists():
        return True
    try:
        if any((common / "refs" / "replace").iterdir()):
            return True
    except OSError:
        pass
    try:
        return b" refs/replace/" in (common / "packed-refs").read_bytes()
    except OSError:
        return False
