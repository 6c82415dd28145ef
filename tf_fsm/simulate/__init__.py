"""`tf-fsm simulate`: retry policies compared on a simulated backlog (docs/simulate.md)."""

from __future__ import annotations

from collections.abc import Sequence

from tf_fsm.simulate.chart import svg_chart, table
from tf_fsm.simulate.engine import POLICIES, PolicyResult, simulate
from tf_fsm.simulate.profile import Profile, load_profile

__all__ = [
    "POLICIES",
    "PolicyResult",
    "Profile",
    "criteria",
    "load_profile",
    "simulate",
    "svg_chart",
    "table",
]


def criteria(results: Sequence[PolicyResult]) -> list[tuple[str, bool, str]]:
    """The checks a policy run is judged by (docs/simulate.md): (name, passed, the figures)."""
    runs = {r.policy: r for r in results if r.budgetUsd is None}
    out: list[tuple[str, bool, str]] = []
    c, d, a = runs.get("c"), runs.get("d"), runs.get("a")
    if c is not None:
        share = c.closable_share
        out.append(("(c) closes >= 95% of closable", share >= 0.95, f"{share:.1%}"))
    if c is not None and d is not None:
        ratio = c.cost_per_closed / d.cost_per_closed
        detail = f"${c.cost_per_closed:.2f} / ${d.cost_per_closed:.2f} = {ratio:.2f}"
        out.append(("(c) cost per closed <= 0.6 x (d)", ratio <= 0.6, detail))
    if c is not None and a is not None:
        detail = f"{c.closableClosed} vs {a.closableClosed}"
        out.append(
            ("(c) closes no fewer closable than (a)", c.closableClosed >= a.closableClosed, detail)
        )
    for r in results:
        if r.budgetUsd is not None:
            ok = r.maxTicketCostUsd <= r.budgetUsd + 1e-9
            detail = f"max ticket spend ${r.maxTicketCostUsd:.2f} of ${r.budgetUsd:.2f}"
            out.append((f"budget run ({r.policy}) never exceeds maxCostUsd", ok, detail))
    return out
