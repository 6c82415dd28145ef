"""No write follows a symlink out of the project (docs/retry-state.md, "Symlinks").

A cloned repository may carry any of tf_fsm's files or directories as a symlink to anywhere.
Each kind is tried with a real `tf-fsm run` (the fake agent as a process): exit 2, a message
naming the link, and nothing written where it points. A link that stays inside the project is
followed as usual, and a knowledge directory configured outside on purpose is used.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.e2e.conftest import Harness


def snapshot(where: Path) -> dict[str, bytes]:
    """Every file under `where` (or `where` itself) and its bytes."""
    if where.is_file():
        return {where.name: where.read_bytes()}
    return {str(p.relative_to(where)): p.read_bytes() for p in where.rglob("*") if p.is_file()}


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory outside the project, holding a file with an unterminated last line."""
    place = tmp_path / "outside"
    place.mkdir()
    (place / "victim.txt").write_bytes(b"line one\nunterminated last line")
    return place


def refused(e2e: Harness, link: Path, *args: str) -> None:
    result = e2e.run(*args)
    assert result.returncode == 2, result.stderr
    assert str(link) in result.stderr, result.stderr
    assert "tf-fsm does not write through it" in result.stderr
    assert "internal error" not in result.stderr
    assert not e2e.agent_calls(), "an agent ran before the link was refused"


def test_a_journal_symlinked_outside_is_refused_and_its_target_kept(
    e2e: Harness, outside: Path
) -> None:
    e2e.dir.mkdir(parents=True)
    (e2e.dir / "events.jsonl").symlink_to(outside / "victim.txt")
    before = snapshot(outside)
    refused(e2e, e2e.dir / "events.jsonl")
    assert snapshot(outside) == before  # the unterminated line is not cut


def test_a_journal_symlinked_inside_the_project_is_refused_too(e2e: Harness) -> None:
    """The journal's append cuts a torn last line: through a link it would cut a user's file."""
    source = e2e.project / "src.py"
    source.write_bytes(b"print('no newline at the end')")
    e2e.dir.mkdir(parents=True)
    (e2e.dir / "events.jsonl").symlink_to(source)
    refused(e2e, e2e.dir / "events.jsonl")
    assert source.read_bytes() == b"print('no newline at the end')"


@pytest.mark.parametrize("name", [".lock", "retry-state.json", "chain-context.json", "prompts"])
def test_a_file_of_the_ticket_symlinked_outside_is_refused(
    e2e: Harness, outside: Path, name: str
) -> None:
    e2e.dir.mkdir(parents=True)
    target = outside / "victim.txt" if name != "prompts" else outside
    (e2e.dir / name).symlink_to(target)
    before = snapshot(outside)
    refused(e2e, e2e.dir / name)
    assert snapshot(outside) == before


def test_the_ticket_directory_symlinked_outside_is_refused(e2e: Harness, outside: Path) -> None:
    (e2e.dir.parent).mkdir(parents=True)
    e2e.dir.symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    refused(e2e, e2e.dir)
    assert snapshot(outside) == before


def test_the_knowledge_directory_symlinked_outside_is_refused(e2e: Harness, outside: Path) -> None:
    link = e2e.project / ".tf" / "knowledge"
    link.symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    refused(e2e, link)
    assert snapshot(outside) == before


def test_a_ticket_file_symlinked_outside_is_refused(e2e: Harness, outside: Path) -> None:
    outside_ticket = outside / "pt-1.md"
    outside_ticket.write_bytes(e2e.ticket_file.read_bytes())
    e2e.ticket_file.unlink()
    e2e.ticket_file.symlink_to(outside_ticket)
    before = snapshot(outside)
    refused(e2e, e2e.ticket_file)
    assert snapshot(outside) == before
    assert not e2e.dir.exists()  # refused before anything was written


def test_a_link_deeper_in_the_ticket_directory_is_refused_at_the_write(
    e2e: Harness, outside: Path
) -> None:
    """A link below the ticket directory's own entries is found when a write reaches it: the
    run stops there (exit 2), resumable once the link is gone."""
    (e2e.dir / "prompts").mkdir(parents=True)
    link = e2e.dir / "prompts" / "attempt-1"
    link.symlink_to(outside, target_is_directory=True)
    before = snapshot(outside)
    result = e2e.run()
    assert result.returncode == 2, result.stderr
    assert str(link) in result.stderr
    assert snapshot(outside) == before
    link.unlink()
    assert e2e.run().returncode == 0


@pytest.mark.parametrize("name", ["logs", "progress.md", ".progress.md.lock"])
def test_the_loops_files_symlinked_outside_are_refused(
    project: Path, outside: Path, name: str
) -> None:
    (project / ".tickets").mkdir()
    (project / ".tickets" / "pt-1.md").write_text(
        "---\nid: pt-1\nstatus: open\ndeps: []\nlinks: []\ncreated: 2026-02-10T12:00:00Z\n"
        "type: task\npriority: 2\ntags: []\n---\n# One\n"
    )
    (project / ".tf" / "config" / "settings.json").write_text(
        json.dumps({"executor": {"kind": "scripted"}})
    )
    (project / ".tf" / "ralph").mkdir()
    link = project / ".tf" / "ralph" / name
    link.symlink_to(outside if name == "logs" else outside / "victim.txt")
    before = snapshot(outside)
    result = run_cli("ralph", cwd=project)
    assert result.returncode == 2, result.stderr
    assert str(link) in result.stderr
    assert snapshot(outside) == before


def test_a_link_that_stays_inside_the_project_is_followed(e2e: Harness) -> None:
    elsewhere = e2e.project / "state" / "knowledge"
    elsewhere.mkdir(parents=True)
    (e2e.project / ".tf" / "knowledge").symlink_to(elsewhere, target_is_directory=True)
    result = e2e.run()
    assert result.returncode == 0, result.stderr
    assert (elsewhere / "tickets" / "pt-1" / "retry-state.json").is_file()


def test_a_knowledge_directory_configured_outside_is_the_users_choice(
    e2e: Harness, outside: Path
) -> None:
    e2e.settings(knowledgeDir=str(outside / "knowledge"))
    result = e2e.run()
    assert result.returncode == 0, result.stderr
    assert (outside / "knowledge" / "tickets" / "pt-1" / "retry-state.json").is_file()
    assert not (e2e.project / ".tf" / "knowledge").exists()
    # and inside that directory the same rule holds
    os.rename(outside / "knowledge" / "tickets" / "pt-1", outside / "moved")
    (outside / "knowledge" / "tickets" / "pt-1").symlink_to(e2e.project)
    again = e2e.run("--retry-reset")
    assert again.returncode == 2, again.stderr
