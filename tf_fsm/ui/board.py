"""The board's model: every ticket's card, kept between requests.

The tk files are scanned with the loop's own `ScanCache` (a stat per unchanged file); a
ticket's state is read again only when one of its state files changed (inode, size, mtime),
so a board over a large backlog costs a stat per file, not a read. `refresh` is what the live
updates call with the tickets the file watcher saw change. A card that did not change is the
same object in the next snapshot, so the live updates tell changes apart by identity first.

Columns keep tk's order (priority, then id), but for `closed`: newest first, by when the
ticket closed (its journal's last TicketClosed, else its tk file's mtime)."""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Protocol

from tf_fsm.settings.load import LoadedSettings
from tf_fsm.storage.backends import ticket_stores
from tf_fsm.storage.layout import LOCK_OWNER, RUN_RECORDS
from tf_fsm.storage.protocol import Store
from tf_fsm.tk.backlog import ScanCache, TkRecord, scan, tickets_dir
from tf_fsm.tk.selection import ready
from tf_fsm.ui.cards import COLUMNS, Card, StateFacts, make_card, read_state
from tf_fsm.ui.filters import Columns, Filter
from tf_fsm.views.status import in_tk_order, tracked_tickets

#: the files whose change means a ticket's card may change (the lock's note: a run started)
STATE_FILES = (*RUN_RECORDS, LOCK_OWNER)
#: how far back the header's tickets per hour looks
RATE_WINDOW = timedelta(hours=24)
#: how often a board that did not change works its header's rate out again (seconds)
RATE_EVERY = 60.0

_Key = tuple[tuple[int, int, int] | None, ...]


@dataclass
class Totals:
    tickets: int = 0
    closed: int = 0
    spend: float = 0.0
    per_hour: float | None = None
    by_column: dict[str, int] = field(default_factory=dict)

    @property
    def closed_share(self) -> float:
        return self.closed / self.tickets if self.tickets else 0.0


@dataclass
class Snapshot:
    cards: dict[str, Card]  # in tk's order (priority, then id)
    columns: Columns  # each column's cards, in the column's order
    totals: Totals
    tags: list[str]
    assignees: list[str]
    problems: list[str]
    version: int = 0  # one more at every snapshot that changed a card


def _stat_key(directory: Path) -> _Key:
    key: list[tuple[int, int, int] | None] = []
    for name in STATE_FILES:
        try:
            st = (directory / name).stat()
        except OSError:
            key.append(None)
        else:
            key.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(key)


class Elsewhere(Protocol):
    """Where tickets run when not in this clone (`ui --temporal`: the cluster's workflows):
    whether one runs there now, and why it is closed there (None: it is not)."""

    def holds(self, ticket_id: str) -> bool: ...

    def closed(self, ticket_id: str) -> str | None: ...


class Board:
    """The project's cards. Thread-safe: the server refreshes it from a worker thread."""

    def __init__(
        self, root: Path, settings: LoadedSettings, elsewhere: Elsewhere | None = None
    ) -> None:
        self.root, self.settings, self.elsewhere = root, settings, elsewhere
        self.stores = ticket_stores(root, settings)
        self.state_dir = self.stores.knowledge / "tickets"
        self._opened: dict[str, Store] = {}  # a store per ticket, for its lock's probe
        self.tickets_dir = tickets_dir(root)
        self.scan_cache = ScanCache()
        self._facts: dict[str, tuple[_Key, StateFacts | None]] = {}
        self._records: dict[str, TkRecord] = {}  # in tk's order
        self._scanned: dict[str, TkRecord] = {}  # as the last scan gave them
        self._tags: list[str] = []
        self._assignees: list[str] = []
        self._ready: set[str] = set()
        self._tracked: set[str] = set()  # tickets with a state directory
        #: what each card was made from (its tk record, its state facts, ready, held, closed
        #: elsewhere), and the card
        self._made: dict[str, tuple[object, object, tuple[bool, bool, str | None], Card]] = {}
        self._closed_at: dict[str, float] = {}  # a closed ticket: when it closed (epoch)
        self._texts: dict[str, tuple[object, str]] = {}  # what a search reads, by file key
        self._changed_at: dict[str, int] = {}  # a ticket: the version its card last changed at
        self._lock = threading.Lock()
        self._rated = 0.0  # when the header's rate was last worked out (monotonic)
        self.snapshot = Snapshot({}, {key: [] for key, _ in COLUMNS}, Totals(), [], [], [])

    def _state(self, ticket_id: str) -> tuple[StateFacts | None, bool]:
        """The ticket's state facts (read again only if its files changed) and whether a run
        holds its lock now. A ticket with no state directory costs nothing."""
        if ticket_id not in self._tracked:
            self._facts.pop(ticket_id, None)
            return None, False
        directory = self.state_dir / ticket_id
        key = _stat_key(directory)
        cached = self._facts.get(ticket_id)
        if cached is None or cached[0] != key:
            # A store of its own, let go once read: a store keeps its decoded journal, and the
            # board would hold every ticket's (a hundred MB at 10,000 tickets).
            store = self.stores(ticket_id) if any(key[:2]) else None
            facts = read_state(self.root, self.settings, ticket_id, store) if store else None
            self._facts[ticket_id] = cached = (key, facts)
        return cached[1], self.held(ticket_id, key[2] is not None)

    def held(self, ticket_id: str, locked_here: bool = True) -> bool:
        """Whether a run holds the ticket's lock now: here (probed unless `locked_here` is
        False: no lock file), or on a cluster's worker."""
        held = locked_here and self._store(ticket_id).lock_holder() is not None
        return held or (self.elsewhere is not None and self.elsewhere.holds(ticket_id))

    def _store(self, ticket_id: str) -> Store:
        store = self._opened.get(ticket_id)
        if store is None:
            store = self._opened[ticket_id] = self.stores(ticket_id)
        return store

    def _card(self, ticket_id: str) -> Card:
        facts, held = self._state(ticket_id)
        record = self._records.get(ticket_id)
        closed = self.elsewhere.closed(ticket_id) if self.elsewhere is not None else None
        ready = ticket_id in self._ready
        made = self._made.get(ticket_id)
        # the scan cache and the state facts keep their objects while their files do not
        # change: then neither does the card, and a rescan of 10k tickets makes none anew
        if (
            made is not None
            and made[0] is record
            and made[1] is facts
            and made[2]
            == (
                ready,
                held,
                closed,
            )
        ):
            return made[3]
        card = make_card(
            ticket_id,
            record,
            facts,
            self.settings,
            ready=ready,
            held=held,
            closed_elsewhere=closed,
        )
        old = self.snapshot.cards.get(ticket_id)
        if old is not None and old == card:
            card = old  # unchanged: the same object, and when it closed is known already
        elif card.column == "closed":
            self._closed_at[ticket_id] = _closed_at(facts, record)
        self._made[ticket_id] = (record, facts, (ready, held, closed), card)
        return card

    def rescan(self) -> list[str]:
        """Scan everything again (tk files through the scan cache); the ids whose card changed."""
        with self._lock:
            backlog = scan(self.tickets_dir, self.scan_cache)
            if not _same(backlog.records, self._scanned):  # else tk's order and ready stand
                self._scanned = backlog.records
                self._records = {r.id: r for r in in_tk_order(backlog.records.values())}
                self._ready = {line.record.id for line in ready(backlog)}
                records = self._records.values()
                self._tags = sorted({t for r in records for t in r.tag_list()})
                self._assignees = sorted({r.assignee for r in records if r.assignee})
            self._tracked = set(tracked_tickets(self.root, self.settings))
            ids = list(self._records)
            ids += sorted(self._tracked.difference(self._records))
            cards = {tid: self._card(tid) for tid in ids}
            problems = [str(p) for p in backlog.problems]
            return self._publish(cards, problems)

    def refresh(self, ticket_ids: set[str]) -> list[str]:
        """Read again the state of these tickets only (their tk files did not change)."""
        with self._lock:
            cards = dict(self.snapshot.cards)
            for tid in ticket_ids:
                if (self.state_dir / tid).is_dir():
                    self._tracked.add(tid)
                if tid in cards or tid in self._tracked:
                    cards[tid] = self._card(tid)
            return self._publish(cards, self.snapshot.problems)

    def view(self, board_filter: Filter) -> tuple[Snapshot, Columns]:
        """The snapshot, and its columns under the filter."""
        snap = self.snapshot
        return snap, board_filter.select(snap.columns, self.search)

    def search(self, q: str) -> set[str]:
        """The tickets whose id, title, body or tags hold `q` (case-insensitive). A file's
        text is read again only when the scan read the file again (its key changed)."""
        needle = q.casefold()
        with self._lock:
            records = list(self._records.values())
            files, ids = self.scan_cache.files, list(self.snapshot.cards)
        texts: dict[str, tuple[object, str]] = {}
        found = {tid for tid in ids if needle in tid.casefold()}
        for record in records:
            hit = files.get(os.path.basename(record.file))  # noqa: PTH119 (a str, 10k times)
            cached = self._texts.get(record.id)
            if hit is not None and cached is not None and cached[0] == hit[0]:
                text = cached[1]
            else:
                text = _searchable(record)
            if hit is not None:
                texts[record.id] = (hit[0], text)
            if needle in text:
                found.add(record.id)
        self._texts = texts
        return found

    def _publish(self, cards: dict[str, Card], problems: list[str]) -> list[str]:
        old = self.snapshot
        changed = [tid for tid, card in cards.items() if old.cards.get(tid) is not card]
        changed += [tid for tid in old.cards if tid not in cards]
        moved = bool(changed) or list(cards) != list(old.cards)  # tk's order changed
        now = time.monotonic()
        if not moved and problems == old.problems:
            if now - self._rated > RATE_EVERY:  # the header's rate slides with the clock
                old.totals, self._rated = self._totals(cards), now
            return []
        self._rated = now
        self.snapshot = Snapshot(
            cards=cards,
            columns=self._columns(cards),
            totals=self._totals(cards),
            tags=self._tags,
            assignees=self._assignees,
            problems=problems,
            version=old.version + (1 if moved else 0),
        )
        for tid in changed:
            self._changed_at[tid] = self.snapshot.version
        return changed

    def changed_since(self, ticket_id: str, version: int) -> bool:
        """Whether the ticket's card changed after the snapshot of `version` (a page rendered
        from that snapshot shows an older card)."""
        return self._changed_at.get(ticket_id, 0) > version

    def _columns(self, cards: dict[str, Card]) -> Columns:
        columns: Columns = {key: [] for key, _ in COLUMNS}
        for card in cards.values():
            columns[card.column].append(card)
        closed_at = self._closed_at
        columns["closed"].sort(key=lambda card: -closed_at.get(card.id, 0.0))  # stable: tk's
        return columns

    def _totals(self, cards: dict[str, Card]) -> Totals:
        totals = Totals(tickets=len(cards), by_column={key: 0 for key, _ in COLUMNS})
        for card in cards.values():
            totals.by_column[card.column] += 1
            totals.spend += card.cost or 0.0
        totals.closed = totals.by_column["closed"]
        totals.per_hour = self._per_hour(datetime.now(UTC))
        return totals

    def _per_hour(self, now: datetime) -> float | None:
        """Tickets closed per hour over the last 24 h of work: the closes journaled in that
        window over the time since the first attempt started in it (None: no close)."""
        since = now - RATE_WINDOW
        starts: list[datetime] = []
        closes = 0
        for _key, facts in self._facts.values():
            if facts is None:
                continue
            starts += [t for t in map(_parse_ts, facts.attempt_starts) if t and t >= since]
            closes += sum(1 for t in map(_parse_ts, facts.closes) if t and t >= since)
        if not closes or not starts:
            return None
        hours = max((now - min(starts)).total_seconds() / 3600, 1 / 60)
        return closes / hours


def _parse_ts(text: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _same(records: dict[str, TkRecord], scanned: dict[str, TkRecord]) -> bool:
    """Whether a scan gave the very records of the one before (the scan cache reuses a
    file's record while the file does not change)."""
    return len(records) == len(scanned) and all(
        a is b for a, b in zip(records.values(), scanned.values(), strict=True)
    )


def _closed_at(facts: StateFacts | None, record: TkRecord | None) -> float:
    """When a closed ticket closed: its journal's last TicketClosed, else its tk file's mtime
    (closed by hand with `tk close`), else never (0)."""
    if facts is not None and facts.closes and (moment := _parse_ts(facts.closes[-1])):
        return moment.timestamp()
    try:
        return os.stat(record.file).st_mtime if record is not None else 0.0  # noqa: PTH116
    except OSError:
        return 0.0


def _searchable(record: TkRecord) -> str:
    """What a search looks in: the id, the title, the tags and the body (the file's text
    after its frontmatter), case-folded."""
    try:
        with open(record.file, encoding="utf-8", errors="replace") as handle:  # noqa: PTH123
            text = handle.read()
    except OSError:
        text = ""
    if text.startswith("---\n") and (end := text.find("\n---\n", 3)) >= 0:
        text = text[end + 5 :]
    return "\n".join((record.id, record.title, record.tags, text)).casefold()
