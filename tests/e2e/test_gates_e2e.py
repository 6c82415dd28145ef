"""Quality-gate commands with real processes: the fake agent is the fixer, bash runs the gates."""

from __future__ import annotations

import json
import os
import time
from typing import Any

from tests.conftest import run_cli
from tests.e2e.conftest import STRONG, Harness

KEY = "sk-ant-api03-" + "G" * 40


def gates_settings(e2e: Harness, gates: list[dict[str, Any]], **workflow: Any) -> None:
    e2e.settings(qualityGates=gates, **workflow)


def gate_events(e2e: Harness, attempt: int, name: str) -> list[dict[str, Any]]:
    return [
        ev for ev in e2e.events(attempt) if ev["event"] == "GateEvaluated" and ev["name"] == name
    ]


def verification(e2e: Harness) -> dict[str, Any]:
    return json.loads((e2e.dir / "post-fix-verification.json").read_text())


def test_passing_gate_closes(e2e: Harness) -> None:
    gates_settings(e2e, [{"name": "lint", "command": "true"}])
    result = e2e.run()
    assert result.returncode == 0, result.stderr
    (event,) = gate_events(e2e, 1, "lint")
    assert (event["passed"], event["exitCode"], event["innerTry"], event["required"]) == (
        True,
        0,
        1,
        True,
    )
    gates = verification(e2e)["gates"]
    assert [(g["name"], g["passed"], g["blocking"]) for g in gates] == [("lint", True, False)]
    assert "- lint (required): passed" in (e2e.dir / "close-summary.md").read_text()
    assert (e2e.dir / "gates/attempt-1/lint-try-1.log").exists()


def test_gate_fails_twice_then_passes_after_the_fixer_edits(e2e: Harness) -> None:
    # The gate passes once the fixer has edited work.txt twice (each feedback round edits it).
    command = (
        "test -f work.txt && test $(wc -l < work.txt) -ge 2 "
        "|| { echo 'E501 line too long' >&2; exit 1; }"
    )
    gates_settings(e2e, [{"name": "lint", "command": command}])
    e2e.plan(edits=[{"phase": "fix", "file": "work.txt"}])
    result = e2e.run()
    assert result.returncode == 0, result.stderr
    runs = gate_events(e2e, 1, "lint")
    assert [(r["innerTry"], r["passed"]) for r in runs] == [(1, False), (2, False), (3, True)]
    sent = [ev for ev in e2e.events(1) if ev["event"] == "GateFeedbackSent"]
    assert [(s["innerTry"], s["gates"]) for s in sent] == [(1, ["lint"]), (2, ["lint"])]
    # the fixer was sent back with the gate's real output, with the same (base) model
    edits = (e2e.project / "work.txt").read_text().splitlines()
    assert edits == ["zai/glm-5 attempt 1 feedback=True"] * 2
    prompt = (e2e.dir / "prompts/attempt-1/fix-fixer-gate-1.md").read_text()
    assert "⚠️ Quality Gate Failures (attempt 1/3)" in prompt
    assert "❌ lint (retry 1/3)" in prompt and "E501 line too long" in prompt
    assert "Please fix these issues" in prompt
    assert e2e.read_state()["attempts"][0]["status"] == "closed"


def test_gate_that_never_passes_blocks_and_per_gate_max_beats_global(e2e: Harness) -> None:
    gates_settings(
        e2e,
        [{"name": "tests", "command": "echo 'FAILED test_parser' && exit 1", "maxRetries": 1}],
        qualityGateMaxRetries=5,
        escalation={"enabled": False},
    )
    result = e2e.run()
    assert result.returncode == 3, result.stderr
    runs = gate_events(e2e, 1, "tests")
    assert [r["innerTry"] for r in runs] == [1, 2]  # one feedback round, not five
    assert len([ev for ev in e2e.events(1) if ev["event"] == "GateFeedbackSent"]) == 1
    state = e2e.read_state()
    assert (state["attempts"][0]["status"], state["retryCount"]) == ("blocked", 1)
    assert "quality gate tests failed (exit code 1)" in state["attempts"][0]["reason"]
    summary = (e2e.dir / "close-summary.md").read_text()
    assert "**BLOCKED**" in summary and "- tests (required): BLOCKING" in summary
    assert "FAILED test_parser" in summary
    pfv = (e2e.dir / "post-fix-verification.md").read_text()
    assert "### tests output (tail)" in pfv and "FAILED test_parser" in pfv
    # the next attempt's fix prompt carries the gate failure as the prior failure
    e2e.settings(qualityGates=[{"name": "tests", "command": "true"}], escalation={"enabled": False})
    assert e2e.run().returncode == 0
    chain = e2e.chain()
    assert chain["priorFailure"]["kind"] == "gate:tests"


def test_optional_failing_gate_only_warns(e2e: Harness) -> None:
    gates_settings(
        e2e, [{"name": "docs", "command": "echo missing docstring; exit 2", "required": False}]
    )
    result = e2e.run()
    assert result.returncode == 0, result.stderr
    assert [ev["event"] for ev in e2e.events(1)].count("GateFeedbackSent") == 0
    (gate,) = verification(e2e)["gates"]
    assert (gate["passed"], gate["required"], gate["blocking"], gate["exitCode"]) == (
        False,
        False,
        False,
        2,
    )
    summary = (e2e.dir / "close-summary.md").read_text()
    assert "**CLOSED**" in summary and "- docs (optional): warning, exit code 2" in summary
    assert "missing docstring" in summary


def test_pipes_and_quotes_work(e2e: Harness) -> None:
    command = 'printf \'a b\\nc "d"\\n\' | grep -c \'"d"\' | grep -qx 1 && echo "it\'s fine"'
    gates_settings(
        e2e,
        [
            {"name": "shell", "command": command},
            {"name": "argv", "command": ["bash", "-c", "exit 0"]},
        ],
    )
    assert e2e.run().returncode == 0
    assert [e["passed"] for e in gate_events(e2e, 1, "shell")] == [True]
    assert [e["passed"] for e in gate_events(e2e, 1, "argv")] == [True]
    assert "it's fine" in (e2e.dir / "gates/attempt-1/shell-try-1.log").read_text()


def test_hanging_gate_is_killed_with_its_process_group(e2e: Harness) -> None:
    pid_file = e2e.project / "gate-child.pid"
    command = f"sleep 300 & echo $! > {pid_file}; wait"
    gates_settings(
        e2e, [{"name": "hang", "command": command, "timeoutSeconds": 1, "maxRetries": 0}]
    )
    started = time.monotonic()
    result = e2e.run()
    assert result.returncode == 4 or result.returncode == 3, result.stderr
    assert time.monotonic() - started < 60
    (event,) = gate_events(e2e, 1, "hang")
    assert event["passed"] is False and event["exitCode"] is None
    assert "timed out" in event["reason"]
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(child):
        time.sleep(0.05)
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie nobody reaps is dead for our purposes
        with open(f"/proc/{pid}/status") as status:
            return not any(line.startswith("State:") and "Z" in line for line in status)
    except FileNotFoundError:
        return False


def test_gate_output_with_api_key_is_redacted_everywhere(e2e: Harness) -> None:
    command = f"echo 'token {KEY} leaked'; exit 1"
    gates_settings(
        e2e, [{"name": "leaky", "command": command, "maxRetries": 1}], escalation={"enabled": False}
    )
    assert e2e.run().returncode == 3
    written = [p for p in e2e.dir.rglob("*") if p.is_file()]
    assert any("gates" in p.parts for p in written)
    for path in written:
        if path.name.startswith("fake-agent"):
            continue
        assert KEY not in path.read_text(errors="replace"), path
    assert KEY not in (e2e.project / ".tickets/pt-1.md").read_text()


def test_gate_run_command_outside_a_lifecycle(e2e: Harness) -> None:
    gates_settings(e2e, [{"name": "ok", "command": "true"}, {"name": "bad", "command": "exit 3"}])
    result = run_cli("gate", "pt-1", "--run", cwd=e2e.project)
    assert result.returncode == 3, result.stderr
    assert "ok" in result.stdout and "bad" in result.stdout and "exit code 3" in result.stdout
    as_json = run_cli("gate", "pt-1", "--run", "--json", cwd=e2e.project)
    rows = [json.loads(line) for line in as_json.stdout.splitlines()]
    assert [(r["name"], r["passed"]) for r in rows] == [("ok", True), ("bad", False)]
    assert not (e2e.dir / "retry-state.json").exists()
    assert STRONG  # the harness's strong model is irrelevant here
