"""The diagrams' legend: what each guard means, the escalation curve on the `start` and
`retry` edges (or, on a ticket's path, the models its attempts really ran), and how taken
edges are drawn."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tf_fsm.core import machine as fsm

if TYPE_CHECKING:
    from tf_fsm.views.history import History

TAKEN = "✔ "  # a mermaid state diagram cannot colour one edge, so a taken edge says so
#: the current state's outline and fill in a ticket's SVG: red where its attempt failed or was
#: blocked, blue wherever else it stands (a phase running, a merge, closed)
FAILED_CURRENT = ("#b03a2e", "#f5b7a8")
CURRENT = ("#1f5fbf", "#a9c8f5")


def current_colours(state: str) -> tuple[str, str]:
    """(outline, fill) of the state a ticket stands in, for every drawing of its path."""
    return FAILED_CURRENT if state in (fsm.ERROR, fsm.BLOCKED) else CURRENT


def tiers() -> tuple[list[str], list[str]]:
    """Label lines of `start` and `retry`: the escalation curve and the default retry cap."""
    from tf_fsm.core.curve import TIERED_CURVE, AttemptRecord
    from tf_fsm.settings.load import Escalation

    def line(n: int) -> str:
        roles = sorted(TIERED_CURVE(AttemptRecord(n)))
        what = f"escalates {', '.join(roles)}" if roles else "base models"
        return f"a{TIERED_CURVE.attempts_of(n)} = tier {TIERED_CURVE.tier_of(n)}, {what}"

    cap = Escalation.model_fields["maxRetries"].default
    first, *retries = TIERED_CURVE.tiers
    return [line(first)], [f"retry cap maxRetries (default {cap})", *map(line, retries)]


_GUARDS = {
    "retries_left": "retryCount (blocked attempts since the last close) is below the retry cap "
    "`workflow.escalation.maxRetries`; at the cap the ticket stays blocked and `run` exits 4",
    "gate_passed": "the quality gate passed: no `failOn` severity has a post-fix count above 0",
    "gate_failed": "the quality gate failed: a `failOn` severity has a post-fix count above 0",
    "runs_": "this attempt runs the phase (docs/lifecycle.md says when)",
    "skips_": "this attempt skips the phase",
    "resumes_at_": "the attempt in error picks up at this phase (`tf-fsm run` again)",
    "merges": "the ticket runs in a git worktree and merges into its base branch now, before "
    "it closes (docs/workspaces.md)",
    "merge_held": "the ticket runs in a git worktree and ralph.parallelAutoMerge is false: its "
    "merge waits for `tf-fsm merge`, and it is not closed until then",
    "no_merge": "the ticket runs in the project's tree: it closes without a merge",
}


def guard_family(name: str) -> str | None:
    """The legend row of a guard name: itself, or its `runs_`/`skips_`/`resumes_at_` family."""
    if name in _GUARDS:
        return name
    family = next((p for p in ("runs_", "skips_", "resumes_at_") if name.startswith(p)), None)
    return family if family and name.removeprefix(family) in fsm.PHASES else None


def one_ticket(history: History | None) -> bool:
    """A ticket's path, as opposed to the lifecycle (no history) or the backlog (a title)."""
    return history is not None and history.title is None


def _escalation_legend(history: History | None) -> list[str]:
    """The legend's paragraph on models: the generic curve, or what the ticket's attempts ran."""
    if history is not None and one_ticket(history):
        return history.models_legend()
    start, retry = tiers()
    return [
        "**Retry cap and escalation tiers**, on the `start` and `retry` edges (`aN` is attempt",
        "N; a role escalates only with `workflow.escalation.enabled` and a model for it in",
        "`workflow.escalation.models`):",
        "",
        *(f"- {line}" for line in start + retry),
    ]


def legend(history: History | None = None) -> str:
    families: dict[str | None, list[str]] = {}
    for guard in dict.fromkeys(g for e in fsm.TRANSITIONS for g in e.guards):
        families.setdefault(guard_family(guard.__name__), []).append(f"`{guard.__name__}`")
    return "\n".join(
        [
            "## Legend",
            "",
            "An edge reads `trigger [guard]`: the trigger takes it only when its guard holds.",
            "",
            "| guard | true when |",
            "|---|---|",
            *(
                f"| {', '.join(n)} | {_GUARDS.get(f or '', 'UNDOCUMENTED')} |"
                for f, n in families.items()
            ),
            "",
            *_escalation_legend(history),
            "",
            "An arrow from the `in_progress` group stands for the same edge from each phase in it.",
            "In the SVG/PNG, `fail` edges are dashed and `resume` edges dotted. In a ticket's",
            f"diagram, each edge it took has `{TAKEN.strip()} aN` lines (attempt N; a phase's role",
            "and model; each gate's verdict: nonzero counts, a command's exit code) and is blue",
            "in the SVG; the states the ticket passed through are light blue, and its current",
            "state is marked `(current)`: blue, red when it is `error` or `blocked`.",
        ]
    )


def markdown(mermaid: str, title: str, source: str, history: History | None = None) -> str:
    return f"# {title}\n\n{source}\n\n```mermaid\n{mermaid}```\n\n{legend(history)}\n"
