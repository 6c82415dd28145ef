"""What may stand where a ticket's worktree goes (tf_fsm.workspace.leftover), on real git
repositories: a directory of nothing but tf_fsm's copies of the ticket's files (what an older
tf_fsm left where a worktree was removed by hand) is cleared and the worktree made; the same
copies beside anything else are refused, untouched."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.gitrepo import init_repo, isolate
from tests.workspace.test_worktree import assert_complete, settings, tree_of
from tf_fsm.errors import WorkspaceError
from tf_fsm.workspace.worktree import ensure


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch)
    return init_repo(tmp_path / "repo", {"src/app.py": "print('v1')\n"})


def copies_in(tree: Path) -> Path:
    copies = tree / ".tf" / "knowledge" / "tickets" / "pt-1"
    copies.mkdir(parents=True)
    (copies / "review-general.md").write_text("# Review\n")
    return copies


@pytest.mark.parametrize("registered", [False, True])
def test_a_directory_of_nothing_but_the_tickets_file_copies_is_cleared(
    repo: Path, registered: bool
) -> None:
    """Registered: git's registry still names the worktree removed by hand."""
    if registered:
        ensure(repo, settings(), "pt-1", "main")
        shutil.rmtree(tree_of(repo))
    (copies_in(tree_of(repo)) / "prompts").mkdir()
    _, notes = ensure(repo, settings(), "pt-1", "main")
    assert_complete(repo)
    assert any(n.startswith(f"removed {tree_of(repo)}: it was not a worktree") for n in notes)
    assert not (tree_of(repo) / ".tf" / "knowledge").exists()


@pytest.mark.parametrize("beside", [".tf/config.json", ".tf/knowledge/other.md", "code.py"])
def test_the_copies_beside_anything_else_are_refused_untouched(repo: Path, beside: str) -> None:
    copies = copies_in(tree_of(repo))
    (tree_of(repo) / beside).write_text("mine\n")
    with pytest.raises(WorkspaceError, match=r"holds files and is not a worktree"):
        ensure(repo, settings(), "pt-1", "main")
    assert (tree_of(repo) / beside).read_text() == "mine\n"
    assert (copies / "review-general.md").read_text() == "# Review\n"
