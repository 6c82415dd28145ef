"""The Temporal commands (docs/many-hosts.md): `tf-fsm worker`, `tf-fsm temporal dev`, and
the `--temporal` flag of `ralph`, `run`, `status` and `ui`. They need the `temporal` extra;
without it each says how to install it and exits 2. The SDK is imported only once a command
needs it, so that no other command pays for it at start-up."""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tf_fsm.cli.common import add_global_arguments, project_root
from tf_fsm.errors import UsageError

Command = Callable[[argparse.Namespace], int]

WORKER_EPILOG = """\
polls the shared task queue and QUEUE@HOST (its own), runs at most --slots phases at once in
this clone; Ctrl-C or SIGTERM stops polling, lets running phases finish for --grace seconds,
then hands them back (retried on another worker, resumed at their last checkpoint)

exit codes:
  0    stopped by Ctrl-C or SIGTERM
  1    unexpected internal error (traceback with --verbose)
  2    bad input: usage, settings file, no Temporal address, a clone without an `origin`
       remote, the temporal extra not installed (the message says how to install it)
  69   no Temporal server answered at the address (named), or it refused the connection
"""
DEV_EPILOG = """\
runs `temporal server start-dev` from the installed temporal extra on 127.0.0.1 only, headless,
its history in an SQLite file; prints its address, then runs until Ctrl-C or SIGTERM, and the
server stops with it

exit codes:
  0    stopped by Ctrl-C or SIGTERM
  1    the dev server exited on its own or never listened (its output is above)
  2    bad input: usage, a port out of range or taken, no project found (without --db),
       the temporal extra not installed (the message says how to install it)
"""
TEMPORAL_HELP = (
    "on the Temporal cluster at HOST:PORT (without a value: $TF_FSM_TEMPORAL, else "
    "temporal.address); $TF_FSM_TEMPORAL set stands for this flag (docs/many-hosts.md)"
)


def _address(value: str) -> str:
    from tf_fsm.settings.temporal import check_address

    if value == "":  # `--temporal` without a value (argparse converts the const too)
        return value
    try:
        return check_address(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _queue(value: str) -> str:
    from tf_fsm.settings.temporal import check_queue

    try:
        return check_queue(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _count(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if not 1 <= number <= 256:
        raise argparse.ArgumentTypeError(f"{value!r}: a whole number, 1 to 256")
    return number


def _seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 <= number <= 86_400:  # NaN fails this too
        raise argparse.ArgumentTypeError(f"{value!r}: seconds, 0 to 86400")
    return number


def temporal_requested(args: argparse.Namespace) -> bool:
    """Whether the command runs on Temporal: `--temporal` given, or $TF_FSM_TEMPORAL set (the
    settings' `temporal.address` alone does not: the workers' own `tf-fsm run` children read
    the same file, and must run where they are)."""
    from tf_fsm.settings.defaults import TEMPORAL_ENV  # not .temporal: status reads no pydantic

    return getattr(args, "temporal", None) is not None or bool(os.environ.get(TEMPORAL_ENV))


def require_extra() -> None:
    """TemporalMissing (exit 2, the install command in its message) without the extra."""
    from tf_fsm.temporal.binary import require_sdk

    require_sdk()


def add_temporal_flag(p: argparse.ArgumentParser, command: str) -> None:
    """`--temporal [HOST:PORT]` on a command that runs locally without it; the command's
    `func` (set before) runs when Temporal is not requested."""
    p.add_argument(
        "--temporal", nargs="?", const="", type=_address, metavar="HOST:PORT", help=TEMPORAL_HELP
    )
    # the command's options as a user would write them, and their defaults: those the cluster
    # does not honour are refused when given (tf_fsm.cli.on_cluster)
    flags = {
        a.dest: (_spelling(a.option_strings), a.default) for a in p._actions if a.option_strings
    }
    local = p.get_default("func")
    p.set_defaults(func=functools.partial(_local_or_temporal, command, local, flags))


def _spelling(options: Sequence[str]) -> str:
    """An option as its help names it first: its first long form (`--plan`, not `--dry-run`)."""
    return next((o for o in options if o.startswith("--")), options[0])


def _local_or_temporal(
    command: str, local: Command, flags: dict[str, tuple[str, Any]], args: argparse.Namespace
) -> int:
    if not temporal_requested(args):
        return local(args)
    # the SDK's threads outlive the command: the interpreter's teardown aborted now and then
    args.teardown = False
    require_extra()
    from tf_fsm.cli.on_cluster import on_cluster, refuse_unhonoured
    from tf_fsm.temporal.connect import target

    refuse_unhonoured(command, args, flags)
    root = project_root(args)
    return on_cluster(command, args, target(root, args.temporal or None))


def add_temporal_parsers(add: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """`tf-fsm worker` and `tf-fsm temporal dev`, through the parser's `add(name, help)`."""
    p = add("worker", "run tickets' phases from a Temporal cluster in this clone (many hosts)")
    p.epilog = WORKER_EPILOG
    p.add_argument(
        "--temporal",
        type=_address,
        metavar="HOST:PORT",
        help="the Temporal cluster's frontend (default $TF_FSM_TEMPORAL, else temporal.address)",
    )
    p.add_argument("--namespace", help="the Temporal namespace (default temporal.namespace)")
    p.add_argument(
        "--task-queue",
        type=_queue,
        metavar="QUEUE",
        help="the shared task queue (default temporal.taskQueue)",
    )
    p.add_argument("--slots", type=_count, default=1, help="phases at once (default 1)")
    p.add_argument(
        "--grace",
        type=_seconds,
        metavar="SECONDS",
        default=30.0,
        help="on Ctrl-C/SIGTERM, how long running phases may go on (default 30)",
    )
    p.add_argument(
        "--host",
        metavar="NAME",
        help="this worker's host in its queue's name, QUEUE@NAME (default: the "
        "machine's name and the clone's path)",
    )
    # ended without the interpreter's teardown (cli.main._end_process): the SDK's threads,
    # still up after a failed connection, aborted Python's finalization (SIGABRT) now and then
    p.set_defaults(func=cmd_worker, teardown=False)

    p = add("temporal", "a Temporal dev server for one machine or a trial (docs/many-hosts.md)")
    actions = p.add_subparsers(dest="temporal_command", metavar="ACTION", required=True)
    dev = actions.add_parser(
        "dev",
        help="start the pinned dev server on 127.0.0.1",
        description="start the pinned Temporal dev server on 127.0.0.1",
        epilog=DEV_EPILOG,
        formatter_class=p.formatter_class,  # the parser's own: no shutil at start-up
    )
    add_global_arguments(dev, after_command=True)
    dev.add_argument(
        "--db",
        metavar="FILE",
        help="its SQLite history (default .tf/temporal/dev.db in the project)",
    )
    dev.add_argument(
        "--port", type=int, default=7233, help="gRPC port (default 7233; 0: a free one)"
    )
    dev.set_defaults(func=cmd_temporal_dev)


def cmd_worker(args: argparse.Namespace) -> int:
    require_extra()
    import asyncio

    from tf_fsm.settings.temporal import TEMPORAL_ENV
    from tf_fsm.temporal.connect import target
    from tf_fsm.temporal.identity import default_host, origin

    root = project_root(args)
    if origin(root) is None:
        raise UsageError(
            f"{root}: no `origin` remote: a worker runs in a clone of the shared repository "
            "(`git clone URL`), whose `origin` its phases fetch from and push to"
        )
    where = target(root, args.temporal, args.namespace, args.task_queue)
    os.environ.pop(TEMPORAL_ENV, None)  # the phases' `tf-fsm run` children run here, locally
    return asyncio.run(_work(where, args.host or default_host(root), args.slots, args.grace))


async def _work(where: Any, host: str, slots: int, grace: float) -> int:
    import asyncio
    import signal

    from tf_fsm.temporal.connect import connect
    from tf_fsm.temporal.worker import serve
    from tf_fsm.temporal.workflow import host_queue

    client = await connect(where)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    def polling() -> None:
        queues = f"{where.task_queue} and {host_queue(where.task_queue, host)}"
        print(
            f"tf-fsm worker: polling {where.address} (namespace {where.namespace}), queues "
            f"{queues}, {slots} at once, in {where.root}",
            flush=True,
        )

    await serve(client, where.root, where.task_queue, host, slots, stop, grace, polling)
    print("tf-fsm worker: stopped", file=sys.stderr)
    return 0


def cmd_temporal_dev(args: argparse.Namespace) -> int:
    require_extra()
    from tf_fsm.temporal.devserver import DEFAULT_DB, LOOPBACK, check_port_free, free_port

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: a port is 0 to 65535")
    db = Path(args.db).resolve() if args.db else project_root(args) / DEFAULT_DB
    port = args.port or free_port()
    check_port_free(port)
    try:
        shown = db.relative_to(Path.cwd())
    except ValueError:
        shown = db
    said = f"temporal dev server: {LOOPBACK}:{port} (history in {shown}); Ctrl-C stops it"
    return _serve_dev(port, db, said)


def _serve_dev(port: int, db: Path, said: str) -> int:
    import signal

    from tf_fsm.temporal.devserver import start_dev_server, stop_dev_server, wait_listening

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    server = start_dev_server(port, db, cwd=Path.cwd(), log=sys.stderr)  # stdout: one line
    try:
        wait_listening(server, port)
        print(said, flush=True)
        code = server.wait()
        print(f"tf-fsm: error: the dev server exited {code} (its output is above)", file=sys.stderr)
        return 1
    except RuntimeError as exc:
        print(f"tf-fsm: error: {exc} (its output is above)", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        stop_dev_server(server)
        signal.signal(signal.SIGTERM, previous)
