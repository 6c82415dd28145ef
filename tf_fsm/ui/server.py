"""`tf-fsm ui`: bind, print the URL once, serve until Ctrl-C or SIGTERM (uvicorn)."""

from __future__ import annotations

import contextlib
import secrets
import signal
import socket
import sys
import threading
import webbrowser
from collections.abc import Iterator
from pathlib import Path
from typing import TextIO

from tf_fsm.errors import UsageError
from tf_fsm.fs.atomic import make_dirs
from tf_fsm.settings.load import load_settings
from tf_fsm.ui.app import BoardApp, Options
from tf_fsm.ui.board import Elsewhere
from tf_fsm.ui.guard import Guard, is_loopback

#: how long a stopping server lets open pages' streams finish
GRACEFUL_SECONDS = 1


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, stopped by Ctrl-C or SIGTERM as its normal end: uvicorn raises the
        signal again once it has stopped (so the process would die of it); here the command
        returns and exits 0 (a second signal still forces the stop)."""

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            signals = (signal.SIGINT, signal.SIGTERM)
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in signals}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return Server


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on `host`:`port` (0: a free port); a clear error when it cannot be."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UsageError(f"--host {host}: {exc.strerror}") from exc
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.listen(128)
    sock.set_inheritable(False)
    return sock


def url_of(host: str, sock: socket.socket, token: str | None) -> str:
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/" + (f"?token={token}" if token else "")


def serve(
    root: Path,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    open_browser: bool = False,
    allow_actions: bool = False,
    out: TextIO | None = None,
    elsewhere: Elsewhere | None = None,
) -> int:
    """Serve the board of the project at `root`. Off loopback a token is generated and is
    part of the printed URL, which is the only place it appears."""
    import uvicorn

    out = out or sys.stdout
    settings = load_settings(root)
    token = None if is_loopback(host) else secrets.token_urlsafe(24)
    sock = bind(host, port)
    board = BoardApp(Options(root, settings, allow_actions, token, elsewhere))
    # As `watch` does: the directory where ticket state will appear must exist to be watched.
    make_dirs(board.board.state_dir, within=root)
    board.board.rescan()  # a backlog that cannot be read fails here, before the URL is printed
    app = Guard(board.app(), token=token)
    url = url_of(host, sock, token)
    mode = "actions allowed" if allow_actions else "read-only"
    print(f"tf-fsm ui: the board of {root} ({mode}) at {url}", file=out, flush=True)
    if token:
        print("tf-fsm ui: the token is in that URL only; keep it to yourself", file=out, flush=True)
    config = uvicorn.Config(
        app, log_level="warning", timeout_graceful_shutdown=GRACEFUL_SECONDS, lifespan="on"
    )
    server = _server_class()(config)
    if open_browser:
        threading.Timer(0.5, webbrowser.open, args=(url,)).start()
    server.run(sockets=[sock])
    return 0
