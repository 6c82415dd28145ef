"""The comparison as a table and as an SVG chart, both pure (text in, text out). The chart is
hand-written SVG so that the runtime needs no plotting library."""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from tf_fsm.simulate.engine import PolicyResult


def _point_label(r: PolicyResult) -> str:
    """The letter beside a point; the budget run is (c) again, so it says so."""
    return f"{r.policy}, ${r.budgetUsd:g}" if r.budgetUsd else r.policy


def _name(r: PolicyResult) -> str:
    return f"({r.policy}) {r.label}" + (f", budget ${r.budgetUsd:g}" if r.budgetUsd else "")


def table(results: Sequence[PolicyResult]) -> str:
    """A markdown table: one row per policy run."""
    head = (
        "| policy | closed | closable closed | total cost | cost / closed | attempts / ticket "
        "| same-failure stops | max ticket cost | agent hours | sim wall s |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    rows = [
        f"| {_name(r)} | {r.closed_share:.1%} | {r.closable_share:.1%} | ${r.costUsd:,.2f} "
        f"| ${r.cost_per_closed:,.2f} | {r.attempts / r.tickets:.2f} | {r.sameFailureStops} "
        f"| ${r.maxTicketCostUsd:,.2f} | {r.agentHours:,.1f} | {r.wallSeconds:.1f} |"
        for r in results
    ]
    return "\n".join([head, *rows])


def svg_chart(results: Sequence[PolicyResult], title: str) -> str:
    """Cost per closed ticket (x) against the share of tickets closed (y), a point per run."""
    width, height, left, right, top, bottom = 720, 420, 70, 250, 40, 50
    pts = [(r, r.cost_per_closed, r.closed_share * 100) for r in results if r.closed]
    xs = [x for _, x, _ in pts] or [1.0]
    ys = [y for _, _, y in pts] or [50.0]
    x0, x1 = 0.0, max(xs) * 1.15
    y0, y1 = max(0.0, min(ys) - 10), min(100.0, max(ys) + 5)
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return top + (1 - (y - y0) / ((y1 - y0) or 1)) * plot_h

    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="22" font-size="14" font-weight="bold">{escape(title)}</text>',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="black"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="black"/>',
    ]
    for i in range(6):
        xv, yv = x0 + (x1 - x0) * i / 5, y0 + (y1 - y0) * i / 5
        out.append(
            f'<text x="{px(xv):.1f}" y="{top + plot_h + 16}" text-anchor="middle">${xv:.2f}</text>'
        )
        out.append(f'<text x="{left - 6}" y="{py(yv) + 4:.1f}" text-anchor="end">{yv:.0f}%</text>')
        out.append(
            f'<line x1="{left}" y1="{py(yv):.1f}" x2="{left + plot_w}" y2="{py(yv):.1f}" '
            'stroke="#ddd"/>'
        )
    out.append(
        f'<text x="{left + plot_w / 2}" y="{height - 10}" text-anchor="middle">'
        "cost per closed ticket (USD)</text>"
    )
    out.append(
        f'<text x="16" y="{top + plot_h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 16 {top + plot_h / 2})">tickets closed</text>'
    )
    for i, (r, x, y) in enumerate(pts):
        color = colors[i % len(colors)]
        out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="6" fill="{color}"/>')
        label = escape(_point_label(r))
        out.append(f'<text x="{px(x) + 9:.1f}" y="{py(y) - 7:.1f}">{label}</text>')
        ly = top + 14 + 18 * i
        out.append(f'<circle cx="{left + plot_w + 20}" cy="{ly - 4}" r="5" fill="{color}"/>')
        out.append(f'<text x="{left + plot_w + 30}" y="{ly}">{escape(_name(r))}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
