"""`ralph`, `run`, `status` and `ui` with `--temporal`: the same commands, on the cluster's
workflows. Only the CLI calls this; it returns the command's exit code.

The dispatcher's clone ends with the files a local run leaves: each ticket's directory is
rewritten from its workflow's history when the workflow ends (and, for `ui`, as it goes)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from temporalio.client import Client
from temporalio.service import RPCError

from tf_fsm.cli.exits import EXIT_ERROR, OUTCOME_CODES
from tf_fsm.errors import EXIT_INTERRUPTED, TfFsmError, UsageError
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.temporal.catch_up import catch_up
from tf_fsm.temporal.commands import Cluster, dispatch, known_tickets, print_rows, rows
from tf_fsm.temporal.connect import Target, connect
from tf_fsm.temporal.dispatcher import DONE, Known
from tf_fsm.temporal.materialize import rewrite_files
from tf_fsm.temporal.orders import TicketEnd, TicketFiles
from tf_fsm.views.terminal import terminal_safe

Say = Callable[[str], None]

#: the options each command honours on a cluster (besides the global ones); any other given
#: is refused, saying so, rather than ignored
HONOURED = {
    "run": {"ticket", "json"},
    "ralph": {"assignee", "tag", "resume_errors"},
    "status": {"json"},
    "ui": {"host", "port", "open"},
}
GLOBAL = {"temporal", "root", "verbose", "quiet", "func", "teardown", "command"}
#: why some are refused: a word more than "not on a cluster"
WHY = {
    "plan": "it reads this clone's files; run it without --temporal",
    "dry_run": "it plans the local loop; `status --temporal` shows the cluster",
    "workers": "the cluster's workers run the tickets (`tf-fsm worker --slots`)",
    "allow_actions": "it acts on this clone's runs, not the cluster's",
}
#: how often `ui --temporal` brings the tickets' files up to date from the workflows
MIRROR_SECONDS = 1.0


def refuse_unhonoured(
    command: str, args: argparse.Namespace, flags: dict[str, tuple[str, object]]
) -> None:
    """UsageError for an option given that the command does not honour on a cluster."""
    honoured = HONOURED[command] | GLOBAL
    for dest, (flag, default) in flags.items():
        if dest not in honoured and getattr(args, dest, default) != default:
            why = WHY.get(dest, "not on a cluster")
            raise UsageError(f"{command} --temporal: {flag} is not honoured ({why})")
    if command == "status" and (args.tickets or getattr(args, "all", False)):
        raise UsageError("status --temporal: shows every ticket of the backlog; name none")


def on_cluster(command: str, args: argparse.Namespace, where: Target) -> int:
    if command == "ui":
        return _ui(args, where)
    try:
        return asyncio.run(_main(command, args, where))
    except KeyboardInterrupt:
        print(
            f"tf-fsm {command}: interrupted; the workflows go on on the cluster "
            f"(`tf-fsm {command} --temporal` again follows them)",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED


async def _main(command: str, args: argparse.Namespace, where: Target) -> int:
    client = await connect(where)
    if command == "status":
        print_rows(await rows(client, where.root), bool(getattr(args, "json", False)), _say)
        return 0
    cluster = Cluster(client, where.task_queue, where.heartbeat_timeout)
    only = [args.ticket] if command == "run" else None
    selection = (getattr(args, "assignee", None), getattr(args, "tag", None))
    resume = bool(getattr(args, "resume_errors", False))
    dispatcher = await dispatch(cluster, where.root, only, _say, selection, resume)
    ends = dispatcher.ends
    keep_files(where.root, {tid: end.files for tid, end in ends.items()}, _say)
    if any(end.status in DONE for end in ends.values()) and (moved := catch_up(where.root)):
        _say(moved)
    if command == "run":
        if args.ticket in dispatcher.refused:
            raise UsageError(f"{args.ticket}: {dispatcher.refused[args.ticket]}")
        return _run_code(ends[args.ticket], bool(args.json))
    return 0


def keep_files(root: Path, files: Mapping[str, TicketFiles], say: Say) -> None:
    """Rewrite each ticket's directory in this clone from its history (nothing for a ticket
    whose history holds no journal yet). A journal here that the history does not begin
    with (a local run's, meanwhile) is never replaced: said, and left."""
    settings = load_settings(root)
    for ticket, held in files.items():
        here = open_store(root, settings, ticket).journal_lines()
        if here != held.journal[: len(here)]:
            say(f"[{ticket}] its files here hold events its workflow's history lacks: left")
        elif held.journal:
            rewrite_files(root, settings, ticket, held)


def _run_code(end: TicketEnd, as_json: bool) -> int:
    """`run --temporal`'s last line (or with --json its document: the ticket, status,
    attempt, reason and phases run) and exit code, as `run`'s for the same status."""
    if as_json:
        keys = ("ticket", "status", "attempt", "reason", "phases")
        print(json.dumps({key: getattr(end, key) for key in keys}))
    else:
        line = f"{end.ticket}: {end.status} after attempt {end.attempt}: "
        closed = end.status in ("closed", "already_closed")
        print(line + terminal_safe(end.reason), file=sys.stdout if closed else sys.stderr)
    return OUTCOME_CODES.get(end.status, EXIT_ERROR)


def _say(line: str) -> None:
    print(terminal_safe(line), flush=True)


def _stderr(line: str) -> None:
    print(f"tf-fsm ui: {terminal_safe(line)}", file=sys.stderr, flush=True)


class ClusterView:
    """The board's view of the cluster (tf_fsm.ui.board.Elsewhere), kept by the mirror."""

    def __init__(self) -> None:
        self._known: dict[str, Known] = {}
        self._lock = threading.Lock()

    def update(self, known: dict[str, Known]) -> None:
        with self._lock:
            self._known = known

    def holds(self, ticket_id: str) -> bool:
        with self._lock:
            found = self._known.get(ticket_id)
        return found is not None and found.running

    def closed(self, ticket_id: str) -> str | None:
        with self._lock:
            found = self._known.get(ticket_id)
        if found is None or found.end is None or found.end.status not in DONE:
            return None
        return "closed by its workflow (on the remote's base: `git pull` brings the tk close)"


def _ui(args: argparse.Namespace, where: Target) -> int:
    """The board over this clone's files, kept up to date from the workflows by a thread."""
    from tf_fsm.ui.server import serve

    view, stop = ClusterView(), threading.Event()
    mirror = threading.Thread(target=_mirror, args=(where, view, stop), name="tf-fsm mirror")
    mirror.start()
    try:
        return serve(
            where.root, host=args.host, port=args.port, open_browser=args.open, elsewhere=view
        )
    finally:
        stop.set()
        mirror.join()


def _mirror(where: Target, view: ClusterView, stop: threading.Event) -> None:
    """Every MIRROR_SECONDS: the workflows' files into this clone (those whose journal
    changed), and what runs and what closed into the board's view."""

    async def loop() -> None:
        client: Client | None = None
        seen: dict[str, int] = {}
        said: str | None = None
        while not stop.is_set():
            try:  # a server not there yet, or gone a while, is waited for
                client = client or await connect(where)
                known = await known_tickets(client, where.root)
                view.update(known)
                files = {t: k.files for t, k in known.items() if k.files is not None}
                changed = {t: f for t, f in files.items() if len(f.journal) != seen.get(t)}
                keep_files(where.root, changed, _stderr)
                seen.update({t: len(f.journal) for t, f in changed.items()})
                said = None
            except (RPCError, TfFsmError) as exc:  # said once, tried again
                if str(exc) != said:
                    print(
                        f"tf-fsm ui: the cluster's tickets not brought here: {exc}", file=sys.stderr
                    )
                said = str(exc)
            await asyncio.sleep(MIRROR_SECONDS)

    asyncio.run(loop())
