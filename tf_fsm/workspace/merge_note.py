"""The note of a merge under way (`.tf/ralph/merging/<id>.json`, docs/workspaces.md): written
before a merge touches the base branch's checkout and removed once it is done or undone, so
that what a killed merge left is undone by the next one to take the merge queue."""

from __future__ import annotations

from pathlib import Path

from tf_fsm._json_input import load_json
from tf_fsm.errors import CorruptStateError
from tf_fsm.fs.atomic import atomic_write_json

#: what recovery reads in a note
NOTE_KEYS = ("tip", "checkout", "tkFile")


def merging_dir(root: Path) -> Path:
    """Where merges note what they are doing, and where a temporary worktree is made."""
    return root / ".tf" / "ralph" / "merging"


def note_path(root: Path, ticket_id: str) -> Path:
    return merging_dir(root) / f"{ticket_id}.json"


def temp_tree(root: Path, ticket_id: str) -> Path:
    """The temporary worktree of a merge whose base branch is checked out nowhere."""
    return merging_dir(root) / ticket_id


def write_note(root: Path, ticket_id: str, note: dict[str, str]) -> None:
    atomic_write_json(note_path(root, ticket_id), note, within=root)


def noted_tickets(root: Path) -> list[str]:
    """The tickets with a note: merges under way, or killed (under the merge queue's lock, no
    other merge is under way)."""
    try:
        return sorted(p.stem for p in merging_dir(root).glob("*.json") if p.is_file())
    except OSError:
        return []


def read_note(root: Path, ticket_id: str) -> dict[str, str] | None:
    """The ticket's note (its `NOTE_KEYS`), None when there is none."""
    path = note_path(root, ticket_id)
    try:
        note = load_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except ValueError as exc:  # not JSON (nor UTF-8)
        note = str(exc)
    if not isinstance(note, dict) or not all(isinstance(note.get(k), str) for k in NOTE_KEYS):
        raise CorruptStateError(
            path,
            "is not the note of a merge tf-fsm writes",
            f"check {root} and the worktree that has the base branch checked out for a "
            "half-done merge (git status), then remove this file",
        )
    return {k: note[k] for k in NOTE_KEYS}
