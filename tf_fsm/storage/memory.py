"""MemoryStore: a ticket's records in this process's memory (tf_fsm.storage.protocol.Store).

Nothing of the ticket is kept on disk: when the process ends, its records are gone. For a run
that needs no history (a trial, a test, a throw-away project), and the proof that the rest of
tf_fsm speaks to a Store, not to files. The journal is kept as encoded lines, so the codec,
the redaction and the torn-tail rules are those of the file journal.

Records are shared through a registry keyed by (namespace, ticket id): two MemoryStores of the
same ticket in the same namespace see the same records, and the lock is exclusive between
them. Agents are processes: they get an exchange directory (a temp directory, made on first
use, removed when the namespace is closed or the process exits) holding the store's
artifacts; what an agent writes there becomes the store's when the engine takes it.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tf_fsm._json_input import load_json
from tf_fsm.core.journal import (
    Event,
    RetryStateReset,
    ViewsChecked,
    ViewsSynced,
    timestamp,
)
from tf_fsm.core.journal_codec import JournalLineError, JournalRead, decode
from tf_fsm.core.resume import Seen
from tf_fsm.core.state import RetryState
from tf_fsm.errors import TicketLockedError
from tf_fsm.fs.atomic import json_text
from tf_fsm.storage.journal_file import JOURNAL_TAIL_BYTES, now_stamp, running_phase_in
from tf_fsm.storage.journal_lines import complete_lines, journal_data, rebuilt_views
from tf_fsm.storage.layout import JOURNAL, RETRY_STATE
from tf_fsm.storage.memory_files import MemoryFiles, Records, corrupt_journal, tail_repair
from tf_fsm.storage.protocol import Capabilities
from tf_fsm.storage.redact import Redactor
from tf_fsm.storage.redacted_json import redacted_lines
from tf_fsm.storage.retry_file import (
    backup_name,
    parse_retry_state,
    peek_state,
    retry_count_before,
)
from tf_fsm.storage.ticket_id import validate_ticket_id
from tf_fsm.storage.views import VIEWS, crashed, last_images, view_image


class Namespace:
    """The records of one namespace's tickets, and where its exchange directories are."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.tickets: dict[str, Records] = {}
        self.guard = threading.Lock()
        self._root: Path | None = None

    def records(self, ticket_id: str) -> Records:
        with self.guard:
            return self.tickets.setdefault(ticket_id, Records())

    def exchange_root(self) -> Path:
        with self.guard:
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="tf-fsm-memory-")).resolve()
            return self._root

    def close(self) -> None:
        with self.guard:
            root, self._root = self._root, None
            self.tickets.clear()
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


_NAMESPACES: dict[str, Namespace] = {}
_REGISTRY_GUARD = threading.Lock()


def namespace(name: str) -> Namespace:
    """The namespace `name` (made on first use): `ticket_stores` uses the knowledge directory."""
    with _REGISTRY_GUARD:
        return _NAMESPACES.setdefault(name, Namespace(name))


def close_namespace(name: str) -> None:
    """Forget every record of namespace `name` and remove its exchange directories."""
    with _REGISTRY_GUARD:
        found = _NAMESPACES.pop(name, None)
    if found is not None:
        found.close()


@atexit.register
def _close_all() -> None:
    for name in list(_NAMESPACES):
        close_namespace(name)


class MemoryStore:
    """One ticket's records in namespace `space`. Build one per command, as TicketStore."""

    capabilities = Capabilities(shared_across_processes=False, pi_ticketflow_files=False)

    def __init__(self, space: str, ticket_id: str, redactor: Redactor | None = None) -> None:
        self.ticket_id = validate_ticket_id(ticket_id)
        self.redactor = redactor if redactor is not None else Redactor.from_environ(os.environ)
        self._space = namespace(space)
        self._rec = self._space.records(self.ticket_id)
        #: how records are named in errors: `memory:<namespace>/<ticket>/<record>`
        self.where = Path(f"memory:{space}") / self.ticket_id
        self.files = MemoryFiles(self)
        self._written: dict[str, str] = {}
        self._on_durable: Callable[[], None] | None = None
        self._changed = False

    # --- records, as the exchange area reaches them -------------------------------------

    def exchange_root(self) -> Path:
        return self._space.exchange_root()

    @property
    def records(self) -> Records:
        return self._rec

    def put(self, name: str, data: bytes) -> None:
        """Keep `data` as record `name`, with an mtime later than any it had."""
        before = self._rec.named.get(name)
        mtime = max(time.time_ns(), before[1] + 1 if before else 0)
        self._rec.named[name] = (data, mtime)
        self._changed = True
        if not name.startswith(RETRY_STATE):  # agents are not handed the retry state
            self.files.publish(name, data)

    # --- durability --------------------------------------------------------------------

    @contextmanager
    def batch(self, on_durable: Callable[[], None] | None = None) -> Iterator[None]:
        """A run; its durable points call `on_durable` (memory itself has nothing to sync)."""
        self._changed, self._on_durable = False, on_durable
        try:
            yield
        finally:
            try:
                self.sync()
            finally:
                self._on_durable = None

    def sync(self) -> None:
        if not self._changed:
            return
        self.durable_point()
        synced = ViewsSynced(ts=now_stamp(), ticket=self.ticket_id)
        self._append(redacted_lines([synced], self.redactor)[0])

    def durable_point(self) -> None:
        if self._on_durable is not None:
            self._on_durable()
        self._changed = False

    def sync_journal(self) -> None:
        """Nothing waits: an append is in the journal as soon as it is made."""

    @contextmanager
    def deferred_views(self) -> Iterator[None]:
        """Nothing to defer: a view is kept with its image at once."""
        yield

    def repair_views(self, events: list[Event]) -> list[str]:
        if not crashed(events):
            return []
        repaired = []
        for name, content in last_images(events).items():
            if content is not None and self._view_differs(name, content):
                self.put(name, json_text(content).encode())
                repaired.append(name)
        checked = ViewsChecked(ts=now_stamp(), ticket=self.ticket_id, repaired=repaired)
        self.append_event(checked, durable=False)
        return repaired

    def _view_differs(self, name: str, content: dict[str, Any]) -> bool:
        found = self._rec.named.get(name)
        try:
            return found is None or bool(load_json(found[0].decode("utf-8")) != content)
        except ValueError:  # not UTF-8, not JSON, beyond the limits
            return True

    # --- artifacts ---------------------------------------------------------------------

    def write_artifact(self, name: str, text: str, only_if_changed: bool = False) -> None:
        self.files.check_name(name)  # refused as every store refuses it
        data = self.redactor(text).encode("utf-8")
        found = self._rec.named.get(name)
        if not (only_if_changed and found is not None and found[0] == data):
            self.put(name, data)
        self._written[name] = hashlib.sha256(data).hexdigest()

    def take_written(self) -> dict[str, str]:
        written, self._written = self._written, {}
        return written

    def seen(self, name: str) -> Seen | None:
        self.files.check_name(name)
        found = self._rec.named.get(name)
        return None if found is None else Seen(hashlib.sha256(found[0]).hexdigest(), found[1])

    def read_artifact(self, name: str) -> str | None:
        self.files.check_name(name)
        found = self._rec.named.get(name)
        return None if found is None else found[0].decode("utf-8", errors="replace")

    # --- retry state -------------------------------------------------------------------

    def load_retry_state(self) -> RetryState | None:
        found = self._rec.named.get(RETRY_STATE)
        if found is None:
            return None
        return parse_retry_state(found[0], self.where / RETRY_STATE, self.ticket_id)

    def peek_retry_state(self) -> dict[str, Any] | None:
        found = self._rec.named.get(RETRY_STATE)
        return None if found is None else peek_state(found[0])

    def save_retry_state(self, state: RetryState) -> None:
        if state.ticketId != self.ticket_id:
            raise ValueError(
                f"state of {state.ticketId!r} given to the store of {self.ticket_id!r}"
            )
        self.load_retry_state()  # a record that cannot be trusted is not overwritten
        self.save_view(RETRY_STATE, state.to_json_dict())

    def save_view(self, name: str, content: dict[str, Any]) -> None:
        image, text = view_image(name, content, self.redactor, self.ticket_id, now_stamp())
        self.append_event(image)
        self.put(name, text.encode("utf-8"))

    def retry_backup_name(self, now: datetime) -> str:
        return backup_name(now, self._rec.named.__contains__)

    def reset_retry_state(self, now: datetime) -> str | None:
        found = self._rec.named.get(RETRY_STATE)
        if found is None:
            return None
        count = retry_count_before(found[0], self.where / RETRY_STATE, self.ticket_id)
        backup = self.retry_backup_name(now)
        self._rec.named[backup] = self._rec.named.pop(RETRY_STATE)
        reset = RetryStateReset(
            ts=timestamp(now), ticket=self.ticket_id, backup=backup, retryCountBefore=count
        )
        self.append_event(reset)
        return backup

    # --- journal -----------------------------------------------------------------------

    def append_event(self, event: Event, durable: bool = True) -> None:
        self.append_events([event], durable)

    def append_events(self, events: list[Event], durable: bool = True) -> None:
        if not events:
            return
        for event in events:
            if event.ticket != self.ticket_id:
                raise ValueError(
                    f"event of {event.ticket!r} given to the store of {self.ticket_id!r}"
                )
        self._append(redacted_lines(events, self.redactor)[0])
        self._changed = True

    def _append(self, data: bytes) -> None:
        journal = self._rec.journal if self._rec.journal is not None else bytearray()
        cut, repair = tail_repair(bytes(journal), self.where / JOURNAL, self)
        del journal[cut:]
        journal += repair + data
        self._rec.journal = journal

    def read_events(self) -> JournalRead:
        if self._rec.journal is None:
            return JournalRead([], None)
        try:
            return decode(bytes(self._rec.journal))
        except JournalLineError as exc:
            problem = f"line {exc.line_number}: {exc.problem}"
            raise corrupt_journal(self.where / JOURNAL, problem) from exc

    def replace_journal(self, lines: Sequence[str]) -> list[str]:
        data, events = journal_data(lines, self.ticket_id, self.redactor, self.where / JOURNAL)
        self._rec.journal = bytearray(data) if data else None
        for name, text in rebuilt_views(events).items():
            if text is not None:
                self.put(name, text.encode("utf-8"))
            else:
                self._rec.named.pop(name, None)
                self.files.withdraw(name)
        return list(VIEWS)

    def journal_lines(self) -> list[str]:
        return complete_lines(bytes(self._rec.journal or b""))

    def journal_size(self) -> int | None:
        return None if self._rec.journal is None else len(self._rec.journal)

    def running_phase(self, attempt: int) -> str | None:
        journal = self._rec.journal or b""
        return running_phase_in(bytes(journal[-JOURNAL_TAIL_BYTES:]), attempt)

    # --- lock --------------------------------------------------------------------------

    @contextmanager
    def lock(self, note: str | None = None, *, loop: str | None = None) -> Iterator[None]:
        """Exclusive against every other store of the ticket in this process's namespace;
        released when the block ends (and with the process, which takes the records too)."""
        token = object()
        with self._space.guard:
            if self._rec.holder is not None:
                raise TicketLockedError(self.ticket_id, os.getpid(), self.where / "lock")
            self._rec.holder, self._rec.loop = token, loop
        try:
            yield
        finally:
            with self._space.guard:
                if self._rec.holder is token:
                    self._rec.holder, self._rec.loop = None, None

    def lock_holder(self) -> int | None:
        return None if self._rec.holder is None else os.getpid()

    def lock_loop(self) -> str | None:
        return self._rec.loop if self._rec.holder is not None else None


if TYPE_CHECKING:
    from tf_fsm.storage.protocol import Store

    def _is_a_store(store: MemoryStore) -> Store:
        """Never called: mypy checks here that MemoryStore has every member of `Store`."""
        return store
