"""The simulated backlog and the in-process agent that works on it.

Every random outcome is a pure function of (seed, ticket, attempt, phase, finding or role):
the same draw decides the same event under every policy, so a stronger model clears a
finding whenever a weaker one would have (its probability is higher against the same draw),
and two policies that run the same models see the same outcomes.
"""

from __future__ import annotations

import hashlib
import math
import random
import time
from collections import Counter
from dataclasses import dataclass

from tf_fsm.core.reports import Finding, render_review
from tf_fsm.core.state import SEVERITIES
from tf_fsm.executors.base import Invocation, InvocationResult
from tf_fsm.executors.usage import Usage
from tf_fsm.settings.load import REVIEWER_ROLES
from tf_fsm.simulate.profile import Profile
from tf_fsm.storage.store import atomic_write_text


def draw(seed: int, *key: object) -> float:
    """A uniform number in [0, 1) fixed by the seed and the key."""
    digest = hashlib.sha256("|".join(map(str, (seed, *key))).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


@dataclass(frozen=True)
class HiddenFinding:
    id: str
    severity: str
    hardness: float  # 0..1: a model fixes it only if its reach is at least this
    reviewer: str  # the reviewer role whose area it is in
    path: str
    line: int
    what: str

    def text(self, attempt: int) -> str:
        # Code moves between attempts: the line drifts, as in real reviews.
        return f"`{self.path}:{self.line + 3 * (attempt - 1)}` - {self.what}"


def _poisson(rng: random.Random, mean: float) -> int:
    limit, k, p = math.exp(-mean), 0, rng.random()
    while p > limit:
        k += 1
        p *= rng.random()
    return k


def backlog(profile: Profile, tickets: int, seed: int) -> dict[str, list[HiddenFinding]]:
    """Ticket id -> its hidden findings (what an implementation of it will get wrong)."""
    out: dict[str, list[HiddenFinding]] = {}
    diff = profile.difficulty
    for i in range(tickets):
        ticket = f"sim-{i + 1:04d}"
        # Not for security: a reproducible stream per ticket, the same under every policy.
        rng = random.Random(int(draw(seed, ticket, "backlog") * 2**53))  # noqa: S311
        d = rng.betavariate(diff.alpha, diff.beta)
        found: list[HiddenFinding] = []
        for severity in SEVERITIES:
            for k in range(_poisson(rng, profile.findings.get(severity, 0.0) * (0.5 + d))):
                hardness = min(1.0, max(0.0, d + rng.uniform(-diff.spread, diff.spread)))
                found.append(
                    HiddenFinding(
                        f"{severity[:2]}{k}",
                        severity,
                        hardness,
                        rng.choice(REVIEWER_ROLES),
                        f"src/{ticket}/mod_{rng.randrange(9)}.py",
                        rng.randrange(10, 400),
                        f"{severity.lower()} issue {k} in the {ticket} change",
                    )
                )
        out[ticket] = found
    return out


def closable(findings: list[HiddenFinding], profile: Profile) -> bool:
    """Can any model close it: is every blocking finding within the strongest model's reach?"""
    reach = profile.models[profile.strongest()].reach
    return all(f.hardness <= reach for f in findings if f.severity in profile.failOn)


class SimulatedAgent:
    """An executor: draws each invocation's outcome from the profile, writes the artifact in
    the real format, and reports its cost as usage (the way the CLI presets do)."""

    def __init__(self, profile: Profile, seed: int, hidden: dict[str, list[HiddenFinding]]):
        self.profile, self.seed, self.hidden = profile, seed, hidden
        self.open: dict[str, dict[str, HiddenFinding]] = {}
        self.reported: dict[tuple[str, int], set[str]] = {}
        self.tries: Counter[tuple[str, int, str, str]] = Counter()
        self.spent: dict[str, float] = {}
        self.agent_seconds = 0.0

    def check(self) -> None:
        """In-process: nothing to check."""

    def estimate_cost(self, phase: str, role: str, model: str) -> float | None:
        """What one invocation will cost: the budget check forecasts an attempt with it."""
        known = self.profile.models.get(model)
        return known.costUsd if known else None

    def invoke(self, inv: Invocation) -> InvocationResult:
        started = time.monotonic()
        model = self.profile.models.get(inv.model)
        if model is None:
            return InvocationResult(
                ok=False,
                duration=0.0,
                failure=f"model {inv.model} is not in the profile",
                exit_code=1,
                failure_class="agent_error",
            )
        key = (inv.ticket_id, inv.attempt, inv.phase, inv.role)
        tries = self.tries[key]
        self.tries[key] += 1
        self.agent_seconds += model.seconds
        if draw(self.seed, *key, tries, "transient") < model.transient:
            # A provider error (429, 5xx) bills nothing; the orchestrator restarts it.
            return InvocationResult(
                ok=False,
                duration=time.monotonic() - started,
                failure="HTTP 529 overloaded",
                exit_code=1,
                failure_class="provider",
                usage=Usage(),
            )
        atomic_write_text(inv.output, self._work(inv), within=inv.artifact_dir, durable=False)
        self.spent[inv.ticket_id] = self.spent.get(inv.ticket_id, 0.0) + model.costUsd
        return InvocationResult(
            ok=True,
            duration=time.monotonic() - started,
            exit_code=0,
            log=f"simulated {inv.model} wrote {inv.output.name}\n",
            usage=Usage(cost_usd=model.costUsd),
        )

    def _findings(self, ticket: str) -> dict[str, HiddenFinding]:
        if ticket not in self.open:
            self.open[ticket] = {f.id: f for f in self.hidden.get(ticket, [])}
        return self.open[ticket]

    def _clears(self, inv: Invocation, f: HiddenFinding, chance: float) -> bool:
        model = self.profile.models[inv.model]
        if f.hardness > model.reach:
            return False
        return draw(self.seed, inv.ticket_id, inv.attempt, inv.phase, f.id) < chance

    def _work(self, inv: Invocation) -> str:
        open_ = self._findings(inv.ticket_id)
        model = self.profile.models[inv.model]
        if inv.phase == "implement":
            for f in list(open_.values()):
                if self._clears(inv, f, model.rewrite):
                    del open_[f.id]
            return f"# Implementation: {inv.ticket_id}\n\nBy {inv.model}.\n"
        if inv.phase in ("review", "verify"):
            mine = [f for f in open_.values() if f.reviewer == inv.role]
            if inv.phase == "review":  # the post-fix re-review is exact: the gate is the truth
                key = (inv.ticket_id, inv.attempt, inv.phase)
                mine = [f for f in mine if draw(self.seed, *key, f.id) < model.recall]
                self.reported.setdefault((inv.ticket_id, inv.attempt), set()).update(
                    f.id for f in mine
                )
            findings = [Finding(f.severity, f.text(inv.attempt), inv.role) for f in mine]
            return render_review(inv.ticket_id, findings)
        if inv.phase == "fix":
            told = self.reported.get((inv.ticket_id, inv.attempt), set())
            cleared = [
                f
                for f in list(open_.values())
                if f.id in told and self._clears(inv, f, model.clears.get(f.severity, 0.0))
            ]
            for f in cleared:
                del open_[f.id]
            lines = [f"# Fixes: {inv.ticket_id}", "", "## Fixes Applied"]
            lines += [f"- [{f.severity}] {f.text(inv.attempt)}" for f in cleared] or ["- none"]
            lines += ["", "## Summary Statistics"]
            lines += [f"- {s}: {sum(f.severity == s for f in cleared)}" for s in SEVERITIES]
            return "\n".join(lines) + "\n"
        return f"# {inv.phase.capitalize()}: {inv.ticket_id}\n\nBy {inv.model}.\n"
