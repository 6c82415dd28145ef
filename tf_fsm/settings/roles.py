"""The roles tf_fsm runs agents in (pi-ticketflow's names): every settings section that names a
role checks it against these."""

from __future__ import annotations

REVIEWER_ROLES: tuple[str, ...] = (
    "reviewer-general",
    "reviewer-spec-audit",
    "reviewer-second-opinion",
)
ROLES: tuple[str, ...] = ("researcher", "worker", *REVIEWER_ROLES, "fixer", "closer")
