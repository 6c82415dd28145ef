"""`tf-fsm diagram --ticket ID`: the labels and the legend say which models each attempt of the
ticket ran (from its journal's `AttemptStarted`), not the generic escalation curve, which
claims roles escalate whose escalation models the project never set. The lifecycle diagram
(`tf-fsm diagram`, committed under diagrams/) keeps the generic curve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.test_diagrams import mermaid_edges
from tf_fsm.cli.demo import TICKET_TEXT
from tf_fsm.core import journal as ev
from tf_fsm.core import machine
from tf_fsm.views import diagrams
from tf_fsm.views import history as journal_history

STRONG = "openai-codex/gpt-5.3-codex"
#: only the fixer has an escalation model: attempt 3 would escalate nothing more
SETTINGS = {
    "metaModels": {"strong": {"model": STRONG}},
    "workflow": {
        "failOn": ["Critical", "Major"],
        "escalation": {"enabled": True, "maxRetries": 3, "models": {"fixer": "strong"}},
    },
    "executor": {"kind": "scripted"},
}
GENERIC = ("a1 = tier 1", "a2 = tier 2", "a3+ = tier 3", "escalates fixer, reviewer-second")
RETRY = ("blocked", "in_progress.research")
START = ("initial", "in_progress.research")


@pytest.fixture
def ran(project: Path) -> Path:
    """demo-1, run by the scripted agent: attempt 1 blocks, attempt 2 (fixer escalated) closes."""
    (project / ".tf/config/settings.json").write_text(json.dumps(SETTINGS), encoding="utf-8")
    (project / ".tickets").mkdir()
    (project / ".tickets/demo-1.md").write_text(TICKET_TEXT, encoding="utf-8")
    result = run_cli("run", "demo-1")
    assert result.returncode == 0, result.stderr
    return project


def test_ticket_edges_say_what_each_attempt_ran(ran: Path) -> None:
    result = run_cli("diagram", "--ticket", "demo-1", "-o", "-")
    assert result.returncode == 0, result.stderr
    edges = mermaid_edges(result.stdout)
    assert "✔ a1 trigger initial, base models" in edges[START]
    assert f"✔ a2 trigger quality_gate, escalated fixer → {STRONG}" in edges[RETRY]
    for generic in GENERIC:
        assert generic not in result.stdout, generic


def test_ticket_legend_lists_the_models_per_attempt(ran: Path) -> None:
    result = run_cli("diagram", "--ticket", "demo-1", "--format", "markdown", "-o", "-")
    assert result.returncode == 0, result.stderr
    legend = result.stdout.split("## Legend", 1)[1]
    assert "**Models per attempt**" in legend
    assert "- a1: base models" in legend
    assert f"- a2: fixer → {STRONG}" in legend
    for generic in GENERIC:
        assert generic not in legend, generic


def test_ticket_dot_has_no_generic_curve(ran: Path) -> None:
    result = run_cli("diagram", "--ticket", "demo-1", "--format", "dot", "-o", "-")
    assert result.returncode == 0, result.stderr
    assert f"a2 trigger quality_gate, escalated fixer → {STRONG}" in result.stdout
    assert "a3+" not in result.stdout


def test_the_lifecycle_keeps_the_generic_curve() -> None:
    text = diagrams.diagram("markdown").decode()
    assert "a1 = tier 1, base models" in text and "a3+ = tier 3" in text
    assert "Models per attempt" not in text


def _started(n: int, **fields: object) -> ev.AttemptStarted:
    return ev.AttemptStarted(ts="2026-11-22T12:00:00.000Z", ticket="t-1", attempt=n, **fields)  # type: ignore[arg-type]


def test_escalated_models_come_from_the_models_record() -> None:
    """A model a template's frontmatter chose is not an escalation; a run's escalated roles
    and their models are, in role order."""
    models = {
        "worker": {"model": "w/strong", "source": "escalated"},
        "reviewer-second-opinion": {"model": "r/strong", "source": "escalated"},
        "fixer": {"model": "f/strong", "source": "escalated"},
        "closer": {"model": "c/front", "source": "frontmatter"},
    }
    escalation = {"fixer": "f/strong", "reviewerSecondOpinion": "r/strong", "worker": "w/strong"}
    events = [
        _started(1, trigger="initial", escalation={}, models={}),
        ev.RetryStateReset(ts="2026-11-22T12:00:00.000Z", ticket="t-1", backup="x.bak"),
        _started(1, trigger="initial", escalation={}),
        _started(3, trigger="quality_gate", escalation=escalation, models=models),
    ]
    history = journal_history.replay("t-1", events, machine.phase_state("research"))
    assert history.attempts == [
        "a1: base models",
        "--retry-reset: attempt numbers start again at 1",
        "a1: base models",
        "a3: worker → w/strong, reviewer-second-opinion → r/strong, fixer → f/strong",
    ]


def test_an_older_journal_without_models_uses_the_escalation_record() -> None:
    events = [_started(2, trigger="quality_gate", escalation={"reviewerSecondOpinion": "r/x"})]
    history = journal_history.replay("t-1", events, machine.phase_state("research"))
    assert history.attempts == ["a2: reviewer-second-opinion → r/x"]
