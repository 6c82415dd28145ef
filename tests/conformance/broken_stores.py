"""Deliberately broken stores: each is MemoryStore with one promise of the Store protocol
broken, as a plausible bug would break it. test_mutants.py runs the Store suite
(tf_fsm.conformance.store) against each and checks that every one fails it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

from tf_fsm.conformance.stores import BACKENDS, StoreBackend
from tf_fsm.core.journal import Event
from tf_fsm.core.journal_codec import encode
from tf_fsm.core.state import RetryState
from tf_fsm.storage.memory import MemoryStore
from tf_fsm.storage.protocol import Store
from tf_fsm.storage.redact import Redactor


class JournalNotRedacted(MemoryStore):
    """Keeps events as they came, secrets and all."""

    def append_events(self, events: list[Event], durable: bool = True) -> None:
        for event in events:
            if event.ticket != self.ticket_id:
                raise ValueError(f"event of {event.ticket!r}")
        self._append(b"".join(encode(e) for e in events))


class ReadCreatesState(MemoryStore):
    """Reading a missing retry state leaves an empty one behind."""

    def load_retry_state(self) -> RetryState | None:
        self.records.named.setdefault("chain-context.json", (b"{}", 1))
        return super().load_retry_state()


class ReentrantLock(MemoryStore):
    """Never refuses the lock."""

    @contextmanager
    def lock(self, note: str | None = None, *, loop: str | None = None) -> Iterator[None]:
        yield


class TornTailDroppedSilently(MemoryStore):
    """Cuts a torn tail without recording it."""

    def _append(self, data: bytes) -> None:
        journal = self.records.journal or bytearray()
        if journal and not journal.endswith(b"\n"):
            del journal[journal.rfind(b"\n") + 1 :]
        self.records.journal = journal + data


class ViewNotJournaled(MemoryStore):
    """Writes a view without its after-image in the journal."""

    def save_view(self, name: str, content: dict[str, Any]) -> None:
        from tf_fsm.fs.atomic import json_text

        self.put(name, self.redactor(json_text(content)).encode())


class WrittenNotForgotten(MemoryStore):
    """Hands back the same written artifacts again and again."""

    def take_written(self) -> dict[str, str]:
        return dict(self._written)


class CrashNotRepaired(MemoryStore):
    """Never rebuilds a view after a crash."""

    def repair_views(self, events: list[Event]) -> list[str]:
        return []


class BackupOverwritten(MemoryStore):
    """Names every backup of a moment alike: the second reset overwrites the first."""

    def retry_backup_name(self, now: datetime) -> str:
        return f"retry-state.json.bak.{now:%Y%m%dT%H%M%SZ}"


MUTANTS: tuple[type[MemoryStore], ...] = (
    JournalNotRedacted, ReadCreatesState, ReentrantLock, TornTailDroppedSilently,
    ViewNotJournaled, WrittenNotForgotten, CrashNotRepaired, BackupOverwritten,
)  # fmt: skip


def _builder(cls: type[MemoryStore]) -> Callable[[Path, str, Redactor | None], Store]:
    def build(root: Path, ticket_id: str, redactor: Redactor | None = None) -> Store:
        return cls(str(root), ticket_id, redactor)

    return build


for _cls in MUTANTS:  # each by `module:function`, as the suite builds a store
    globals()[f"build_{_cls.__name__}"] = _builder(_cls)

BROKEN: dict[str, StoreBackend] = {
    cls.__name__: dataclasses.replace(
        BACKENDS["MemoryStore"],
        name=cls.__name__,
        spec=f"tests.conformance.broken_stores:build_{cls.__name__}",
    )
    for cls in MUTANTS
}
