"""`tf-fsm diagram`: the lifecycle from the runtime table, and a ticket's path from its journal."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tf_fsm.cli.demo import TICKET_TEXT
from tf_fsm.core import journal as ev
from tf_fsm.core import machine
from tf_fsm.views import diagrams
from tf_fsm.views import history as journal_history
from tf_fsm.views import legend as legends

REPO = Path(__file__).resolve().parents[1]
COMMITTED = REPO / "diagrams"
HAS_DOT = shutil.which("dot") is not None
NEEDS_DOT = pytest.mark.skipif(
    not HAS_DOT, reason="Graphviz `dot` is not on PATH (apt-get install -y graphviz)"
)
SETTINGS = {
    "metaModels": {"strong": {"model": "openai-codex/gpt-5.3-codex"}},
    "workflow": {
        "failOn": ["Critical", "Major"],
        "escalation": {"enabled": True, "maxRetries": 3, "models": {"fixer": "strong"}},
    },
    "executor": {"kind": "scripted"},
}
GUARDS = sorted({g.__name__ for e in machine.TRANSITIONS for g in e.guards})


def mermaid_edges(text: str) -> dict[tuple[str, str], str]:
    """(source, dest) -> label of each arrow, with `:::class` marks removed."""
    edges = {}
    for line in text.splitlines():
        head, _, label = line.strip().partition(":")
        if " --> " in head and not head.endswith(":"):
            label = re.sub(r"^::s_\w+:?", "", label)  # `dest:::s_x: label` splits at the first `:`
            src, _, dst = head.partition(" --> ")
            edges[(src, dst)] = label.strip()
    return edges


# --- the lifecycle ---------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", diagrams.COMMITTED)
def test_committed_file_is_what_the_code_generates(fmt: str) -> None:
    path = COMMITTED / (diagrams.NAME + diagrams.SUFFIX[fmt])
    assert path.read_bytes() == diagrams.diagram(fmt), (
        f"{path} is stale: run `tf-fsm diagram` from the repository root"
    )


@pytest.mark.parametrize("fmt", ["mermaid", "markdown", "dot"])
def test_every_state_trigger_and_guard_appears(fmt: str) -> None:
    text = diagrams.diagram(fmt).decode().replace("\\l", "\n")  # DOT's left-aligned breaks
    for state in machine.STATES:
        assert re.search(rf"(^|[\s\"]){re.escape(state)}([\s\":]|$)", text, re.M), state
    for trigger in machine.TRIGGERS:
        assert re.search(rf"\b{trigger}\b", text), trigger
    for guard in GUARDS:
        assert re.search(rf"\[([^\]]* & )?{guard}( & [^\]]*)?\]", text), guard


def test_in_progress_is_a_group_of_the_six_phases() -> None:
    text = diagrams.diagram("mermaid").decode()
    group = text[
        text.index("state in_progress {") : text.index("}", text.index("state in_progress {"))
    ]
    for phase in machine.PHASES:
        assert f'state "{phase}" as in_progress.{phase}' in group
    dot = diagrams.diagram("dot").decode()
    assert 'subgraph "cluster_in_progress"' in dot


def test_edges_carry_guards_retry_cap_and_tiers() -> None:
    edges = mermaid_edges(diagrams.diagram("mermaid").decode())
    retry = edges[("blocked", "in_progress.research")]
    assert retry.startswith("retry [retries_left]")
    assert "retry cap maxRetries (default 3)" in retry
    assert "a2 = tier 2, escalates fixer" in retry
    assert "a3+ = tier 3, escalates fixer, reviewer-second-opinion, worker" in retry
    assert edges[("initial", "in_progress.research")].startswith("start [retries_left]")
    assert edges[("in_progress.close", "closed")] == "complete [gate_passed & no_merge]"
    assert edges[("in_progress.close", "merging")] == "complete [gate_passed & merges]"
    assert edges[("merging", "closed")] == "merged"
    assert edges[("in_progress.close", "blocked")] == "complete [gate_failed]"
    assert (
        edges[("in_progress.fix", "in_progress.verify")]
        == "complete [runs_fix]<br/>skip [skips_fix]"
    )
    # fail leaves every phase, so it is drawn once from the group
    assert edges[("in_progress", "error")].startswith("fail")
    assert not any(src.startswith("in_progress.") and dst == "error" for src, dst in edges)


def test_a_phase_without_the_shared_edge_keeps_its_own_arrows() -> None:
    table = [e for e in machine.TRANSITIONS if (e.source, e.trigger) != ("in_progress.fix", "fail")]
    edges = mermaid_edges(diagrams.diagram("mermaid", table=table).decode())
    assert ("in_progress", "error") not in edges
    assert ("in_progress.review", "error") in edges
    assert ("in_progress.fix", "error") not in edges


def test_output_is_deterministic_and_mermaid_safe() -> None:
    for fmt in diagrams.COMMITTED:
        assert diagrams.diagram(fmt) == diagrams.diagram(fmt)
    for line in diagrams.diagram("mermaid").decode().splitlines():
        if " --> " in line and ":" in line:
            label = line.split(":", 1)[1].removeprefix("::s_")
            assert not set(label) & set(";#"), line  # these end a mermaid label


def test_legend_documents_every_guard() -> None:
    legend = legends.legend()
    assert "UNDOCUMENTED" not in legend
    for guard in GUARDS:
        assert f"`{guard}`" in legend
    assert "- a2 = tier 2, escalates fixer" in legend


def test_docs_show_the_generated_mermaid() -> None:
    docs = (REPO / "docs" / "diagrams.md").read_text(encoding="utf-8")
    assert f"```mermaid\n{diagrams.diagram('mermaid').decode()}```" in docs


def test_help_does_not_import_the_diagram_modules() -> None:
    code = (
        "import sys; from tf_fsm.cli.main import main; main(['--help']); "
        "print('\\nLOADED', 'transitions.extensions.diagrams' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert "diagram" in out
    assert out.rstrip().endswith("LOADED False")


# --- the CLI ---------------------------------------------------------------------------------


def test_diagram_writes_the_committed_set_and_check_passes(project: Path) -> None:
    result = run_cli("diagram")
    assert result.returncode == 0, result.stderr
    for fmt in diagrams.COMMITTED:
        path = project / "diagrams" / (diagrams.NAME + diagrams.SUFFIX[fmt])
        assert path.read_bytes() == (COMMITTED / path.name).read_bytes()
        assert f"wrote diagrams/{path.name}" in result.stdout
    check = run_cli("diagram", "--check")
    assert check.returncode == 0, check.stderr
    assert "up to date" in check.stdout


def test_check_fails_naming_the_stale_and_missing_files(project: Path) -> None:
    assert run_cli("diagram").returncode == 0
    (project / "diagrams" / "ticket-lifecycle.dot").write_text("digraph {}\n")
    (project / "diagrams" / "ticket-lifecycle.md").unlink()
    result = run_cli("diagram", "--check")
    assert result.returncode == 1
    assert "stale: diagrams/ticket-lifecycle.dot" in result.stderr
    assert "stale: diagrams/ticket-lifecycle.md" in result.stderr
    assert "ticket-lifecycle.mmd" not in result.stderr
    assert "`tf-fsm diagram`" in result.stderr
    assert "Traceback" not in result.stderr


def test_check_of_the_repository_passes_as_ci_runs_it() -> None:
    result = run_cli("diagram", "--check", cwd=REPO)
    assert result.returncode == 0, result.stderr


def test_check_refuses_other_flags() -> None:
    result = run_cli("diagram", "--check", "--format", "dot")
    assert result.returncode == 2
    assert "--check" in result.stderr


def test_stdout_and_help() -> None:
    result = run_cli("diagram", "--format", "dot", "-o", "-")
    assert result.returncode == 0
    assert result.stdout == diagrams.diagram("dot").decode()
    assert not Path("diagrams").exists()  # -o - writes nothing
    helped = run_cli("diagram", "--help")
    assert "exit codes:" in helped.stdout and "--check" in helped.stdout


def test_svg_without_graphviz_says_how_to_install_it(tmp_path: Path) -> None:
    result = run_cli("diagram", "--format", "svg", env={"PATH": str(tmp_path)})
    assert result.returncode == 2
    assert "sudo apt-get install -y graphviz" in result.stderr
    assert "brew install graphviz" in result.stderr
    assert "Traceback" not in result.stderr
    assert not Path("diagrams/ticket-lifecycle.svg").exists()


def test_a_failing_dot_is_reported_with_its_stderr(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "dot"
    fake.write_text("#!/bin/sh\ncat >/dev/null\necho 'Error: syntax error in line 3' >&2\nexit 1\n")
    fake.chmod(0o755)
    result = run_cli("diagram", "--format", "svg", env={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert result.returncode == 2, result.stderr
    assert "`dot` failed: Error: syntax error in line 3" in result.stderr
    assert "Traceback" not in result.stderr
    assert not Path("diagrams/ticket-lifecycle.svg").exists()


@NEEDS_DOT
def test_svg_is_rendered_with_every_state_trigger_and_guard(project: Path) -> None:
    result = run_cli("diagram", "--format", "svg")
    assert result.returncode == 0, result.stderr
    root = ET.parse(project / "diagrams" / "ticket-lifecycle.svg").getroot()  # noqa: S314 (ours)
    assert root.tag.endswith("svg")
    texts = " ".join(t.text or "" for t in root.iter() if t.tag.endswith("text"))
    for name in [*machine.PHASES, "initial", "merging", "blocked", "closed", "error"]:
        assert re.search(rf"\b{name}\b", texts), name
    assert re.search(r"\bin_progress\b", texts)
    for word in [*machine.TRIGGERS, "escalates fixer"]:
        assert word in texts, word
    for guard in GUARDS:
        assert re.search(rf"\[([^\]]* & )?{guard}( & [^\]]*)?\]", texts), guard
    # legible: the drawing is larger than a thumbnail and its labels are 10pt or more
    width = float(root.get("width", "0").removesuffix("pt"))
    assert width > 600
    sizes = {float(t.get("font-size", "0")) for t in root.iter() if t.tag.endswith("text")}
    assert min(sizes) >= 10


@NEEDS_DOT
def test_png_is_a_png_of_a_readable_size() -> None:
    data = diagrams.diagram("png")
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width > 800 and height > 600


# --- a ticket's path -------------------------------------------------------------------------


def _tree(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def blocked_then_closed(project: Path) -> Path:
    """demo-1 run by the scripted agent: attempt 1 blocks, attempt 2 (fixer escalated) closes."""
    from tf_fsm.engine.orchestrator import run_ticket

    (project / ".tf/config/settings.json").write_text(json.dumps(SETTINGS), encoding="utf-8")
    (project / ".tickets").mkdir()
    (project / ".tickets/demo-1.md").write_text(TICKET_TEXT, encoding="utf-8")
    outcome = run_ticket(project, "demo-1")
    assert (outcome.status, outcome.attempt) == ("closed", 2)
    return project / ".tf/knowledge/tickets/demo-1"


def test_ticket_history_after_blocked_then_closed(blocked_then_closed: Path) -> None:
    before = _tree(blocked_then_closed)
    result = run_cli("diagram", "--ticket", "demo-1")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # every journal step mapped onto an edge
    path = blocked_then_closed / "lifecycle.mmd"
    assert f"wrote {path}" in result.stdout
    after = _tree(blocked_then_closed)
    assert {k: v for k, v in after.items() if k != "lifecycle.mmd"} == before

    text = path.read_text(encoding="utf-8")
    edges = mermaid_edges(text)
    assert 'state "closed (current)" as closed' in text
    assert "Class closed s_active" in text and "Class blocked s_previous" in text
    assert "in_progress.fix:::s_previous" in text
    assert "✔ a1 trigger initial" in edges[("initial", "in_progress.research")]
    assert (
        "✔ a2 trigger quality_gate, escalated fixer" in edges[("blocked", "in_progress.research")]
    )
    assert (
        "✔ a1 fixer zai/glm-5<br/>✔ a2 fixer openai-codex/gpt-5.3-codex"
        in edges[("in_progress.fix", "in_progress.verify")]
    )
    assert edges[("in_progress.research", "in_progress.implement")].endswith(
        "skip [skips_research]<br/>✔ a2"  # the retry skipped research
    )
    blocked = edges[("in_progress.close", "blocked")]
    assert "✔ a1 gate Major 1" in blocked and "a2" not in blocked
    closed = edges[("in_progress.close", "closed")]
    assert "✔ a2 gate" in closed and "Major" not in closed and "a1" not in closed
    assert "✔" not in edges[("in_progress", "error")]
    assert not any("✔" in label for (src, _), label in edges.items() if src == "error")


def test_ticket_history_to_stdout_and_as_dot_changes_no_file(blocked_then_closed: Path) -> None:
    before = _tree(blocked_then_closed)
    result = run_cli("diagram", "--ticket", "demo-1", "-o", "-")
    assert result.returncode == 0, result.stderr
    assert "closed (current)" in result.stdout
    dot = run_cli("diagram", "--ticket", "demo-1", "--format", "dot", "-o", "-").stdout
    taken = [line for line in dot.splitlines() if 'penwidth="2.2"' in line]
    assert any('"blocked" -> "in_progress.research"' in line for line in taken)
    assert not any('-> "error"' in line for line in taken)
    assert _tree(blocked_then_closed) == before


@pytest.mark.parametrize("bad", ["../x", "a b", ""])
def test_ticket_id_is_validated(bad: str) -> None:
    result = run_cli("diagram", "--ticket", bad)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr


def test_a_ticket_never_run_is_refused_and_gets_no_directory(project: Path) -> None:
    result = run_cli("diagram", "--ticket", "nope-1")
    assert result.returncode == 2
    assert "has not been run" in result.stderr
    assert not (project / ".tf/knowledge/tickets/nope-1").exists()


def _events(*specs: tuple[type[ev.Event], int, dict[str, object]]) -> list[ev.Event]:
    base = {"ts": "2026-11-22T12:00:00.000Z", "ticket": "t-1"}
    return [cls(**base, attempt=n, **fields) for cls, n, fields in specs]  # type: ignore[arg-type]


def test_replay_maps_failure_and_resume_and_reports_strays() -> None:
    events = _events(
        (ev.AttemptStarted, 1, {"trigger": "initial", "escalation": {}}),
        (ev.PhaseSkipped, 1, {"phase": "research", "reason": "off"}),
        (ev.PhaseStarted, 1, {"phase": "implement", "roles": ["worker"]}),
        (
            ev.InvocationFinished,
            1,
            {
                "phase": "implement",
                "role": "worker",
                "model": "m:8b",
                "artifact": "i.md",
                "sha256": None,
                "ok": False,
                "durationMs": 1,
            },
        ),
        (
            ev.PhaseFailed,
            1,
            {
                "phase": "implement",
                "role": "worker",
                "failure": "exit 1",
                "exitCode": 1,
                "stderrTail": "",
                "log": "x.log",
            },
        ),
        (ev.AttemptResumed, 1, {"phase": "implement"}),
        (ev.PhaseSkipped, 1, {"phase": "close", "reason": "no such edge"}),
    )
    history = journal_history.replay("t-1", events, machine.ERROR)
    ip = machine.PREFIX
    assert history.taken[(f"{ip}implement", "fail", "error")] == ["a1 implement worker failed"]
    assert history.taken[("error", "resume", f"{ip}implement")] == ["a1"]
    assert history.taken[(f"{ip}research", "skip", f"{ip}implement")] == ["a1"]
    assert history.unmapped == [f"a1: {ip}close --skip--> ?"]
    assert "error" not in history.visited  # it is the current state
    text = diagrams.diagram("mermaid", history).decode()
    assert 'state "error (current)" as error' in text
    edges = mermaid_edges(text)
    assert "✔ a1 implement worker failed" in edges[("in_progress", "error")]


def test_gate_edges_carry_each_gates_last_verdict() -> None:
    events = _events(
        (ev.AttemptStarted, 1, {"trigger": "initial", "escalation": {}}),
        (ev.GateEvaluated, 1, {"passed": True, "counts": {"Major": 0, "Minor": 2}}),
        (ev.GateEvaluated, 1, {"name": "tests", "passed": False, "exitCode": 1}),
        (ev.GateEvaluated, 1, {"name": "tests", "passed": False, "exitCode": 3}),
        (ev.TicketBlocked, 1, {"reason": "tests", "retryCount": 1, "maxRetries": 3}),
    )
    history = journal_history.replay("t-1", events, machine.BLOCKED)
    notes = history.taken[(f"{machine.PREFIX}close", "complete", "blocked")]
    assert notes == ["a1", "a1 gate Minor 2", "a1 gate tests failed (exit 3)"]


def test_model_names_cannot_break_the_mermaid() -> None:
    events = _events(
        (ev.AttemptStarted, 1, {"trigger": "initial", "escalation": {}}),
        (
            ev.InvocationFinished,
            1,
            {
                "phase": "research",
                "role": "researcher",
                "model": "ollama/llama3:8b;x#1",
                "artifact": "r.md",
                "sha256": None,
                "ok": True,
                "durationMs": 1,
            },
        ),
        (ev.PhaseCompleted, 1, {"phase": "research", "artifact": "r.md", "sha256": "0"}),
    )
    text = diagrams.diagram(
        "mermaid", journal_history.replay("t-1", events, "in_progress.implement")
    )
    label = mermaid_edges(text.decode())[("in_progress.research", "in_progress.implement")]
    assert "researcher ollama/llama3∶8b,xno.1" in label
    assert 'state "implement (current)" as in_progress.implement' in text.decode()
    assert "in_progress.implement:::s_active" in text.decode()  # styled on its first arrow
    dot = diagrams.diagram("dot", journal_history.replay("t-1", events, "in_progress.implement"))
    assert b"ollama/llama3:8b;x#1" in dot  # DOT strings take them as they are


def test_ralph_diagram_counts_tickets_per_edge(project: Path) -> None:
    """`diagram --ralph`: one picture of a backlog run over the same machine."""
    import json as json_

    from tests.conftest import run_cli

    strong = "openai-codex/gpt-5.3-codex"
    (project / ".tickets").mkdir()
    for tid in ("r-1", "r-2", "r-3"):
        (project / f".tickets/{tid}.md").write_text(
            f"---\nid: {tid}\nstatus: open\ndeps: []\n---\n# {tid}\n"
        )
    scenario = {
        "tickets": {
            "r-2": {
                "findings": [{"id": "F", "severity": "Major", "text": "x", "fixedBy": [strong]}]
            }
        }
    }
    (project / "s.json").write_text(json_.dumps(scenario))
    settings = {
        "metaModels": {"strong": {"model": strong}},
        "workflow": {"escalation": {"enabled": True, "models": {"fixer": "strong"}}},
        "executor": {"kind": "scripted", "scenario": "s.json"},
    }
    (project / ".tf/config/settings.json").write_text(json_.dumps(settings))
    for tid in ("r-1", "r-2"):  # r-3 is never run: it is not counted
        assert run_cli("run", tid).returncode == 0
    before = {p: p.read_bytes() for p in (project / ".tf/knowledge").rglob("*") if p.is_file()}
    shown = run_cli("diagram", "--ralph", "-o", "-")
    assert shown.returncode == 0, shown.stderr
    edges = mermaid_edges(shown.stdout)
    assert "backlog: 2 tickets" in shown.stdout
    assert "✔ 2 tickets" in edges[("initial", "in_progress.research")]
    assert "✔ 1 ticket" in edges[("blocked", "in_progress.research")]
    assert "✔ 2 tickets" in edges[("in_progress.close", "closed")]
    after = {p: p.read_bytes() for p in (project / ".tf/knowledge").rglob("*") if p.is_file()}
    assert after == before  # drawing changes no ticket file
    written = run_cli("diagram", "--ralph")
    assert written.returncode == 0 and (project / ".tf/ralph/lifecycle.mmd").exists()
