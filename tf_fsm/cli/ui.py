"""`tf-fsm ui`: the live web board (docs/ui.md). The server is imported only here, so no
other command pays for the web stack at start-up."""

from __future__ import annotations

import argparse

from tf_fsm.cli.common import project_root


def add_ui_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to bind (default 127.0.0.1); any other address requires the generated "
        "token, which the printed URL carries",
    )
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    p.add_argument("--open", action="store_true", help="open the board in a browser")
    p.add_argument(
        "--allow-actions",
        action="store_true",
        help="let the page resume a ticket in error and reset a ticket's retries "
        "(as `tf-fsm resume` and `tf-fsm reset` do; read-only without it)",
    )


def cmd_ui(args: argparse.Namespace) -> int:
    from tf_fsm.settings.load import load_settings
    from tf_fsm.storage.backends import memory_refused
    from tf_fsm.ui.server import serve

    memory_refused(load_settings(project_root(args)), None, "ui (it shows runs of other processes)")
    if not 0 <= args.port <= 65535:
        from tf_fsm.errors import UsageError

        raise UsageError(f"--port {args.port}: a port is 0 to 65535")
    return serve(
        project_root(args),
        host=args.host,
        port=args.port,
        open_browser=args.open,
        allow_actions=args.allow_actions,
    )
