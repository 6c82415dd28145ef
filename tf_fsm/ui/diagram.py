"""A ticket's path as an SVG picture: `tf-fsm diagram --ticket --format svg` (Graphviz) when
`dot` is installed, else a plain drawing made here: the lifecycle's states top to bottom, those
the ticket passed through filled, the one it stands in outlined (blue, red for `error` and
`blocked`: `current_colours`), and each edge it took drawn with how often. The page shows it
as an image (`<img>`), where no script in an SVG runs."""

from __future__ import annotations

import shutil
from xml.sax.saxutils import escape

from tf_fsm.core import machine as fsm
from tf_fsm.views.history import History
from tf_fsm.views.legend import current_colours

_W, _H, _GAP, _X = 220, 30, 18, 160  # box width and height, the gap between boxes, box left


def svg(history: History) -> bytes:
    """The path of `history` as SVG: Graphviz's drawing, or the fallback without it."""
    if shutil.which("dot") is not None:
        from tf_fsm.views.diagrams import diagram

        return diagram("svg", history)
    return fallback_svg(history)


def fallback_svg(history: History) -> bytes:
    """The plain drawing (no Graphviz): boxes in lifecycle order, taken edges as arcs."""
    states = fsm.STATES  # the machine's own list, in lifecycle order
    top = {state: 40 + i * (_H + _GAP) for i, state in enumerate(states)}
    height = 40 + len(states) * (_H + _GAP)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_X * 2 + _W}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<text x="10" y="20" font-size="14">{escape(_title(history))}</text>',
    ]
    for state, y in top.items():
        fill, stroke, width = "#dce8fb" if state in history.visited else "#ffffff", "#555", 1
        if state == history.current:
            (stroke, fill), width = current_colours(state), 3
        parts.append(
            f'<rect x="{_X}" y="{y}" width="{_W}" height="{_H}" rx="8" fill="{fill}" '
            f'stroke="{stroke}" stroke-width="{width}"/>'
            f'<text x="{_X + _W // 2}" y="{y + 19}" text-anchor="middle">{escape(state)}</text>'
        )
    for i, ((source, trigger, dest), notes) in enumerate(sorted(history.taken.items())):
        if source not in top or dest not in top:
            continue
        parts.append(_arc(top[source], top[dest], i, f"{trigger} ({len(notes)}x)"))
    parts.append("</svg>")
    return "\n".join(parts).encode()


def _arc(y1: int, y2: int, i: int, label: str) -> str:
    """An edge between two boxes: on the right going down, on the left going up."""
    down = y2 >= y1
    x = _X + _W if down else _X
    bulge = (40 + 12 * (i % 6)) * (1 if down else -1)
    a, b = y1 + _H // 2, y2 + _H // 2
    path = f"M{x},{a} C{x + bulge},{a} {x + bulge},{b} {x},{b}"
    text_x = x + bulge + (4 if down else -4)
    anchor = "start" if down else "end"
    return (
        f'<path d="{path}" fill="none" stroke="#1f5fbf" stroke-width="1.6"/>'
        f'<text x="{text_x}" y="{(a + b) // 2}" text-anchor="{anchor}" fill="#1f5fbf" '
        f'font-size="10">{escape(label)}</text><title>{escape(label)}</title>'
    )


def _title(history: History) -> str:
    return f"{history.ticket_id}: now {history.current}"
