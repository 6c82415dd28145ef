"""Where the tickets' worktrees go (tf_fsm.workspace.place) on real git repositories: a
directory holding files git tracks is refused before anything is made, and the lines tf_fsm
added to info/exclude for an earlier directory are taken out (the user's lines stay)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepo import branches, init_repo, isolate, status
from tf_fsm.errors import WorkspaceError
from tf_fsm.settings.load import settings_from_dict
from tf_fsm.workspace.place import EXCLUDE_COMMENT
from tf_fsm.workspace.worktree import ensure


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch)
    return init_repo(tmp_path / "repo", {"src/app.py": "print('v1')\n", "src/b.py": ""})


def exclude_of(root: Path) -> Path:
    return root / ".git" / "info" / "exclude"


def test_a_worktrees_directory_holding_tracked_files_is_refused_before_anything_is_made(
    repo: Path,
) -> None:
    before = exclude_of(repo).read_text()
    loaded = settings_from_dict({"ralph": {"parallelWorktreesDir": "./src"}})
    with pytest.raises(WorkspaceError) as caught:
        ensure(repo, loaded, "pt-1", "main")
    assert "ralph.parallelWorktreesDir is 'src', which holds files git tracks" in str(caught.value)
    assert "(src/app.py, src/b.py)" in str(caught.value)
    assert exclude_of(repo).read_text() == before  # nothing hides src/ from git
    assert branches(repo, "tf/*") == []
    assert not (repo / "src" / "pt-1").exists()


def test_exclude_lines_added_for_an_earlier_directory_are_removed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    # no .gitignore: nothing of .tf/ is ignored
    root = init_repo(tmp_path / "bare-ignores", {"app.py": "x = 1\n"}, ignores=False)
    mine = "# mine\n*.log\n"
    # what tf_fsm wrote while ralph.parallelWorktreesDir was "src", after the user's lines
    exclude_of(root).write_text(f"{mine}{EXCLUDE_COMMENT}\n/src/\n")
    (root / "src").mkdir()
    (root / "src" / "new.py").write_text("")
    assert status(root) == ""  # hidden from git

    _, notes = ensure(root, settings_from_dict({}), "pt-1", "main")
    text = exclude_of(root).read_text()
    assert text == f"{mine}{EXCLUDE_COMMENT}\n/.tf/ralph/worktrees/\n"
    said = [n for n in notes if n.startswith("removed /src/ from")]
    assert said == [
        f"removed /src/ from {exclude_of(root)}: tf-fsm had added it for an earlier "
        "ralph.parallelWorktreesDir, and it would keep new files there hidden from git"
    ]
    assert status(root) == "?? src/new.py"

    _, again = ensure(root, settings_from_dict({}), "pt-2", "main")
    assert not [n for n in again if "info/exclude" in n]  # said once
    assert exclude_of(root).read_text() == text
