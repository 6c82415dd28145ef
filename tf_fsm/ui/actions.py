"""What the board may do with `--allow-actions`: run a ticket now, stop its run, resume it,
reset its retries, merge it. Each is the CLI itself (`tf-fsm run|stop|resume|reset|merge <id>`)
started as a child process through the one process door: the same code paths, the same ticket
lock (a ticket a loop is running is refused with exit 75), and the same exit codes, which the
board reports. This is the one place the board starts a CLI child.
A child dies with the server (the door's parent-death signal); stopping the server first
interrupts them (SIGTERM: an interrupted run stays resumable)."""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tf_fsm.process.door import run_process, signal_children

#: action name -> the CLI command it runs
ACTIONS: dict[str, str] = {
    "run": "run",
    "stop": "stop",
    "resume": "resume",
    "reset": "reset",
    "merge": "merge",
}
#: the one action that runs while a run holds the ticket (beside the board's own run of it)
STOP = "stop"
#: how long a stopping server waits for interrupted actions to finish their clean-up
STOP_SECONDS = 10.0
#: how much of a command's output the board shows
OUTPUT_CHARS = 2000


def _slot(ticket: str, action: str) -> tuple[str, bool]:
    """Where an action counts as running: a stop beside the ticket's other action (it may be
    the board's own run of it that is stopped), every other action in the ticket's one slot."""
    return ticket, action == STOP


class Actions:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.running: dict[tuple[str, bool], tuple[str, threading.Thread]] = {}
        self._lock = threading.Lock()

    def busy(self, ticket: str) -> str | None:
        """The action (not a stop) this server runs on `ticket` now, if any."""
        with self._lock:
            running = self.running.get(_slot(ticket, ""))
        return running[0] if running else None

    def start(self, ticket: str, action: str, done: Callable[[str, dict[str, Any]], None]) -> bool:
        """Start `action` on `ticket` in the background; False when one runs for it already."""
        argv = [sys.executable, "-m", "tf_fsm", "--root", str(self.root), ACTIONS[action], ticket]
        slot = _slot(ticket, action)
        with self._lock:
            if slot in self.running:
                return False
            thread = threading.Thread(
                target=self._run,
                args=(ticket, action, argv, done),
                daemon=True,
                name=f"tf-fsm ui {action} {ticket}",
            )
            self.running[slot] = (action, thread)
        thread.start()
        return True

    def _run(
        self, ticket: str, action: str, argv: list[str], done: Callable[[str, dict[str, Any]], None]
    ) -> None:
        try:
            result = run_process(argv, cwd=self.root)
            output = (result.stdout + result.stderr).strip()[-OUTPUT_CHARS:]
            report = {
                "ticket": ticket,
                "action": action,
                "state": "done",
                "exitCode": result.exit_code,
                "output": output,
            }
        except Exception as exc:  # the board says what went wrong rather than nothing
            report = {
                "ticket": ticket,
                "action": action,
                "state": "done",
                "exitCode": None,
                "output": str(exc),
            }
        finally:
            with self._lock:
                self.running.pop(_slot(ticket, action), None)
        done(ticket, report)

    def stop(self) -> None:
        """Interrupt running actions and wait for them (then they are killed)."""
        with self._lock:
            threads = [thread for _, thread in self.running.values()]
        if not threads:
            return
        signal_children(signal.SIGTERM)
        for thread in threads:
            thread.join(STOP_SECONDS / len(threads))
        if any(t.is_alive() for t in threads):
            signal_children(signal.SIGKILL)
