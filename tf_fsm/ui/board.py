"""The board's model: every ticket's card, kept between requests.

The tk files are scanned with the loop's own `ScanCache` (a stat per unchanged file); a
ticket's state is read again only when one of its state files changed (inode, size, mtime),
so a board over a large backlog costs a stat per file, not a read. `refresh` is what the live
updates call with the tickets the file watcher saw change."""

from __future__ import annotations

import threading
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
from tf_fsm.views.status import in_tk_order, tracked_tickets

#: the files whose change means a ticket's card may change (the lock's note: a run started)
STATE_FILES = (*RUN_RECORDS, LOCK_OWNER)
#: how far back the header's tickets per hour looks
RATE_WINDOW = timedelta(hours=24)

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
    totals: Totals
    tags: list[str]
    assignees: list[str]
    problems: list[str]


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
        self._records: dict[str, TkRecord] = {}
        self._ready: set[str] = set()
        self._tracked: set[str] = set()  # tickets with a state directory
        self._lock = threading.Lock()
        self._unsent: set[str] = set()  # cards changed since the live updates last took them
        self.snapshot = Snapshot({}, Totals(), [], [], [])

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
            facts = read_state(self.root, self.settings, ticket_id) if any(key[:2]) else None
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
        return make_card(
            ticket_id,
            record,
            facts,
            self.settings,
            ready=ticket_id in self._ready,
            held=held,
            closed_elsewhere=closed,
        )

    def rescan(self) -> list[str]:
        """Scan everything again (tk files through the scan cache); the ids whose card changed."""
        with self._lock:
            backlog = scan(self.tickets_dir, self.scan_cache)
            self._records = {r.id: r for r in in_tk_order(backlog.records.values())}
            self._ready = {line.record.id for line in ready(backlog)}
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

    def take_changed(self) -> list[str]:
        """The cards changed since the last call, whoever refreshed them (a page load rescans
        too): the live updates send each change once."""
        with self._lock:
            changed, self._unsent = sorted(self._unsent), set()
            return changed

    def _publish(self, cards: dict[str, Card], problems: list[str]) -> list[str]:
        old = self.snapshot.cards
        changed = [tid for tid, card in cards.items() if old.get(tid) != card]
        changed += [tid for tid in old if tid not in cards]
        self._unsent.update(changed)
        records = self._records.values()
        self.snapshot = Snapshot(
            cards=cards,
            totals=self._totals(cards),
            tags=sorted({t for r in records for t in r.tag_list()}),
            assignees=sorted({r.assignee for r in records if r.assignee}),
            problems=problems,
        )
        return changed

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


def filtered(cards: dict[str, Card], tag: str | None, assignee: str | None) -> list[Card]:
    """The cards a board filtered by tag and by assignee shows, in tk's order."""
    return [
        card
        for card in cards.values()
        if (not tag or tag in card.tags) and (not assignee or card.assignee == assignee)
    ]
