"""Live progress for a terminal: a rich status line on a TTY, plain lines otherwise."""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from tf_fsm.views.terminal import terminal_safe


class _Elapsed:
    """Re-rendered on every refresh, so the line shows a running clock."""

    def __init__(self, label: str, started: float) -> None:
        self.label, self.started = label, started

    def __rich__(self) -> str:
        return f"{self.label} · {time.monotonic() - self.started:.0f}s"


class ConsoleObserver:
    """Shows ticket, attempt, phase, role, model and elapsed time while a phase runs."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self._status: Any = None
        self._started = 0.0
        self._label = ""

    def phase_started(self, ticket: str, attempt: int, phase: str, role: str, model: str) -> None:
        self._started = time.monotonic()
        self._label = f"{ticket} · attempt {attempt} · {phase} · {role} · {model}"
        if self.live:
            from rich.console import Console

            self._status = Console(file=self.stream).status(_Elapsed(self._label, self._started))
            self._status.start()
        else:
            print(
                f"[{ticket}] attempt {attempt} {phase}: {role} ({model}) started", file=self.stream
            )

    def phase_finished(self, ticket: str, attempt: int, phase: str, role: str, ok: bool) -> None:
        elapsed = time.monotonic() - self._started
        if self._status is not None:
            self._status.stop()
            self._status = None
        mark = "done" if ok else "FAILED"
        print(
            f"[{ticket}] attempt {attempt} {phase}: {role} {mark} in {elapsed:.1f}s",
            file=self.stream,
        )

    def note(self, ticket: str, text: str) -> None:
        if self._status is not None:  # e.g. a hand-off phase now waits: end the live line
            self._status.stop()
            self._status = None
        # a note may quote an agent (a restart's reason): shown, never acted on by the terminal
        print(f"[{ticket}] {terminal_safe(text)}", file=self.stream)
