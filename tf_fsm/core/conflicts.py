"""Merge conflicts, decided without touching anything (docs/workspaces.md, "Conflicts"): the
kind of each conflicting path, whether a file still holds conflict markers, and whether the
merge queue may have an agent resolve a conflict now."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from tf_fsm.core import journal as ev
from tf_fsm.core import workspace_events as wev
from tf_fsm.settings.workspace import Conflicts

#: an unmerged path's status in a rebase (git status --porcelain=v2, `XY`), where "us" is the
#: base side being rebuilt and "them" the ticket's commit being replayed: (kind, what the
#: base side did to it, what the ticket did)
UNMERGED: dict[str, tuple[str, str, str]] = {
    "UU": ("content", "changed it", "changed it"),
    "AA": ("add/add", "added it", "added it"),
    "DU": ("modify/delete", "deleted it", "changed it"),
    "UD": ("modify/delete", "changed it", "deleted it"),
    "AU": ("add/rename", "added or renamed it", "did not have it"),
    "UA": ("add/rename", "did not have it", "added or renamed it"),
    "DD": ("rename/rename", "renamed it away", "renamed it away"),
}
#: git's own line for each conflict (LC_ALL=C): `CONFLICT (<kind>): <what happened>`
_SAID = re.compile(r"^CONFLICT \((?P<kind>[^)]+)\): (?P<text>.*)$")
_OPENING = re.compile(r"^(?:<{7}|>{7})(?:[ \t]|$)")
_MARKER = re.compile(r"^(?:<{7}|>{7}|\|{7})(?:[ \t]|$)|^={7}$")


def said_conflicts(output: str) -> list[tuple[str, str]]:
    """(kind, text) of each `CONFLICT (...)` line git printed."""
    found = []
    for line in output.splitlines():
        if match := _SAID.match(line.strip()):
            found.append((match["kind"], match["text"]))
    return found


def conflict_kind(path: str, xy: str, said: Sequence[tuple[str, str]]) -> str:
    """The kind of the conflict at `path`: git's own word for it when one of its CONFLICT
    lines names the path (rename/delete, file/directory...), else what its status says."""
    for kind, text in said:
        if f" {path} " in f" {text} " or text.endswith(f" in {path}"):
            return kind
    return UNMERGED.get(xy, ("content", "", ""))[0]


def marker_lines(text: str) -> list[int]:
    """The line numbers (from 1) of the conflict markers left in `text`: `<<<<<<<`, `|||||||`
    and `>>>>>>>` lines, and `=======` lines when the text has an opening or closing marker
    too (a bare `=======` is a Markdown or reStructuredText heading underline)."""
    lines = text.splitlines()
    if not any(_OPENING.match(line) for line in lines):
        return []
    return [n for n, line in enumerate(lines, start=1) if _MARKER.match(line)]


def resolutions_tried(events: Iterable[ev.Event]) -> int:
    """The resolutions of the ticket that ended (passed or failed) since its retries were last
    reset. One a kill cut short did not end: the next run does it again, under its number."""
    tried = 0
    for event in events:
        if isinstance(event, ev.RetryStateReset):
            tried = 0
        elif isinstance(event, wev.ResolutionFinished):
            tried += 1
    return tried


def unfinished_resolution(events: Sequence[ev.Event]) -> wev.ResolutionStarted | None:
    """The ticket's last resolution when it started and did not end (a kill cut it short, or
    it is under way), else None."""
    started = [e for e in events if isinstance(e, wev.ResolutionStarted)]
    if not started:
        return None
    last = started[-1]
    ended = any(isinstance(e, wev.ResolutionFinished) and e.number == last.number for e in events)
    return None if ended else last


def resolution_refusal(conflicts: Conflicts, tried: int, budget: str | None) -> str | None:
    """Why no agent resolves the conflict now (a person does), or None: it may. `tried`: the
    resolutions already started (`resolutions_tried`); `budget`: the budget's refusal."""
    if conflicts.mode == "human":
        return "workspace.conflicts.mode is human"
    if tried >= conflicts.maxAttempts:
        return (
            f"{tried} resolution(s) by an agent were tried already "
            f"(workspace.conflicts.maxAttempts {conflicts.maxAttempts})"
        )
    return budget


def conflict_files(events: Iterable[ev.Event]) -> frozenset[str]:
    """The paths the ticket's merges conflicted in, as its journal recorded them."""
    found: set[str] = set()
    for event in events:
        if isinstance(event, wev.MergeRefused | wev.ResolutionStarted):
            found.update(event.files)
    return frozenset(found)


def overlap(
    mine: frozenset[str], running: Mapping[str, frozenset[str]]
) -> tuple[str, list[str]] | None:
    """The first running ticket whose known files meet `mine` (the files a ticket's branch is
    known to change, or conflicted in), and the files they share; None when none does. Two
    such tickets run side by side would conflict at the second one's merge; a ticket whose
    files are not known yet (never run) meets nobody."""
    for ticket, files in running.items():
        if shared := mine & files:
            return ticket, sorted(shared)
    return None
