"""MemoryStore's exchange area for agents (tf_fsm.storage.protocol.AgentFiles), and its
journal's torn-tail rule (the file journal's, on bytes in memory).

The area is a temp directory made on first use and filled with the store's artifacts; every
artifact written later is copied there too. What an agent writes there is the store's only
when the engine takes it (`take`): redacted, there and in memory."""

from __future__ import annotations

import hashlib
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tf_fsm.core.journal_codec import JournalLineError
from tf_fsm.errors import CorruptStateError
from tf_fsm.fs.atomic import atomic_write_bytes, make_dirs
from tf_fsm.fs.confine import check_within
from tf_fsm.storage.artifact_names import artifact_segments
from tf_fsm.storage.journal_file import torn_tail_line
from tf_fsm.storage.layout import RETRY_STATE
from tf_fsm.storage.redact import Redactor
from tf_fsm.storage.ticket_files import confined


@dataclass
class Records:
    """One ticket's records: artifacts and views by name (bytes, mtime), the journal's
    bytes, and the lock (the holding store's token, its loop)."""

    named: dict[str, tuple[bytes, int]] = field(default_factory=dict)
    journal: bytearray | None = None
    holder: object | None = None
    loop: str | None = None
    exchange: Path | None = None  # the agents' directory, once made


class MemoryStore(Protocol):
    """What the area needs of its store (tf_fsm.storage.memory.MemoryStore)."""

    @property
    def ticket_id(self) -> str: ...
    @property
    def redactor(self) -> Redactor: ...
    @property
    def records(self) -> Records: ...
    def exchange_root(self) -> Path: ...


class MemoryFiles:
    """The agents' directory of one MemoryStore's ticket."""

    def __init__(self, store: MemoryStore) -> None:
        self._store = store

    @property
    def within(self) -> Path:
        return self._store.exchange_root()

    @property
    def dir(self) -> Path:
        """`<exchange root>/tickets/<id>`, made (and filled) on first use."""
        records = self._store.records
        if records.exchange is None:
            directory = self.within / "tickets" / self._store.ticket_id
            make_dirs(directory, within=self.within)
            records.exchange = directory
            for name, (data, _mtime) in sorted(records.named.items()):
                if not name.startswith(RETRY_STATE):
                    self._write(directory, name, data)
        return records.exchange

    def check_name(self, name: str) -> list[str]:
        """`name`'s segments, or InvalidArtifactNameError (the rules of every store)."""
        return artifact_segments(name)

    def path(self, name: str) -> Path:
        return confined(self.dir, name, "the exchange directory")

    def unchecked(self, name: str) -> Path:
        return self.dir.joinpath(*artifact_segments(name))

    def publish(self, name: str, data: bytes) -> None:
        """Copy a record the store just kept into the area, once there is one."""
        directory = self._store.records.exchange
        if directory is not None:
            self._write(directory, name, data)

    def withdraw(self, name: str) -> None:
        """Remove from the area a record the store no longer keeps."""
        directory = self._store.records.exchange
        if directory is not None:
            with suppress(FileNotFoundError):
                confined(directory, name, "the exchange directory").unlink()

    @staticmethod
    def _write(directory: Path, name: str, data: bytes) -> None:
        atomic_write_bytes(
            directory.joinpath(*name.split("/")), data, within=directory, durable=False
        )

    def take(self, name: str) -> tuple[str, str] | None:
        path = self.path(name)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return None
        text = data.decode("utf-8", "surrogateescape")
        clean = self._store.redactor(text)
        if clean != text:
            data = clean.encode("utf-8", "surrogateescape")
            atomic_write_bytes(path, data, within=self.dir, durable=False)
        self._store.records.named[name] = (data, path.stat().st_mtime_ns)
        return hashlib.sha256(data).hexdigest(), clean

    def check_paths(self) -> None:
        """The area, when there is one, must stay inside its root."""
        if self._store.records.exchange is not None:
            check_within(self._store.records.exchange, self.within)


def corrupt_journal(where: Path, problem: str) -> CorruptStateError:
    remedy = "the journal is kept in memory: run the ticket again in a new process"
    return CorruptStateError(where, problem, remedy=remedy)


def tail_repair(journal: bytes, where: Path, store: MemoryStore) -> tuple[int, bytes]:
    """Where to cut `journal` and what to write before the next line so that it starts on a
    line of its own: nothing, a newline (the last event only lacked it), or a
    JournalTailDropped line once the torn bytes are cut (the file journal's rule)."""
    if not journal or journal.endswith(b"\n"):
        return len(journal), b""
    start = journal.rfind(b"\n") + 1
    try:
        dropped = torn_tail_line(journal[start:], store.ticket_id, store.redactor)
    except JournalLineError as exc:
        raise corrupt_journal(where, f"last line: {exc.problem}") from exc
    return (len(journal), b"\n") if dropped is None else (start, dropped)
