"""Bad state is caught before any agent runs: a journal line that does not decode stops the
run with exit 2 before the first agent call (and before `--retry-reset` moves anything), with
retry-state.json and the journal untouched."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import Harness, finding


@pytest.mark.parametrize("how", ["--retry-reset", "state gone"])
def test_an_undecodable_journal_line_stops_the_run_before_any_agent(e2e: Harness, how: str) -> None:
    """Neither a reset nor a ticket without retry-state.json (moved aside before) reads the
    journal on its way to the first agent: only the check up front stops it."""
    e2e.plan(findings=[finding("f1", fixed_by=[])])  # attempt 1 stays blocked
    first = e2e.run("--once")
    assert first.returncode == 3, first.stderr
    calls = len(e2e.agent_calls())
    journal, state = e2e.dir / "events.jsonl", e2e.dir / "retry-state.json"
    lines = journal.read_bytes().splitlines(keepends=True)
    lines[2] = b'{"event": "PhaseStarted", "broken\n'  # a middle line, not a torn tail
    journal.write_bytes(b"".join(lines))
    if how == "state gone":
        state.rename(e2e.dir / "retry-state.json.bak.20260101T000000Z")
    files = {p.name: p.read_bytes() for p in e2e.dir.iterdir() if p.is_file()}

    again = e2e.run(*([how] if how.startswith("--") else []))
    assert again.returncode == 2, again.stderr
    assert f"{journal}: line 3" in again.stderr
    assert len(e2e.agent_calls()) == calls  # no agent ran
    assert {p.name: p.read_bytes() for p in e2e.dir.iterdir() if p.is_file()} == files
