"""The file events `tf-fsm watch` and `tf-fsm ui` react to: watchdog's observer (inotify on
Linux) over directories of the project, reporting each changed file's path to a callback.

One definition of what counts as a change, so the board moves on the same events that make
`watch` resume a ticket."""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

from watchdog import events as wd
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver

#: Changes only: opened and read-only events would make a watcher react to its own reads.
CHANGE_EVENTS: list[type[wd.FileSystemEvent]] = [
    wd.FileCreatedEvent, wd.FileModifiedEvent, wd.FileMovedEvent, wd.FileDeletedEvent,
    wd.FileClosedEvent, wd.FileAttribEvent,  # `touch resume` on an existing file: attrib only
]  # fmt: skip


class _Handler(wd.FileSystemEventHandler):
    def __init__(self, on_path: Callable[[Path], None], on_error: Callable[[str], None]) -> None:
        self.on_path, self.on_error = on_path, on_error

    def on_any_event(self, event: wd.FileSystemEvent) -> None:
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            if raw and not event.is_directory:
                try:
                    self.on_path(Path(os.fsdecode(raw)))
                except Exception as exc:  # the observer thread must survive anything
                    self.on_error(f"{type(exc).__name__}: {exc}")


def observe(
    directories: Sequence[Path],
    on_path: Callable[[Path], None],
    on_error: Callable[[str], None],
) -> BaseObserver:
    """A started observer calling `on_path` (on its own thread) for every file changed under
    `directories` (each watched recursively; each must exist). `on_error` hears what
    `on_path` raised: the thread goes on."""
    # watchdog's recursive inotify warns when `mkdir -p` (prompts/attempt-1) races its own
    # walk of the new directory; the watch it re-adds is the same one.
    warnings.filterwarnings("ignore", "Callback with id .* already exists", RuntimeWarning)
    observer = Observer()
    handler = _Handler(on_path, on_error)
    for directory in directories:
        observer.schedule(handler, str(directory), recursive=True, event_filter=CHANGE_EVENTS)
    observer.start()
    return observer
