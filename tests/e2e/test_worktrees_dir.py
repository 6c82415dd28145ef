"""End-to-end: `ralph.parallelWorktreesDir` (docs/settings.md, docs/workspaces.md "Names"):
a value that is not a directory of the worktrees' own inside the project is refused when the
settings load, by every command, naming the key (exit 2); one holding tracked files is refused
when a workspace would be made, before git hides them. Real `tf-fsm` processes, real git."""

from __future__ import annotations

import pytest

from tests.e2e.workspace_project import Project
from tests.gitrepo import status
from tf_fsm.workspace.place import EXCLUDE_COMMENT

KEY = "ralph.parallelWorktreesDir"


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (".", "is the project root"),
        ("./", "is the project root"),
        ("/tmp/tf-worktrees", "is absolute"),
        ("../outside", "leads out of the project"),
        ("trees/../../outside", "leads out of the project"),
        (".git/wt", "is in .git, git's own directory"),
        (".tickets/wt", "is in .tickets, tk's own directory"),
    ],
)
def test_a_worktrees_directory_that_is_not_one_of_their_own_is_refused_at_load(
    proj: Project, value: str, why: str
) -> None:
    proj.create(["pt-1"], {"ralph": {"parallelWorktreesDir": value}})
    for command in (["settings"], ["run", "pt-1", "--plan"], ["ralph", "--dry-run"]):
        done = proj.cli(*command)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert f"{KEY}: {value!r} {why}" in done.stderr, (command, done.stderr)
    outside = proj.root.parent / "outside"
    assert not outside.exists()


def test_a_worktrees_directory_git_tracks_files_in_is_refused_and_never_hidden(
    proj: Project,
) -> None:
    proj.create(["pt-1"], {"ralph": {"parallelWorktreesDir": "src"}}, {"src/app.py": "X = 1\n"})
    exclude = proj.root / ".git" / "info" / "exclude"
    before = exclude.read_text()
    done = proj.cli("run", "pt-1", "--worktree")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{KEY} is 'src', which holds files git tracks (src/app.py)" in done.stderr
    assert exclude.read_text() == before
    assert proj.calls() == []  # no agent ran
    (proj.root / "src" / "new.py").write_text("")
    assert status(proj.root) == "?? src/new.py"


def test_exclude_lines_tf_fsm_added_for_an_earlier_directory_are_removed_saying_so_once(
    proj: Project,
) -> None:
    """What an older tf_fsm left after a run with the worktrees in `src`: new files there
    were hidden from git. The next worktree run takes the line out and says so."""
    proj.create(["pt-1", "pt-2"], {"workspace": {"mode": "worktree"}}, {"src/app.py": "X = 1\n"})
    exclude = proj.root / ".git" / "info" / "exclude"
    exclude.write_text(f"{exclude.read_text()}{EXCLUDE_COMMENT}\n/src/\n")
    (proj.root / "src" / "new.py").write_text("")
    assert status(proj.root) == ""  # hidden

    first = proj.cli("run", "pt-1")
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stderr.count("removed /src/ from") == 1, first.stderr
    assert "/src/" not in exclude.read_text()
    assert status(proj.root) == "?? src/new.py"
    second = proj.cli("run", "pt-2")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "removed /src/" not in second.stderr
