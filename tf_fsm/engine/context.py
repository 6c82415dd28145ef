"""What one attempt runs with (its chain context), and what its prompts are told.

`chain-context.json` is written before the first phase of every attempt and read back on
resume, so a resumed attempt keeps its models, plan and prior-failure summary.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tf_fsm._json_input import load_json
from tf_fsm.core.artifacts import INPUTS
from tf_fsm.core.detection import remaining_findings
from tf_fsm.core.escalation import Resolution, RoleResolution
from tf_fsm.core.journal import Event, TicketBlocked
from tf_fsm.core.machine import PHASES, AttemptFacts
from tf_fsm.core.state import SEVERITIES, RetryState
from tf_fsm.engine.prompts import fence_untrusted, inline, refence
from tf_fsm.errors import CorruptStateError

#: only these phases are handed the prior attempt's failure (a retry does not re-run research)
PRIOR_FAILURE_PHASES = frozenset({"implement", "fix"})


@dataclass
class AttemptContext:
    number: int
    trigger: str
    resolution: Resolution
    plan: dict[str, tuple[bool, str]]
    facts: AttemptFacts
    prior_failure: dict[str, Any] | None = None
    resumed_from: str | None = None  # the attempt status a resume picked up from
    finished: bool = False  # resumed after its last phase completed: only the ending runs
    ending: str | None = None  # a finished one's: `merge`, or `its ending` (ResumePoint.where)
    #: prompts rendered when the attempt began (template check), by (phase, role, artifact):
    #: the context is fixed for the attempt, so each is rendered once (PhaseRunner._invoke)
    prompts: dict[tuple[str, str, str], str] = field(default_factory=dict)


def to_json(
    attempt: AttemptContext, ticket_id: str, flags: Mapping[str, Any], artifact_dir: Path
) -> dict[str, Any]:
    res = attempt.resolution
    return {
        "ticketId": ticket_id,
        "attempt": attempt.number,
        "trigger": attempt.trigger,
        "tier": res.tier,
        "models": {
            role: {
                "model": r.model,
                "thinking": r.thinking,
                "baseModel": r.base_model,
                "escalated": r.escalated,
                "source": r.source,
                "reason": r.reason,
            }
            for role, r in res.roles.items()
        },
        "escalatedRoles": res.escalated_roles,
        "phases": {p: {"runs": runs, "reason": why} for p, (runs, why) in attempt.plan.items()},
        "flags": dict(flags),
        "priorFailure": attempt.prior_failure,
        "artifactDir": str(artifact_dir),
    }


def _shape_problem(saved: Mapping[str, Any]) -> str | None:
    """What makes a saved chain context unusable for a resume, or None."""
    models, phases = saved.get("models", {}), saved.get("phases", {})
    if not isinstance(models, dict):
        return "`models` is not an object"
    for role, info in models.items():
        if not isinstance(info, dict) or not isinstance(info.get("model"), str):
            return f"`models.{role}` has no `model` string"
    if not isinstance(phases, dict):
        return "`phases` is not an object"
    if phases:
        missing = [p for p in PHASES if p not in phases]
        if missing:
            return f"`phases` lacks {', '.join(missing)}"
        for name, value in phases.items():
            if not isinstance(value, dict) or not isinstance(value.get("runs"), bool):
                return f"`phases.{name}` has no `runs` true/false"
    prior = saved.get("priorFailure")
    if prior is None:
        return None
    if not (isinstance(prior, dict) and isinstance(prior.get("fenced"), str)):
        return "`priorFailure` is neither null nor an object with a `fenced` string"
    if type(prior.get("attempt")) is not int or prior["attempt"] < 1:
        return "`priorFailure.attempt` is not an attempt number"
    if not isinstance(prior.get("kind"), str) or not _KIND_RE.fullmatch(prior["kind"]):
        return "`priorFailure.kind` is neither quality_gate nor gate:<name>"
    if not isinstance(prior.get("reason"), str):
        return "`priorFailure.reason` is not a string"
    return None


#: what `prior_failure` writes as `kind`: the gate that blocked, or the review's quality gate
_KIND_RE = re.compile(r"quality_gate|gate:[A-Za-z0-9_.:-]{1,64}")


def restore(
    saved: Mapping[str, Any], fresh: AttemptContext, path: Path, redact: Callable[[str], str]
) -> AttemptContext:
    """`fresh` (recomputed from settings) overlaid with what the attempt really started with.
    Agents are handed the file, so its prior-failure text is fenced and capped again."""
    if saved.get("attempt") != fresh.number:
        return fresh
    problem = _shape_problem(saved)
    if problem is not None:
        raise CorruptStateError(path, f"{problem}; attempt {fresh.number} cannot resume", _REMEDY)
    roles = dict(fresh.resolution.roles)
    for role, info in saved.get("models", {}).items():
        if role in roles:
            roles[role] = replace(
                roles[role],
                model=info["model"],
                thinking=info.get("thinking"),
                base_model=str(info.get("baseModel", roles[role].base_model)),
                escalated=bool(info.get("escalated")),
                reason=str(info.get("reason", roles[role].reason)),
                source=str(info.get("source", roles[role].source)),
            )
    plan = {
        p: (v["runs"], str(v.get("reason", ""))) for p, v in saved.get("phases", {}).items()
    } or fresh.plan
    resolution = Resolution(fresh.resolution.attempt, fresh.resolution.tier, roles)
    facts = replace(fresh.facts, runs=frozenset(p for p, (runs, _) in plan.items() if runs))
    prior = saved.get("priorFailure")
    if prior is not None:  # the text outside the fence is cut to one short line again
        kept = prior.get("kept")
        prior = {
            **{k: v for k, v in prior.items() if k != "kept"},
            "reason": inline(prior["reason"], redact),
            "fenced": refence(prior["fenced"], redact),
        }
        # shown unfenced: only a ref name tf_fsm itself gives, never an agent's text
        if isinstance(kept, str) and _KEPT_RE.fullmatch(kept):
            prior["kept"] = kept
    return replace(fresh, resolution=resolution, plan=plan, facts=facts, prior_failure=prior)


#: the ref a `reset` rollback keeps a blocked attempt's commits under (tf_fsm.workspace.model)
_KEPT_RE = re.compile(r"refs/tf/[A-Za-z0-9][A-Za-z0-9._-]*/attempt-[0-9]+(-[0-9]+)?")

_REMEDY = (
    "fix the file, or delete it to resume with the models and plan the settings give now "
    "(the prior attempt's failure summary is then lost)"
)


def load_saved(path: Path) -> dict[str, Any]:
    """chain-context.json as JSON ({} when absent); a file that is not a JSON object is an
    error, never silently replaced."""
    try:
        data = load_json(path.read_bytes().decode("utf-8"))
    except FileNotFoundError:
        return {}
    except (ValueError, OSError) as exc:
        raise CorruptStateError(path, f"unreadable: {exc}", _REMEDY) from exc
    if not isinstance(data, dict):
        raise CorruptStateError(path, "not a JSON object", _REMEDY)
    return data


def journaled_prior_failure(
    state: RetryState,
    events: Sequence[Event],
    read: Callable[[str], str | None],
    fail_on: list[str],
    redact: Callable[[str], str],
) -> dict[str, Any] | None:
    """The blocked attempt's summary as its end journaled it (TicketBlocked.priorFailure: its
    reports may have been replaced since, by an attempt a crash cut short); built from the
    reports (`prior_failure`) for a journal without it (from before, or pi-ticketflow's)."""
    cur = state.current
    if cur is None or cur.status != "blocked":
        return None
    for event in reversed(events):
        if isinstance(event, TicketBlocked) and event.attempt == cur.attemptNumber:
            if event.priorFailure is not None:
                return dict(event.priorFailure)
            break
    return prior_failure(state, read, fail_on, redact)


def prior_failure(
    state: RetryState,
    read: Callable[[str], str | None],
    fail_on: list[str],
    redact: Callable[[str], str],
) -> dict[str, Any] | None:
    """The prior-failure summary of the most recent attempt, if it was blocked: which
    gate failed, the post-fix counts and the remaining findings, fenced and capped."""
    last = state.current
    if last is None or last.status != "blocked":
        return None
    counts = last.qualityGate.counts if last.qualityGate else {}
    reason = last.reason or "blocked by the quality gate"
    try:
        verification = load_json(read("post-fix-verification.json") or "{}")
    except ValueError:
        verification = {}
    findings = remaining_findings(read)
    gates = [
        g for g in verification.get("gates", []) if isinstance(g, dict) and not g.get("passed")
    ]
    blocking = next((g for g in gates if g.get("blocking")), None)
    lines = [
        f"Attempt {last.attemptNumber} was blocked: {reason}",
        "Post-fix counts: " + ", ".join(f"{s} {counts.get(s, 0)}" for s in SEVERITIES),
        f"Blocking severities (failOn): {', '.join(fail_on) or 'none'}",
    ]
    for gate in gates:
        lines += [
            f"Quality gate {gate.get('name')} failed: {gate.get('summary')}",
            str(gate.get("outputTail", "")),
        ]
    lines.append("Remaining findings:")
    ordered = [s for s in SEVERITIES if s in fail_on] + [s for s in SEVERITIES if s not in fail_on]
    lines += [f"- [{s}] {text}" for s in ordered for text in findings.get(s, [])] or [
        "- (none listed)"
    ]
    return {
        "attempt": last.attemptNumber,
        "kind": f"gate:{blocking['name']}" if blocking else "quality_gate",
        "reason": inline(reason, redact),
        "counts": {s: counts.get(s, 0) for s in SEVERITIES},
        "fenced": fence_untrusted("\n".join(lines), redact),
    }


def ticket_view(ticket: Any) -> dict[str, str]:
    """id, title and the description: the body without its `# title` line."""
    lines = ticket.body.split("\n")
    body = [
        ln
        for i, ln in enumerate(lines)
        if not (
            ln.startswith("# ")
            and ln[2:].strip() == ticket.title
            and all(not x.startswith("# ") for x in lines[:i])
        )
    ]
    return {"id": ticket.id, "title": ticket.title, "body": "\n".join(body).strip()}


def prompt_context(
    attempt: AttemptContext,
    phase: str,
    role: RoleResolution,
    *,
    ticket: Mapping[str, str],
    artifact_dir: Path,
    output: Path,
    chain_context: Path,
    flags: Mapping[str, Any],
    fail_on: list[str],
    gate_feedback: str | None = None,
) -> dict[str, Any]:
    """Every variable a phase template may use. Templates are rendered with StrictUndefined, so
    a name missing here is an error before the first phase runs."""
    res = attempt.resolution
    return {
        "ticket": dict(ticket),
        "phase": phase,
        "role": role.role,
        "model": role.model,
        "thinking": role.thinking,
        "attempt": attempt.number,
        "trigger": attempt.trigger,
        "tier": res.tier,
        "models": {
            r: {
                "model": x.model,
                "thinking": x.thinking,
                "escalated": x.escalated,
                "source": x.source,
            }
            for r, x in res.roles.items()
        },
        "escalated": res.escalated_roles,
        "flags": dict(flags),
        "fail_on": list(fail_on),
        "inputs": [str(artifact_dir / name) for name in INPUTS[phase]],
        "output": str(output),
        "artifact_dir": str(artifact_dir),
        "chain_context": str(chain_context),
        "prior_failure": attempt.prior_failure if phase in PRIOR_FAILURE_PHASES else None,
        "gate_feedback": gate_feedback,
    }
