"""A large backlog for the board's scale tests, written as tk files directly (a few seconds
for 10,000): a third closed, the rest open, a tenth of the open ones waiting on an open
dependency; three component tags in turn, an assignee on every seventh ticket."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import tk_ticket

TAGS = ("component:api", "component:db", "component:ui")


def ticket_id(n: int) -> str:
    return f"bk-{n:05d}"


def big_ticket(n: int, status: str = "open", body: str = "") -> str:
    """Ticket n's file as `tk create` writes it, with its status, deps and assignee."""
    tid = ticket_id(n)
    text = tk_ticket(tid, title=f"Backlog ticket {n}", body=body or f"Body of ticket {n}.",
                     tags=f"[{TAGS[n % 3]}]")  # fmt: skip
    if n % 10 == 1 and status == "open":  # waits on the ticket before it, which is open
        text = text.replace("deps: []", f"deps: [{ticket_id(n - 1)}]")
    if n % 7 == 0:
        text = text.replace("type: task", "type: task\nassignee: alice")
    return text.replace("status: open", f"status: {status}")


def status_of(n: int) -> str:
    return "closed" if n % 3 == 2 else "open"


def write_backlog(root: Path, count: int) -> Path:
    (root / ".tf" / "config").mkdir(parents=True, exist_ok=True)
    (root / ".tf" / "config" / "settings.json").write_text('{"executor": {"kind": "scripted"}}')
    tickets = root / ".tickets"
    tickets.mkdir(exist_ok=True)
    for n in range(count):
        (tickets / f"{ticket_id(n)}.md").write_text(big_ticket(n, status_of(n)), "utf-8")
    return root


def replace(path: Path, text: str) -> None:
    """Writes `path` by rename, as tk and editors do."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)
