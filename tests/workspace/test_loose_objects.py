"""tf_fsm.workspace.loose_objects: a commit read from its loose object as git shows it, or
not read at all (real repositories, real git)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepo import commit_all, git, init_repo, isolate
from tf_fsm.workspace.loose_objects import loose_commit


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch)
    root = init_repo(tmp_path / "repo", {"a.txt": "a\n"})
    git(root, "checkout", "-q", "-b", "topic")
    (root / "b.txt").write_text("b\n")
    commit_all(root, "topic work")
    git(root, "checkout", "-q", "main")
    git(root, "merge", "-q", "--no-ff", "-m", "Merge topic\n\nTf-Merged-Tip: abc", "topic")
    return root


def test_a_merge_commit_reads_as_git_shows_it(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    made = loose_commit(repo / ".git", head)
    assert made is not None
    assert list(made.parents) == git(repo, "rev-parse", "HEAD^1", "HEAD^2").split()
    assert made.message == git(repo, "log", "-1", "--format=%B", "HEAD") + "\n"
    assert "Tf-Merged-Tip: abc" in made.message.splitlines()


def test_what_git_would_show_otherwise_is_not_read(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    first = git(repo, "rev-parse", "HEAD^1")
    git(repo, "replace", head, first)  # git now shows another commit for HEAD
    assert loose_commit(repo / ".git", head) is None
    git(repo, "replace", "-d", head)
    assert loose_commit(repo / ".git", head) is not None
    git(repo, "gc", "-q", "--prune=now")  # packed: only git reads it
    assert loose_commit(repo / ".git", head) is None
    assert loose_commit(repo / ".git", "0" * 40) is None


def test_a_damaged_object_is_left_to_git(repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    obj = repo / ".git" / "objects" / head[:2] / head[2:]
    obj.chmod(0o644)
    obj.write_bytes(b"not zlib")
    assert loose_commit(repo / ".git", head) is None
