"""The board's icon: `static/favicon.svg`, which every page links, also answered at
`/favicon.ico`, where a browser looks for one when a response names none (the SVG of a
ticket's path opened alone, a JSON answer), so that no page causes a 404."""

from __future__ import annotations

from pathlib import Path

from starlette.requests import Request
from starlette.responses import FileResponse, Response
from starlette.routing import Route

ICON = Path(__file__).parent / "static" / "favicon.svg"


async def favicon(request: Request) -> Response:
    return FileResponse(ICON, media_type="image/svg+xml")


ROUTES = [Route("/favicon.ico", favicon)]
