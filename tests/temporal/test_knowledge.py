"""A ticket's artifacts as a knowledge commit and back, with real git: no worktree, no index
of the user's touched; bytes kept as they are; the journal, its views and the lock never in
it; no write led out of the ticket's directory by a symlink."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepo import git, init_repo, isolate
from tf_fsm.errors import InvalidArtifactNameError
from tf_fsm.temporal.knowledge import artifact_names, commit_knowledge, restore_knowledge
from tf_fsm.workspace.git import Git

BINARY = bytes(range(256)) * 3


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch)
    return init_repo(tmp_path / "repo", {"a.txt": "a\n"})


def ticket_dir(repo: Path) -> Path:
    directory = repo / ".tf/knowledge/tickets/pt-1"
    (directory / "prompts/attempt-1").mkdir(parents=True)
    (directory / "review.md").write_text("review\n")
    (directory / "prompts/attempt-1/implement-worker.md").write_text("prompt\n")
    (directory / "blob.bin").write_bytes(BINARY)
    for own in ("events.jsonl", "retry-state.json", "chain-context.json", ".lock"):
        (directory / own).write_text("{}\n")
    (directory / ".review.md.abc.tmp").write_text("torn")
    return directory


def test_the_artifacts_round_trip_through_a_commit(repo: Path, tmp_path: Path) -> None:
    directory = ticket_dir(repo)
    index_before = (repo / ".git/index").read_bytes()
    sha = commit_knowledge(Git(repo), directory, None, "tf-fsm: pt-1 knowledge")

    listed = git(repo, "ls-tree", "-r", "--name-only", sha).splitlines()
    assert listed == ["blob.bin", "prompts/attempt-1/implement-worker.md", "review.md"]
    assert (repo / ".git/index").read_bytes() == index_before  # the user's index untouched
    assert git(repo, "status", "--porcelain") == ""
    # nothing changed: the same commit; a change: a child of it
    assert commit_knowledge(Git(repo), directory, sha, "again") == sha
    (directory / "review.md").write_text("review 2\n")
    child = commit_knowledge(Git(repo), directory, sha, "after fix")
    assert git(repo, "rev-parse", f"{child}^") == sha

    other = tmp_path / "other"
    (other / "stale/dir").mkdir(parents=True)
    (other / "stale/dir/old.md").write_text("a refused try's\n")
    (other / ".lock").write_text("held")
    (other / "events.jsonl").write_text("journal\n")
    restore_knowledge(Git(repo), other, sha, tmp_path)

    assert (other / "blob.bin").read_bytes() == BINARY
    assert (other / "review.md").read_text() == "review\n"
    assert not (other / "stale").exists()  # removed, and its emptied directories
    assert (other / ".lock").read_text() == "held"  # the lock and the journal left alone
    assert (other / "events.jsonl").read_text() == "journal\n"
    assert artifact_names(other) == listed
    restore_knowledge(Git(repo), other, None, tmp_path)
    assert artifact_names(other) == [] and (other / ".lock").exists()


def test_no_write_is_led_out_of_the_ticket_directory(repo: Path, tmp_path: Path) -> None:
    directory = ticket_dir(repo)
    sha = commit_knowledge(Git(repo), directory, None, "k")
    outside = tmp_path / "outside"
    outside.mkdir()
    target = tmp_path / "target"
    target.mkdir()
    (target / "prompts").symlink_to(outside)

    with pytest.raises(InvalidArtifactNameError):
        restore_knowledge(Git(repo), target, sha, tmp_path)
    assert list(outside.iterdir()) == []
