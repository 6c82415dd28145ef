"""The 10,000-ticket backlog of the web board's benchmark (bench_ui.py), and `tf-fsm ui` as a
process over it.

bench_selection's backlog (3% with a retry-state.json), and 10% more tickets with the state of
a real run: a few tickets run with the scripted agent in a small project (closed, blocked,
retries exhausted, error), their state directories copied under other ids (journal and views
rewritten to the new id, each invocation given a priced usage so the cards carry a cost; the
other files hard-linked)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_selection import generate

from tf_fsm.engine.orchestrator import run_ticket
from tf_fsm.tk.tickets import new_ticket

STATE_SHARE = 0.10  # of the backlog given a real run's state on top of generate's 3%
URL = re.compile(r" at (http://\S+)")


SETTINGS = {"executor": {"kind": "scripted"}, "workflow": {"escalation": {"maxCostUsd": 5.0}}}
#: a usage each invocation of a copied journal reports, so that its card has a cost
USAGE = {"inputTokens": 12000, "outputTokens": 3000, "costUsd": 0.042}
#: the files of a state directory that name their ticket and are rewritten per copy
REWRITTEN = ("retry-state.json", "events.jsonl", "chain-context.json")
UNFIXABLE = {
    "id": "F1", "severity": "Major", "reviewer": "reviewer-general",
    "text": "`src/a.py:1` - wrong", "fixedBy": [],
}  # fmt: skip
#: template ticket -> (its scenario, how many times it is run)
TEMPLATES: dict[str, tuple[dict[str, Any], int]] = {
    "tpl-closed": ({"findings": []}, 1),
    "tpl-blocked": ({"findings": [UNFIXABLE]}, 1),
    "tpl-exhausted": ({"findings": [UNFIXABLE]}, 4),
    "tpl-error": ({"failures": [{"phase": "implement", "role": "worker", "message": "crash"}]}, 1),
}


def write_project(root: Path, settings: dict[str, Any]) -> None:
    (root / ".tf" / "config").mkdir(parents=True)
    (root / ".tickets").mkdir(exist_ok=True)
    (root / ".tf" / "config" / "settings.json").write_text(json.dumps(settings))


def ticket_text(tid: str, status: str = "open", priority: int = 2) -> str:
    return new_ticket(
        tid,
        f"Benchmark ticket {tid}",
        status=status,
        deps=(),
        priority=priority,
        tags=(),
        created="2026-02-10T12:00:00Z",
        description="Do it.",
    )


# -- the 10k backlog -------------------------------------------------------------------------


def run_templates(where: Path) -> dict[str, Path]:
    """The template tickets run with the scripted agent; their state directories."""
    scenario = {"findings": [], "tickets": {t: s for t, (s, _) in TEMPLATES.items()}}
    (where / "scenario.json").write_text(json.dumps(scenario))
    write_project(where, {"executor": {"kind": "scripted", "scenario": "scenario.json"}})
    for tid, (_, times) in TEMPLATES.items():
        (where / ".tickets" / f"{tid}.md").write_text(ticket_text(tid))
        for _ in range(times):
            run_ticket(where, tid)
    return {tid: where / ".tf" / "knowledge" / "tickets" / tid for tid in TEMPLATES}


def priced(journal: str) -> str:
    """The journal with a usage on every invocation that has none."""
    lines = []
    for line in journal.splitlines():
        event = json.loads(line)
        if event["event"] == "InvocationFinished" and not event.get("usage"):
            event["usage"] = USAGE
        lines.append(json.dumps(event, separators=(",", ":")))
    return "\n".join(lines) + "\n"


def copy_state(template: Path, texts: dict[str, str], target: Path, tid: str) -> None:
    """The template's state directory under `tid`: its files hard-linked, the ones naming the
    ticket written anew."""
    shutil.copytree(template, target, copy_function=os.link, ignore=lambda *_: REWRITTEN)
    for name, text in texts.items():
        (target / name).write_text(text.replace(template.name, tid))


def add_state(root: Path, templates: dict[str, Path]) -> dict[str, int]:
    """A run's state for STATE_SHARE of the tickets that have none yet (every n-th, the
    templates in turn); how many copies of each template."""
    base = root / ".tf" / "knowledge" / "tickets"
    texts = {
        tid: {
            name: priced(text) if name == "events.jsonl" else text
            for name in REWRITTEN
            if (text := _read(d / name)) is not None
        }
        for tid, d in templates.items()
    }
    ids = sorted(p.stem for p in (root / ".tickets").glob("*.md"))
    free = [t for t in ids if not (base / t).exists()]
    wanted = max(1, round(STATE_SHARE * len(ids)))
    copies = dict.fromkeys(templates, 0)
    names = list(templates)
    for n, tid in enumerate(free[:: max(1, len(free) // wanted)][:wanted]):
        name = names[n % len(names)]
        copy_state(templates[name], texts[name], base / tid, tid)
        copies[name] += 1
    return copies


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None


def make_backlog(root: Path, count: int) -> None:
    start = time.perf_counter()
    generate(root, count)
    write_project(root, SETTINGS)
    with tempfile.TemporaryDirectory() as tmp:
        copies = add_state(root, run_templates(Path(tmp)))
    # written back now, so that the kernel's writeback does not share the cores with the timing
    os.sync()
    made = ", ".join(f"{n} {t.removeprefix('tpl-')}" for t, n in copies.items())
    print(
        f"generated {count:,} tickets, {sum(copies.values())} with a run's state ({made}), "
        f"in {time.perf_counter() - start:.1f}s"
    )


@dataclass
class Served:
    url: str
    printed: float  # seconds from the process's start to the printed URL
    proc: subprocess.Popen[str]

    def rss_mb(self, peak: bool = False) -> float:
        """The server's resident memory (peak: the most it ever held), from /proc."""
        key = "VmHWM:" if peak else "VmRSS:"
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith(key):
                return int(line.split()[1]) / 1024
        raise SystemExit(f"no {key} in /proc/{self.proc.pid}/status")


@contextmanager
def ui_server(root: Path) -> Iterator[Served]:
    """`tf-fsm ui --port 0` on `root`, its URL and the seconds until it printed it; SIGTERM
    afterwards."""
    argv = [sys.executable, "-m", "tf_fsm", "--root", str(root), "ui", "--port", "0"]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        found = URL.search(line)
        if not found:
            err = proc.stderr.read() if proc.stderr and proc.poll() is not None else ""
            raise SystemExit(f"tf-fsm ui printed no URL: {line!r} {err}")
        yield Served(found.group(1), time.perf_counter() - start, proc)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
