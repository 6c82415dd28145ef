"""A ticket directory as the exchange area agents work in (tf_fsm.storage.protocol.AgentFiles):
TicketStore's artifacts are files there already, so agents read them and write theirs in place
(no copy), and what an agent wrote is redacted in place when the engine takes it."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path

from tf_fsm.errors import InvalidArtifactNameError, UnsafePathError
from tf_fsm.fs.atomic import appended_link, atomic_write_bytes
from tf_fsm.fs.confine import check_within
from tf_fsm.fs.read import read_bytes
from tf_fsm.storage.artifact_names import artifact_segments
from tf_fsm.storage.redact import Redactor


def confined(directory: Path, name: str, what: str) -> Path:
    """The path of artifact `name` in `directory` (`what` names it in the error):
    InvalidArtifactNameError for a name that is not plain segments, or whose path a symlink
    leads out of the directory."""
    return _checked(directory.joinpath(*artifact_segments(name)), directory, name, what)


def _checked(path: Path, directory: Path, name: str, what: str) -> Path:
    try:
        check_within(path, directory)
    except UnsafePathError as exc:
        reason = f"resolves outside {what} ({exc.link} -> {exc.target})"
        raise InvalidArtifactNameError(name, reason) from None
    return path


class TicketFiles:
    """The ticket directory `dir`, whose symlinks may not lead out of `within`. `appended` are
    the files appended to or locked, never replaced, which may not be symlinks at all;
    `changed` is told when a take rewrote a file (the store's next durable point covers it)."""

    def __init__(
        self,
        directory: Path,
        within: Path,
        redactor: Redactor,
        appended: tuple[Path, ...],
        changed: Callable[[], None],
    ) -> None:
        self.dir, self.within = directory, within
        self._redactor, self._appended, self._changed = redactor, appended, changed
        # name -> its path: the name's checks and the Path object are made once per store
        # (what a name means never changes; where its links lead is checked every time)
        self._paths: dict[str, Path] = {}

    def path(self, name: str) -> Path:
        """`name` is a file name or a relative path of plain segments (`prompts/a-1/x.md`); a
        symlink inside the ticket directory must not lead a read or a write elsewhere."""
        return _checked(self.unchecked(name), self.dir, name, "the ticket directory")

    def unchecked(self, name: str) -> Path:
        """The path `name` names, once the name itself is valid (its links not checked yet:
        a write checks them itself)."""
        path = self._paths.get(name)
        if path is None:
            path = self._paths[name] = self.dir.joinpath(*artifact_segments(name))
        return path

    def take(self, name: str) -> tuple[str, str] | None:
        """The sha256 and text of the file an agent wrote (None if there is none), after taking
        any secret out of it: rewritten atomically, and only when the redactor changes
        something. Bytes that are not UTF-8 are kept as they are."""
        path = self.unchecked(name)
        try:
            data = read_bytes(path)
        except FileNotFoundError:
            return None
        text = data.decode("utf-8", "surrogateescape")
        clean = self._redactor(text)
        if clean != text:
            data = clean.encode("utf-8", "surrogateescape")
            atomic_write_bytes(path, data, within=self.dir, durable=False)
            self._changed()
        return hashlib.sha256(data).hexdigest(), clean

    def check_paths(self) -> None:
        """Before a run writes anything: UnsafePathError if the ticket directory, or a symlink
        in it, leads out of the boundary, or if the journal or the lock (which are appended to
        and locked, never replaced) is a symlink at all."""
        check_within(self.dir, self.within)
        try:
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return
        for entry in entries:
            if not entry.is_symlink():
                continue
            path = Path(entry.path)
            if path in self._appended:
                target = os.path.realpath(path)
                raise UnsafePathError(path, target, self.within, appended_link(target))
            check_within(path, self.within)
