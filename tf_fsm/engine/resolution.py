"""The merge queue's conflict resolution (docs/workspaces.md, "Conflicts"): when a passed
ticket's rebase onto the base branch conflicts, an agent resolves it in the ticket's worktree,
stopped at the conflict, and tf_fsm checks the result rather than trusting it.

In turn: the resolver (workspace.conflicts.role, the fixer by default, on the attempt's
escalation tier) is given the conflicting files, the kind of each conflict, the ticket's own
change and the base's commits since the branch point; tf_fsm then checks that no conflict
marker is left and carries the rebase on (it may stop again at a later commit: the resolver
is asked again). The merge step then runs the required gates on the result, and the review
phase's reviewers review the resolution (`review`). A resolution that fails any of these is
kept under `refs/tf/<id>/resolution-<n>` and the branch goes back to its tip from before the
rebase (`give_up`): the ticket waits for a person, as without resolution.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tf_fsm.core import gate
from tf_fsm.core import journal as ev
from tf_fsm.core import workspace_events as wev
from tf_fsm.core.artifacts import (
    RESOLUTION_REVIEW_PHASE,
    RESOLVE_PHASE,
    agent_artifact,
)
from tf_fsm.core.conflicts import resolution_refusal, resolutions_tried
from tf_fsm.core.detection import uncountable_review
from tf_fsm.core.reports import merge_reviews
from tf_fsm.engine.accounting import budget_verdict
from tf_fsm.engine.context import prompt_context, ticket_view
from tf_fsm.engine.invocation import WAITING, invoke, prepared
from tf_fsm.engine.prompts import (
    RESOLUTION_REVIEW_TEMPLATE,
    RESOLVE_TEMPLATE,
    fence_untrusted,
    inline,
)
from tf_fsm.storage.layout import CHAIN_CONTEXT
from tf_fsm.workspace import conflicts
from tf_fsm.workspace.rebase import Rebased

if TYPE_CHECKING:
    from tf_fsm.engine.api import RunContext
    from tf_fsm.engine.context import AttemptContext
    from tf_fsm.engine.worktree import TicketWorktree

#: how much of each side's change a prompt carries (fenced); the agent reads the files itself
DIFF_CAP = 24 * 1024
#: how many times one resolution may stop at a conflict (one per commit of the ticket's
#: branch at most): a bound on a rebase that never ends
MAX_STOPS = 50


@dataclass(frozen=True)
class Resolution:
    """A resolution under way: its number among the ticket's, and the rebase it resolves."""

    number: int
    onto: str  # the base branch's tip the branch is rebased onto
    upstream: str  # where the ticket's own commits begin
    old_tip: str  # the branch's tip before the rebase
    files: dict[str, str]  # every path that conflicted, across the stops -> its kind


def refusal(run: RunContext) -> str | None:
    """Why no agent resolves a conflict of this ticket now (a person does), or None."""
    events = run.store.read_events().events
    budget = budget_verdict(run.settings, run.store.load_retry_state(), events, 0.0)
    spent = budget.refusal if budget is not None and budget.spent >= budget.budget else None
    conf = run.settings.settings.workspace.conflicts
    return resolution_refusal(conf, resolutions_tried(events), spent)


def start(
    run: RunContext,
    attempt: AttemptContext,
    rebased: Rebased,
    stop: conflicts.Stop,
    upstream: str,
) -> Resolution:
    """A resolution of the rebase stopped at `stop` begins: journaled."""
    role = run.settings.settings.workspace.conflicts.role
    number = resolutions_tried(run.store.read_events().events) + 1
    files = {c.path: c.kind for c in stop.conflicts}
    res = Resolution(number, rebased.base, upstream, rebased.old_tip, dict(files))
    run.event(
        wev.ResolutionStarted,
        attempt.number,
        number=number,
        role=role,
        model=attempt.resolution.roles[role].model,
        baseSha=res.onto,
        oldTip=res.old_tip,
        files=files,
    )
    run.observer.note(run.ticket_id, f"resolving the conflict in {', '.join(files)} ({role})")
    return res


def resolve(
    run: RunContext,
    attempt: AttemptContext,
    tree: TicketWorktree,
    res: Resolution,
    stop: conflicts.Stop,
) -> Rebased | str:
    """Have the resolver resolve the rebase stopped at `stop`, as often as it stops: the
    completed rebase, or why the resolution failed (the rebase is then left as the resolver
    left it, for `give_up`)."""
    ws = tree.ws
    role = run.settings.settings.workspace.conflicts.role
    sides = conflicts.sides(ws, res.upstream, res.onto, res.old_tip, stop.paths)
    for step in range(1, MAX_STOPS + 1):
        prompt = _resolver_prompt(run, attempt, tree, res, stop, sides, step)
        label = f"resolve-{role}-{res.number}-{step}"
        artifact = agent_artifact(RESOLVE_PHASE, role)
        call = prepared(run, attempt, RESOLVE_PHASE, role, artifact, prompt, label)
        failure = invoke(run, attempt, call, lambda _what: None)
        if failure is not None:
            return "the resolver did not finish" if failure == WAITING else failure
        carried = conflicts.carry_on(ws, stop, res.onto, list(res.files))
        if carried.problem is not None:
            return carried.problem
        if carried.stop is None:
            if not conflicts.keeps_the_ticket(ws, res.onto, res.upstream, res.old_tip):
                return "the resolution keeps nothing of the ticket's own change"
            return Rebased(True, [], res.onto, res.old_tip, carried.tip or "")
        stop = carried.stop
        res.files.update({c.path: c.kind for c in stop.conflicts})
    return f"the rebase stopped at a conflict {MAX_STOPS} times"


def review(
    run: RunContext, attempt: AttemptContext, tree: TicketWorktree, res: Resolution
) -> str | None:
    """The review phase's reviewers review the resolved branch against the new base tip; why
    it does not pass (the quality gate's rule on their counts), or None."""
    wf, n = run.settings.workflow, attempt.number
    reviewers = [r for r in wf.enableReviewers if r in attempt.resolution.roles]
    if not reviewers:
        return None
    diff = tree.ws.git.out("diff", "--stat", "--patch", res.onto, "HEAD", "--")
    texts: dict[str, str] = {}
    for role in reviewers:
        name = agent_artifact(RESOLUTION_REVIEW_PHASE, role)
        context = _review_context(run, attempt, tree, res, role, name, diff)
        prompt = run.prompts.render(RESOLUTION_REVIEW_TEMPLATE, context)
        label = f"resolve-review-{role}-{res.number}"
        call = prepared(run, attempt, RESOLUTION_REVIEW_PHASE, role, name, prompt, label)
        failure = invoke(run, attempt, call, lambda _what: None)
        if failure is not None:
            return "a reviewer did not finish" if failure == WAITING else failure
        texts[role] = run.store.read_artifact(name) or ""
        if problem := uncountable_review(texts[role], name):
            return problem
    merged = merge_reviews(run.ticket_id, texts, "Resolution Review")
    run.store.write_artifact("resolution-review.md", merged.text)
    decision = gate.decide(merged.counts, list(wf.failOn), enabled=wf.enableQualityGate)
    run.event(
        ev.GateEvaluated,
        n,
        name="resolution-review",
        passed=not decision.blocked,
        counts=merged.counts,
        failOn=list(wf.failOn),
        source="resolution-review.md",
        reason=decision.reason,
    )
    return f"the review of the resolution: {decision.reason}" if decision.blocked else None


def passed(run: RunContext, attempt: AttemptContext, res: Resolution, tip: str) -> None:
    run.event(
        wev.ResolutionFinished,
        attempt.number,
        number=res.number,
        passed=True,
        reason="resolved: no conflict marker, the gates and the review passed",
        newTip=tip,
    )


def give_up(
    run: RunContext, attempt: AttemptContext, tree: TicketWorktree, res: Resolution, why: str
) -> str:
    """A resolution that failed: what the resolver made kept under a ref, the branch put back
    at its tip from before the rebase, journaled; the sentence for the ticket's reason (when
    a person is to resolve it: `merge_step` also names the conflicting files)."""
    ws = tree.ws
    ref = conflicts.set_aside(ws, f"resolution-{res.number}", res.old_tip)
    run.event(
        wev.ResolutionFinished,
        attempt.number,
        number=res.number,
        passed=False,
        reason=why,
        ref=ref,
    )
    if ref is not None:
        run.event(
            wev.WorkSetAside,
            attempt.number,
            ref=ref,
            head=res.old_tip,
            reason=f"resolution {res.number} of the conflict failed: {why}",
        )
    kept = f"; the resolver's work is kept at {ref}" if ref else ""
    return f"Resolution {res.number} by an agent failed: {why}{kept}."


# -- prompts --------------------------------------------------------------------------------


def check_templates(run: RunContext, attempt: AttemptContext) -> None:
    """Render the resolver's and the resolution reviewers' templates with a sample conflict
    when the attempt may need them (it merges, and an agent may resolve), so that a project's
    override that does not render fails when the attempt begins (exit 2), not in the merge
    queue after its work is done."""
    from tf_fsm.engine.worktree import TicketWorktree

    tree = run.tree
    mode = run.settings.settings.workspace.conflicts.mode
    if not isinstance(tree, TicketWorktree) or not tree.merges or mode == "human":
        return
    sample = conflicts.Stop(
        "0" * 40,
        "a commit",
        (conflicts.Conflict("a.txt", "content", "changed it", "changed it"),),
        (),
    )
    res = Resolution(0, "0" * 40, "0" * 40, "0" * 40, {"a.txt": "content"})
    sides = conflicts.Sides("", [("0000000", "a commit", "pt-0")], "")
    _resolver_prompt(run, attempt, tree, res, sample, sides, 1)
    for role in run.settings.workflow.enableReviewers:
        if role in attempt.resolution.roles:
            name = agent_artifact(RESOLUTION_REVIEW_PHASE, role)
            context = _review_context(run, attempt, tree, res, role, name, "")
            run.prompts.render(RESOLUTION_REVIEW_TEMPLATE, context)


def _context(
    run: RunContext,
    attempt: AttemptContext,
    tree: TicketWorktree,
    phase: str,
    role: str,
    artifact: str,
) -> dict[str, Any]:
    store = run.store
    return prompt_context(
        attempt,
        phase,
        attempt.resolution.roles[role],
        ticket=ticket_view(run.ticket),
        artifact_dir=tree.agent_path(store.files.dir),
        output=tree.agent_path(store.files.path(artifact)),
        chain_context=tree.agent_path(store.files.path(CHAIN_CONTEXT)),
        flags=run.options.flags(),
        fail_on=list(run.settings.workflow.failOn),
    )


def _review_context(
    run: RunContext,
    attempt: AttemptContext,
    tree: TicketWorktree,
    res: Resolution,
    role: str,
    name: str,
    diff: str,
) -> dict[str, Any]:
    context = _context(run, attempt, tree, RESOLUTION_REVIEW_PHASE, role, name)
    resolver = run.settings.settings.workspace.conflicts.role
    notes = run.store.files.path(agent_artifact(RESOLVE_PHASE, resolver))
    context["resolution"] = {
        "base_branch": tree.ws.base_branch,
        "onto": res.onto[:12],
        "files": [{"path": p, "kind": k} for p, k in res.files.items()],
        "diff": fence_untrusted(diff, run.store.redactor, "resolution_diff", DIFF_CAP),
        "notes": str(tree.agent_path(notes)),
    }
    return context


def _resolver_prompt(
    run: RunContext,
    attempt: AttemptContext,
    tree: TicketWorktree,
    res: Resolution,
    stop: conflicts.Stop,
    sides: conflicts.Sides,
    step: int,
) -> str:
    redact, ws = run.store.redactor, tree.ws
    role = run.settings.settings.workspace.conflicts.role
    context = _context(run, attempt, tree, RESOLVE_PHASE, role, agent_artifact(RESOLVE_PHASE, role))
    context["conflict"] = {
        "branch": ws.branch,
        "base_branch": ws.base_branch,
        "onto": res.onto[:12],
        "commit": stop.commit[:12],
        "subject": inline(stop.subject, redact),
        "step": step,
        "files": [
            {"path": c.path, "kind": c.kind, "base_side": c.base_side, "ticket_side": c.ticket_side}
            for c in stop.conflicts
        ],
        "git_said": fence_untrusted("\n".join(stop.said), redact, "git_output")
        if stop.said
        else "",
        "ticket_diff": fence_untrusted(sides.ticket_diff, redact, "ticket_change", DIFF_CAP),
        "base_commits": [
            {"sha": sha, "subject": inline(subject, redact), "ticket": inline(ticket, redact)}
            for sha, subject, ticket in sides.base_commits
        ],
        "base_diff": fence_untrusted(sides.base_diff, redact, "base_change", DIFF_CAP),
    }
    return run.prompts.render(RESOLVE_TEMPLATE, context)
