"""What one board page shows: its filter (tag, assignee, search), the cards its columns show
under that filter, and what a change of the board means for that page: the cards to add, move
or remove among the cards its columns show, and each column's true count.

Pages with the same filter get the same message: a change is worked out once per filter, not
once per page, whatever the number of pages open."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from urllib.parse import urlencode

from tf_fsm.ui.cards import COLUMNS, Card

#: cards a column shows when the page loads; "show more" fetches the next ones
PAGE_CARDS = 50
#: the most cards a column shows on a page; past that a filter or a search narrows it
COLUMN_CAP = 200
#: what an empty column would show, so that it does not read as a page still loading
EMPTY_NOTES = {
    "waiting": "no ticket waits on an open dependency",
    "ready": "no ticket is ready to run",
    "running": "no ticket is running",
    "blocked": "no ticket is blocked with retries left",
    "human": "no ticket needs a human",
    "error": "no ticket failed or was interrupted",
    "closed": "no ticket is closed",
}

#: every matching card of each column, in the column's order
Columns = dict[str, list[Card]]


@dataclass(frozen=True)
class Filter:
    """A board's filter: the query parameters `tag`, `assignee` and `q` (a search: a
    case-insensitive substring of the ticket's id, title, body or tags)."""

    tag: str = ""
    assignee: str = ""
    q: str = ""

    @classmethod
    def of(cls, params: Mapping[str, str]) -> Filter:
        def param(name: str) -> str:
            return (params.get(name) or "").strip()

        return cls(param("tag"), param("assignee"), param("q"))

    def query(self) -> str:
        """The filter as a URL's query string (empty when it filters nothing)."""
        pairs = [("tag", self.tag), ("assignee", self.assignee), ("q", self.q)]
        return urlencode([(k, v) for k, v in pairs if v])

    def select(self, columns: Columns, found: Callable[[str], set[str]]) -> Columns:
        """The cards of `columns` this filter keeps; `found(q)` is the ids a search matches."""
        if not (self.tag or self.assignee or self.q):
            return columns
        hits = found(self.q) if self.q else None
        return {
            key: [
                card
                for card in cards
                if (not self.tag or self.tag in card.tags)
                and (not self.assignee or card.assignee == self.assignee)
                and (hits is None or card.id in hits)
            ]
            for key, cards in columns.items()
        }


@dataclass(frozen=True)
class Shown:
    """What the pages of one filter were last told: each column's first COLUMN_CAP cards, and
    each column's count, at the board's `version`."""

    version: int
    windows: dict[str, tuple[Card, ...]]
    counts: dict[str, int]

    @classmethod
    def of(cls, version: int, columns: Columns) -> Shown:
        windows = {key: tuple(columns.get(key, ())[:COLUMN_CAP]) for key, _ in COLUMNS}
        counts = {key: len(columns.get(key, ())) for key, _ in COLUMNS}
        return cls(version, windows, counts)


@dataclass(frozen=True)
class Change:
    """One card a page must place: `card` None removes it; else it goes in its column right
    after the card `after` (None: first), if the page shows that one."""

    id: str
    card: Card | None
    after: str | None = None


def changes(old: Shown, new: Shown) -> list[Change]:
    """What turns the pages that show `old` into `new`: removals first, then each column's
    new or changed cards in the column's order (so a card's predecessor is placed before it).
    A card outside every column's first COLUMN_CAP changes only the counts."""
    placed = {card.id for cards in new.windows.values() for card in cards}
    out = [
        Change(card.id, None)
        for cards in old.windows.values()
        for card in cards
        if card.id not in placed
    ]
    for key, window in new.windows.items():
        before = {card.id: card for card in old.windows.get(key, ())}
        moved = _reordered(old.windows.get(key, ()), window, before)
        previous: str | None = None
        for card in window:
            was = before.get(card.id)
            if was is None or (was is not card and was != card) or card.id in moved:
                out.append(Change(card.id, card, previous))
            previous = card.id
    return out


def _reordered(old: tuple[Card, ...], new: tuple[Card, ...], before: dict[str, Card]) -> set[str]:
    """The cards in both windows whose order among each other changed (a priority changed):
    each whose predecessor among them is another."""
    kept = {card.id for card in new if card.id in before}
    old_order = [card.id for card in old if card.id in kept]
    new_order = [card.id for card in new if card.id in kept]
    if old_order == new_order:
        return set()
    was_after = dict(zip(old_order[1:], old_order, strict=False))
    now_after = dict(zip(new_order[1:], new_order, strict=False))
    return {tid for tid in new_order if was_after.get(tid) != now_after.get(tid)}
