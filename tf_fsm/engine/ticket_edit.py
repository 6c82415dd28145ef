"""Creating and editing tk tickets: one code path for `tf-fsm tickets create|edit` and the
board's forms (tf_fsm.ui.edit runs these functions in-process).

A new ticket is the text `tk create` writes (tf_fsm.tk.tickets.new_ticket) under an id made
by tk's rule that no file in `.tickets/` has: written to a temp file, then linked to its name,
which fails rather than replace a file another writer made meanwhile. An edit changes the
lines `tk edit` (and `tk dep`) would change and keeps every other byte; it is refused when
the file's content hash is not the one the editor read (`if_hash`), and, for a ticket with
records, made under the ticket's lock: a ticket a run holds is refused (TicketLockedError)."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tf_fsm.engine.reset import has_records
from tf_fsm.errors import TicketChangedError, TicketError, TicketFieldError
from tf_fsm.fs.atomic import atomic_write_bytes, fsync_dir
from tf_fsm.fs.confine import check_within
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.tk import authoring as tk
from tf_fsm.tk.backlog import Backlog, scan, tickets_dir
from tf_fsm.tk.tickets import format_list, new_ticket, ticket_path, with_field

#: who holds the lock while an edit writes (`.lock.owner`'s note)
LOCK_NOTE = "tf-fsm tickets edit"


@dataclass(frozen=True)
class Draft:
    """A new ticket's fields as a person gave them (checked by `create_ticket`)."""

    title: str
    description: str = ""
    type_: str = "task"
    priority: str = "2"
    assignee: str = ""
    tags: str | tuple[str, ...] = ()
    deps: str | tuple[str, ...] = ()


@dataclass(frozen=True)
class Changes:
    """An edit: None leaves a field as it is."""

    title: str | None = None
    description: str | None = None
    priority: str | None = None
    tags: str | tuple[str, ...] | None = None
    deps: str | tuple[str, ...] | None = None


@dataclass(frozen=True)
class Written:
    ticket_id: str
    path: Path
    hash: str  # the file's content hash after the write
    changed: list[str] = field(default_factory=list)  # the fields an edit changed


def default_assignee(root: Path) -> str:
    """`tk create`'s default assignee: git's `user.name` in the project ("" without one)."""
    from tf_fsm.process.door import run_process

    try:
        done = run_process(["git", "config", "user.name"], cwd=root, timeout=10)
    except OSError:  # no git at all
        return ""
    return done.stdout.strip() if done.exit_code == 0 else ""


def graph(backlog: Backlog) -> dict[str, list[str]]:
    """Each ticket's dependencies, as tk's awk reads them."""
    return {tid: rec.dep_list() for tid, rec in backlog.records.items()}


def create_ticket(root: Path, draft: Draft) -> Written:
    """Write a new ticket as `tk create` would (dependencies as `tk dep` adds them)."""
    title = tk.title_field(draft.title)
    type_, priority = tk.type_field(draft.type_), tk.priority_field(draft.priority)
    assignee, tags = tk.assignee_field(draft.assignee), tk.list_field("tags", draft.tags)
    description = tk.description_field(draft.description)
    directory = tickets_dir(root)
    deps = tk.list_field("deps", draft.deps)
    tk.check_deps(None, deps, graph(scan(directory)))
    directory.mkdir(parents=True, exist_ok=True)
    for ticket_id in tk.candidate_ids(tk.id_prefix(root)):
        text = new_ticket(
            ticket_id,
            title,
            deps=deps,
            type_=type_,
            priority=priority,
            assignee=assignee,
            tags=tags,
            description=description,
        )
        data = text.encode("utf-8")
        path = directory / f"{ticket_id}.md"
        if _link_new(path, data, root):
            return Written(ticket_id, path, tk.content_hash(data))
    raise AssertionError("unreachable: candidate_ids never ends")


def _link_new(path: Path, data: bytes, root: Path) -> bool:
    """Write `data` as the new file `path`, atomically and durably; False when a file of that
    name exists (never replaced)."""
    if path.exists() or path.is_symlink():
        return False
    check_within(path, root)
    temp = path.with_name(f".{path.name}.{os.getpid()}.new.tmp")
    atomic_write_bytes(temp, data, within=root)
    try:
        os.link(temp, path)
    except FileExistsError:
        return False
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
    fsync_dir(path.parent)
    return True


def edit_ticket(root: Path, ticket_id: str, changes: Changes, if_hash: str | None) -> Written:
    """Change the fields `changes` names, as `tk edit` would, keeping every other byte."""
    store = open_store(root, load_settings(root), ticket_id)  # validates the id
    path = ticket_path(root, ticket_id)
    if not path.is_file():
        raise TicketError(path, f"ticket {ticket_id} not found")
    if not has_records(store):  # never run: nothing to lock, and no directory is made for it
        return _edit(root, ticket_id, path, changes, if_hash)
    store.files.check_paths()
    with store.lock(note=LOCK_NOTE):
        return _edit(root, ticket_id, path, changes, if_hash)


def _edit(root: Path, ticket_id: str, path: Path, changes: Changes, if_hash: str | None) -> Written:
    data = path.read_bytes()  # bytes: CRLF and lone CRs are kept
    if if_hash is not None and tk.content_hash(data) != if_hash:
        raise TicketChangedError(path)
    try:
        before = data.decode("utf-8")
    except UnicodeDecodeError:
        raise TicketError(path, "not UTF-8: edit it in a text editor") from None
    text, changed = _apply(root, ticket_id, before, changes)
    if text == before:
        return Written(ticket_id, path, tk.content_hash(data), [])
    new = text.encode("utf-8")
    atomic_write_bytes(path, new, within=root)
    return Written(ticket_id, path, tk.content_hash(new), changed)


def _apply(root: Path, ticket_id: str, text: str, changes: Changes) -> tuple[str, list[str]]:
    """The new text and the fields it changed. Every field is checked before any is applied,
    in tk edit's order: frontmatter fields, then the title, then the description."""
    fields: list[tuple[str, str]] = []
    if changes.priority is not None:
        fields.append(("priority", tk.priority_field(changes.priority)))
    if changes.tags is not None:
        fields.append(("tags", format_list(tk.list_field("tags", changes.tags))))
    if changes.deps is not None:
        deps = tk.list_field("deps", changes.deps)
        tk.check_deps(ticket_id, deps, graph(scan(tickets_dir(root))))
        fields.append(("deps", format_list(deps)))
    edits: list[tuple[str, Callable[[str], str]]] = [
        (name, functools.partial(_set_field, key=name, value=value)) for name, value in fields
    ]
    if changes.title is not None:
        title = tk.title_field(changes.title)
        edits.append(("title", lambda t: tk.with_title(t, title)))
    if changes.description is not None:
        description = tk.description_field(changes.description)
        edits.append(("description", lambda t: tk.with_description(t, description)))
    changed: list[str] = []
    for name, edit in edits:
        try:
            new = edit(text)
        except ValueError as exc:  # a file without frontmatter
            raise TicketFieldError("ticket file", str(exc)) from None
        if new != text:
            changed.append(name)
        text = new
    return text, changed


def _set_field(text: str, *, key: str, value: str) -> str:
    return with_field(text, key, value)
