"""Who may talk to the board, and what every response says to the browser.

* Bound to a loopback address, the server answers requests for loopback host names only: a
  web page cannot reach it through a DNS name that points at 127.0.0.1 (DNS rebinding).
* Bound to any other address, every request must carry the token the server generated and
  printed once: in the URL (`?token=`, traded at once for a cookie and a redirect to the same
  page without it) or in that cookie. Compared in constant time.
* Every response forbids scripts, styles and images from anywhere but the board itself
  (Content-Security-Policy), framing, sniffing and the referrer (the token is in a URL)."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Awaitable, Callable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]

COOKIE = "tf_fsm_token"
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
HEADERS = [
    (
        b"content-security-policy",
        b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
        b"connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


def is_loopback(host: str) -> bool:
    if host.strip("[]") in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _host_name(scope: Scope) -> str:
    for key, value in scope.get("headers", []):
        if key == b"host":
            host: str = value.decode("latin-1")
            return host[1:].split("]")[0] if host.startswith("[") else host.rsplit(":", 1)[0]
    return ""


def _cookie_token(scope: Scope) -> str:
    for key, value in scope.get("headers", []):
        if key == b"cookie":
            jar: SimpleCookie = SimpleCookie()
            jar.load(value.decode("latin-1"))
            if COOKIE in jar:
                return str(jar[COOKIE].value)
    return ""


class Guard:
    """The ASGI middleware in front of the board (see the module's docstring)."""

    def __init__(self, app: App, *, token: str | None) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.token is None and not is_loopback(_host_name(scope)):
            await _refuse(send, 421, "this board answers to localhost and 127.0.0.1 only")
            return
        if self.token is not None:
            query = parse_qsl(scope.get("query_string", b"").decode("latin-1"))
            given = dict(query).get("token")
            if given is not None and self._matches(given):
                await _redirect_with_cookie(send, scope, query, given)
                return
            if not self._matches(_cookie_token(scope)):
                await _refuse(send, 403, "token required: open the URL tf-fsm ui printed")
                return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, with_headers)

    def _matches(self, given: str) -> bool:
        return hmac.compare_digest(given.encode(), (self.token or "").encode())


def on_board(path: str) -> str:
    """`path` as a path on this board: percent-encoded (no CR, LF, backslash or `?` in a
    Location) and with one leading slash, so `//host/x` or `/\\host/x` cannot send the
    browser to another site."""
    return "/" + quote(path, safe="/:@!$&'()*+,;=-._~").lstrip("/")


async def _refuse(send: Send, status: int, why: str) -> None:
    body = f"tf-fsm ui: {why}\n".encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), *HEADERS]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _redirect_with_cookie(
    send: Send, scope: Scope, query: list[tuple[str, str]], token: str
) -> None:
    rest = urlencode([(k, v) for k, v in query if k != "token"])
    location = on_board(scope.get("path", "/")) + (f"?{rest}" if rest else "")
    cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path=/"
    headers = [
        (b"location", location.encode("latin-1")),
        (b"set-cookie", cookie.encode("latin-1")),
        *HEADERS,
    ]
    await send({"type": "http.response.start", "status": 303, "headers": headers})
    await send({"type": "http.response.body", "body": b""})
