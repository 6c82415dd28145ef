"""Run the simulated backlog through the real orchestrator once per policy, and compare.

Each policy gets its own throwaway project (on /dev/shm when there is one: the orchestrator
fsyncs every write, which tmpfs makes free) with the same tickets, and the same seeded agent.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tf_fsm.engine.orchestrator import RunOptions, run_ticket
from tf_fsm.settings.load import ESCALATION_KEYS, ROLES, load_settings
from tf_fsm.simulate.agent import SimulatedAgent, backlog, closable
from tf_fsm.simulate.profile import Profile
from tf_fsm.storage.backends import open_store

POLICIES: dict[str, str] = {
    "a": "blind re-runs, base models",
    "b": "tiered curve",
    "c": "curve + same-failure",
    "d": "strongest model, every role",
    "e": "strongest model, escalated roles",
}
DEFAULT_POLICIES = ("a", "b", "c", "d")
#: the roles the curve escalates, by their settings key
_ESCALATED_ROLES = dict(ESCALATION_KEYS)


@dataclass(frozen=True)
class PolicyResult:
    policy: str
    label: str
    tickets: int
    closable: int
    closed: int
    closableClosed: int
    costUsd: float
    attempts: int
    maxTicketCostUsd: float
    sameFailureStops: int
    agentHours: float  # simulated: the agents' own time, summed over invocations
    wallSeconds: float  # the simulator's own time (not reproducible; left out of comparisons)
    budgetUsd: float | None = None

    @property
    def closed_share(self) -> float:
        return self.closed / self.tickets

    @property
    def closable_share(self) -> float:
        return self.closableClosed / self.closable if self.closable else 1.0

    @property
    def cost_per_closed(self) -> float:
        return self.costUsd / self.closed if self.closed else float("inf")

    def to_json(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "closedShare": round(self.closed_share, 4),
            "closableClosedShare": round(self.closable_share, 4),
            "costPerClosedUsd": round(self.cost_per_closed, 4) if self.closed else None,
            "attemptsPerTicket": round(self.attempts / self.tickets, 3),
        }


def _meta(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", model).strip("-")


def settings_for(profile: Profile, policy: str, budget: float | None = None) -> dict[str, Any]:
    """The settings.json of a policy's project: the profile's models, the policy's curve."""
    roles = dict(profile.roles)
    escalation: dict[str, str | None] = dict.fromkeys(ESCALATION_KEYS)
    if policy in ("b", "c"):
        escalation.update(profile.escalation)
    elif policy == "d":  # the naive alternative: the best model for everything
        roles = dict.fromkeys(ROLES, profile.strongest())
    elif policy == "e":  # the curve's top tier from attempt 1
        for role in _ESCALATED_ROLES.values():
            roles[role] = profile.strongest()
    models = sorted({*roles.values(), *(m for m in escalation.values() if m)})
    return {
        "metaModels": {_meta(m): {"model": m} for m in models},
        "agents": {r: _meta(m) for r, m in roles.items() if r != "worker"},
        "prompts": {"tf-implement": _meta(roles["worker"])},
        "workflow": {
            "failOn": list(profile.failOn),
            "escalation": {
                "enabled": True,
                "maxRetries": profile.maxRetries,
                "models": {k: _meta(m) if m else None for k, m in escalation.items()},
                "sameFailure": "skip-tier" if policy == "c" else "off",
                "maxCostUsd": budget,
            },
        },
        "executor": {"kind": "scripted", "maxRestarts": 2, "restartBackoffSeconds": 0},
    }


def _ticket_file(ticket: str) -> str:
    return (
        f"---\nid: {ticket}\nstatus: open\ndeps: []\nlinks: []\n"
        f"created: 2026-01-01T00:00:00Z\ntype: task\npriority: 2\ntags: []\n---\n"
        f"# Simulated ticket {ticket}\n\nA ticket of the simulated backlog.\n"
    )


def scratch_dir() -> str | None:
    """The shared-memory tmpfs when it is there and writable (fsync is free on it), else the
    default temp dir. mkdtemp makes a private directory in it, so sharing it is safe."""
    shm = Path("/dev/shm")  # noqa: S108
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def run_policy(
    profile: Profile,
    policy: str,
    tickets: int,
    seed: int,
    where: Path,
    budget: float | None = None,
) -> PolicyResult:
    hidden = backlog(profile, tickets, seed)
    project = where / f"policy-{policy}{'-budget' if budget else ''}"
    (project / ".tickets").mkdir(parents=True)
    (project / ".tf/config").mkdir(parents=True)
    settings_json = json.dumps(settings_for(profile, policy, budget), indent=2)
    (project / ".tf/config/settings.json").write_text(settings_json, encoding="utf-8")
    for ticket in hidden:
        (project / ".tickets" / f"{ticket}.md").write_text(_ticket_file(ticket), encoding="utf-8")
    settings = load_settings(project)
    agent = SimulatedAgent(profile, seed, hidden)
    closed = closable_closed = attempts = stops = 0
    started = time.perf_counter()
    for ticket, findings in hidden.items():
        for _ in range(5):  # an attempt in error (transient failures past the restarts) resumes
            outcome = run_ticket(
                project, ticket, RunOptions(auto=True), settings=settings, executor=agent
            )
            if outcome.status != "error":
                break
        state = open_store(project, settings, ticket).load_retry_state()
        attempts += len(state.attempts) if state else 0
        stops += bool(state and state.stopReason)
        if outcome.status == "closed":
            closed += 1
            closable_closed += closable(findings, profile)
    wall = time.perf_counter() - started
    return PolicyResult(
        policy,
        POLICIES[policy],
        tickets,
        sum(closable(f, profile) for f in hidden.values()),
        closed,
        closable_closed,
        round(sum(agent.spent.values()), 6),
        attempts,
        round(max(agent.spent.values(), default=0.0), 6),
        stops,
        round(agent.agent_seconds / 3600, 3),
        round(wall, 2),
        budget,
    )


def simulate(
    profile: Profile,
    policies: list[str],
    tickets: int,
    seed: int,
    budget_run: bool = True,
    jobs: int = 1,
) -> list[PolicyResult]:
    """Every policy on the same backlog; with `budget_run`, policy (c) again under the
    profile's per-ticket budget. `jobs` > 1 runs the policies in that many processes (each
    policy is independent; the results do not depend on it)."""
    runs: list[tuple[str, float | None]] = [(p, None) for p in policies]
    if budget_run:
        runs.append(("c", profile.budgetUsd))
    with tempfile.TemporaryDirectory(prefix="tf-fsm-simulate-", dir=scratch_dir()) as tmp:
        args = [(profile, p, tickets, seed, Path(tmp), b) for p, b in runs]
        if jobs <= 1 or len(runs) == 1:
            return [run_policy(*a) for a in args]
        with ProcessPoolExecutor(max_workers=min(jobs, len(runs))) as pool:
            futures = [pool.submit(run_policy, *a) for a in args]
            return [f.result() for f in futures]
