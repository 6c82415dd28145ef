"""The files of a ticket's lifecycle, by phase and role: the one table the phases, resume,
the prompts' context, `run --plan`, `prompts show` and `watch` ask (pi-ticketflow's names).
"""

from __future__ import annotations

from collections.abc import Iterable

from tf_fsm.core.machine import PHASES

#: each phase's own artifact: what its `PhaseCompleted` names and a resume checks
PHASE_ARTIFACT: dict[str, str] = {
    "research": "research.md",
    "implement": "implementation.md",
    "review": "review.md",
    "fix": "fixes.md",
    "verify": "post-fix-verification.md",
    "close": "close-summary.md",
}
#: phase -> (role, the file its agent writes) for the phases one role runs
SINGLE_ROLE: dict[str, tuple[str, str]] = {
    "research": ("researcher", "research.md"),
    "implement": ("worker", "implementation.md"),
    "fix": ("fixer", "fixes.md"),
    "close": ("closer", "close-notes.md"),
}
#: reviewer role -> the review it writes (`post-fix-` in front in verify)
REVIEW_FILES: dict[str, str] = {
    "reviewer-general": "review-general.md",
    "reviewer-spec-audit": "review-spec.md",
    "reviewer-second-opinion": "review-second.md",
}
#: the merge queue's conflict resolution, as its invocations are named: the resolver's phase
#: and the file it writes, and the phase of the reviewers that review the resolution
RESOLVE_PHASE = "resolve"
RESOLUTION_ARTIFACT = "resolution.md"
RESOLUTION_REVIEW_PHASE = "resolve-review"
#: what each phase's agents should read
INPUTS: dict[str, tuple[str, ...]] = {
    "research": (),
    "implement": ("research.md",),
    "review": ("implementation.md",),
    "fix": ("review.md", "implementation.md"),
    "verify": ("review.md", "fixes.md"),
    "close": ("post-fix-verification.md", "review.md", "fixes.md"),
    # the merge queue's conflict resolution (not a lifecycle phase: it runs in `merging`)
    RESOLVE_PHASE: ("implementation.md",),
    RESOLUTION_REVIEW_PHASE: (RESOLUTION_ARTIFACT,),
}
#: the reports tf_fsm writes itself from its agents' files (never an agent's output)
REPORTS: frozenset[str] = frozenset(
    {
        "review.md",
        "post-fix-review.md",
        "post-fix-verification.md",
        "post-fix-verification.json",
        "close-summary.md",
        "resolution-review.md",
    }
)
REVIEW_PHASES = ("review", "verify")


def agent_artifact(phase: str, role: str) -> str:
    """The file one invocation of `role` in `phase` writes."""
    if phase == RESOLVE_PHASE:
        return RESOLUTION_ARTIFACT
    if phase == RESOLUTION_REVIEW_PHASE:
        return "resolution-" + REVIEW_FILES[role]
    if phase in REVIEW_PHASES:
        return ("post-fix-" if phase == "verify" else "") + REVIEW_FILES[role]
    return SINGLE_ROLE[phase][1]


def roles(phase: str, reviewers: Iterable[str], closer: bool, *, rereview: bool) -> list[str]:
    """The roles `phase` runs: the enabled reviewers in review, and in verify when they re-review
    after a fix (`rereview`: workflow.postFixVerification "rereview"; else tf_fsm counts the
    findings left itself, and nobody runs), nobody in close when the closer is off (tf_fsm
    still writes close-summary.md), else the phase's role."""
    if phase in REVIEW_PHASES:
        if phase == "verify" and not rereview:
            return []
        return [r for r in reviewers if r in REVIEW_FILES]
    if phase == "close" and not closer:
        return []
    return [SINGLE_ROLE[phase][0]]


def invocations(
    runs: Iterable[str], reviewers: Iterable[str], closer: bool, *, rereview: bool
) -> list[tuple[str, str, str]]:
    """(phase, role, artifact) of every agent invocation an attempt running `runs` may make,
    in lifecycle order (gate feedback rounds of the fixer aside; `rereview`: see `roles`)."""
    ran, enabled = set(runs), list(reviewers)
    return [
        (phase, role, agent_artifact(phase, role))
        for phase in PHASES
        if phase in ran
        for role in roles(phase, enabled, closer, rereview=rereview)
    ]
