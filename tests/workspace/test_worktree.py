"""A ticket's branch and worktree (tf_fsm.workspace.worktree) on real git repositories: made
from the base tip, found again, every half-made state a killed git leaves repaired, a
directory of somebody's refused untouched, agent files copied and never committed, removed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from tests.gitrepo import branches, commit_all, git, init_repo, isolate, status
from tf_fsm.errors import UnsafePathError, WorkspaceError
from tf_fsm.settings.load import LoadedSettings, settings_from_dict
from tf_fsm.views.workspaces import disk_usage
from tf_fsm.workspace.agent_files import RECORD
from tf_fsm.workspace.checkpoint import checkpoint
from tf_fsm.workspace.place import EXCLUDE_COMMENT
from tf_fsm.workspace.worktree import (
    base_branch,
    ensure,
    find,
    remove,
)


def settings(**workspace: Any) -> LoadedSettings:
    return settings_from_dict({"workspace": workspace} if workspace else {})


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    isolate(monkeypatch)
    return init_repo(tmp_path / "repo", {"src/app.py": "print('v1')\n"})


def tree_of(root: Path, ticket: str = "pt-1") -> Path:
    return root / ".tf" / "ralph" / "worktrees" / ticket


def registered(root: Path) -> list[str]:
    out = git(root, "worktree", "list", "--porcelain")
    return [ln.split(" ", 1)[1] for ln in out.splitlines() if ln.startswith("worktree ")]


def admin_of(root: Path, ticket: str = "pt-1") -> Path:
    text = (tree_of(root, ticket) / ".git").read_text()
    return Path(text.removeprefix("gitdir: ").strip())


def assert_complete(root: Path, ticket: str = "pt-1") -> None:
    """The ticket's worktree is whole: registered once, on its branch, every file checked out,
    nothing locked; the agent files copied in are its only untracked files."""
    tree = tree_of(root, ticket)
    assert registered(root).count(str(tree.resolve())) == 1
    assert git(tree, "symbolic-ref", "HEAD") == f"refs/heads/tf/{ticket}"
    copies = ("?? .claude/", "?? AGENTS.md")
    assert [ln for ln in status(tree).splitlines() if not ln.startswith(copies)] == []
    assert not (admin_of(root, ticket) / "locked").exists()
    assert git(tree, "rev-parse", "HEAD") == git(root, "rev-parse", f"tf/{ticket}")


# -- made from the base, then left alone -----------------------------------------------------


def test_ensure_makes_the_branch_and_worktree_from_the_base_tip(repo: Path) -> None:
    tip = commit_all_with(repo, "src/app.py", "print('v2')\n")
    ws, notes = ensure(repo, settings(), "pt-1", "main")
    assert (ws.branch, ws.base_branch, ws.tree) == ("tf/pt-1", "main", tree_of(repo))
    assert git(repo, "rev-parse", "tf/pt-1") == tip
    assert (ws.tree / "src" / "app.py").read_text() == "print('v2')\n"
    assert_complete(repo)
    assert any("made the branch tf/pt-1" in n for n in notes)
    assert any("made the worktree" in n for n in notes)
    assert status(repo) == ""  # the worktree does not show at the root


def test_ensure_twice_changes_nothing_and_never_resets_the_branch(repo: Path) -> None:
    ws, _ = ensure(repo, settings(), "pt-1", "main")
    (ws.tree / "work.txt").write_text("agent's work\n")
    ticket_tip = commit_all(ws.tree, "ticket work")
    commit_all_with(repo, "src/app.py", "print('main moved on')\n")
    again, notes = ensure(repo, settings(), "pt-1", "main")
    assert again == ws
    assert notes == []
    assert git(repo, "rev-parse", "tf/pt-1") == ticket_tip
    assert (ws.tree / "work.txt").read_text() == "agent's work\n"


def test_an_existing_branch_gets_a_worktree_without_being_reset(repo: Path) -> None:
    git(repo, "branch", "tf/pt-1", "main")
    git(repo, "worktree", "add", "-q", str(repo.parent / "elsewhere"), "tf/pt-1")
    ticket_tip = commit_all_with(repo.parent / "elsewhere", "feature.txt", "feature\n")
    git(repo, "worktree", "remove", str(repo.parent / "elsewhere"))
    commit_all_with(repo, "src/app.py", "print('main moved on')\n")
    ws, notes = ensure(repo, settings(), "pt-1", "main")
    assert git(repo, "rev-parse", "tf/pt-1") == ticket_tip
    assert (ws.tree / "feature.txt").read_text() == "feature\n"
    assert not any("made the branch" in n for n in notes)
    assert_complete(repo)


def test_a_worktree_whose_directory_is_gone_is_made_again(repo: Path) -> None:
    ws, _ = ensure(repo, settings(), "pt-1", "main")
    ticket_tip = commit_all_with(ws.tree, "feature.txt", "feature\n")
    import shutil

    shutil.rmtree(ws.tree)
    again, notes = ensure(repo, settings(), "pt-1", "main")
    assert again.tree == ws.tree
    assert (ws.tree / "feature.txt").read_text() == "feature\n"
    assert git(repo, "rev-parse", "tf/pt-1") == ticket_tip
    assert any("made the worktree" in n for n in notes)
    assert_complete(repo)


def test_the_base_must_exist(repo: Path) -> None:
    with pytest.raises(WorkspaceError, match="'nope' does not exist"):
        ensure(repo, settings(), "pt-1", "nope")
    assert branches(repo, "tf/*") == []


@pytest.mark.parametrize("where", [".", ".."])
def test_worktrees_at_or_above_the_root_are_refused(repo: Path, where: str) -> None:
    """Spelled so, at load time (tests/e2e/test_worktrees_dir.py); here through a symlink."""
    (repo / "trees").symlink_to(repo / where)
    loaded = settings_from_dict({"ralph": {"parallelWorktreesDir": "trees"}})
    with pytest.raises((WorkspaceError, UnsafePathError), match="trees"):
        ensure(repo, loaded, "pt-1", "main")
    assert registered(repo) == [str(repo.resolve())]


def test_worktrees_through_a_symlink_out_of_the_project_are_refused(
    repo: Path, tmp_path: Path
) -> None:
    (tmp_path / "elsewhere").mkdir()
    (repo / ".tf").mkdir()
    (repo / ".tf" / "ralph").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(UnsafePathError):
        ensure(repo, settings(), "pt-1", "main")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_a_directory_that_is_not_a_repository_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(WorkspaceError, match="not in a git repository"):
        ensure(plain, settings(), "pt-1", "main")


# -- the worktrees stay out of git status at the root ----------------------------------------


def test_the_worktrees_directory_is_excluded_once_when_the_project_does_not_ignore_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    # no .gitignore: nothing of .tf/ is ignored
    root = init_repo(tmp_path / "bare-ignores", {"app.py": "x = 1\n"}, ignores=False)
    _, notes = ensure(root, settings(), "pt-1", "main")
    ensure(root, settings(), "pt-2", "main")
    exclude = (root / ".git" / "info" / "exclude").read_text()
    assert exclude.count(EXCLUDE_COMMENT) == 1
    assert exclude.count("/.tf/ralph/worktrees/\n") == 1
    assert any("info/exclude" in n for n in notes)
    assert status(root) == ""
    assert git(root, "config", "--list", "--local").count("tf") == 0  # no config written


# -- what a killed `git worktree add` leaves, made by hand ------------------------------------


def test_an_empty_directory_at_the_path_is_used(repo: Path) -> None:
    tree_of(repo).mkdir(parents=True)
    ensure(repo, settings(), "pt-1", "main")
    assert_complete(repo)


@pytest.mark.parametrize(
    "gitfile", ["", "gitdir: /nowhere/at/all\n", "gitdir: ", "gitdir: {common}/worktrees/gone\n"]
)
def test_a_directory_holding_only_a_dangling_git_file_is_repaired(repo: Path, gitfile: str) -> None:
    tree_of(repo).mkdir(parents=True)
    (tree_of(repo) / ".git").write_text(gitfile.format(common=repo / ".git"))
    _, notes = ensure(repo, settings(), "pt-1", "main")
    assert_complete(repo)
    assert any("never finished" in n for n in notes)


def test_a_registered_worktree_locked_initializing_is_redone(repo: Path) -> None:
    ws, _ = ensure(repo, settings(), "pt-1", "main")
    # as `git worktree add` leaves it when killed during its checkout
    (admin_of(repo) / "locked").write_text("initializing\n")
    (ws.tree / "src" / "app.py").unlink()
    (admin_of(repo) / "index.lock").write_text("")
    _, notes = ensure(repo, settings(), "pt-1", "main")
    assert_complete(repo)
    assert (ws.tree / "src" / "app.py").read_text() == "print('v1')\n"
    assert any("half made" in n for n in notes)


def test_git_records_never_given_a_path_are_removed(repo: Path) -> None:
    for name, locked in (("pt-1", "initializing\n"), ("pt-12", "")):
        stray = repo / ".git" / "worktrees" / name
        stray.mkdir(parents=True)
        (stray / "locked").write_text(locked)
    other = repo / ".git" / "worktrees" / "pt-9"  # another ticket's: left alone
    other.mkdir()
    (other / "locked").write_text("initializing\n")
    ensure(repo, settings(), "pt-1", "main")
    assert_complete(repo)
    assert sorted(p.name for p in (repo / ".git" / "worktrees").iterdir()) == ["pt-1", "pt-9"]
    assert (repo / ".git" / "worktrees" / "pt-1" / "gitdir").exists()


def test_a_stale_lock_on_the_branch_to_be_made_is_cleared(repo: Path) -> None:
    lock = repo / ".git" / "refs" / "heads" / "tf" / "pt-1.lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")  # `git update-ref` killed while making the branch
    _, notes = ensure(repo, settings(), "pt-1", "main")
    assert_complete(repo)
    assert f"removed {lock}, left by a git process that is no longer running" in notes


# -- a directory of somebody's is never touched -------------------------------------------


def test_a_foreign_directory_at_the_path_is_refused_and_left_untouched(repo: Path) -> None:
    tree = tree_of(repo)
    tree.mkdir(parents=True)
    (tree / "notes.txt").write_text("mine\n")
    with pytest.raises(WorkspaceError, match=r"holds files and is not a worktree") as caught:
        ensure(repo, settings(), "pt-1", "main")
    assert str(tree) in str(caught.value)
    assert [p.name for p in tree.iterdir()] == ["notes.txt"]
    assert (tree / "notes.txt").read_text() == "mine\n"


def test_another_repository_at_the_path_is_refused_and_left_untouched(
    repo: Path, tmp_path: Path
) -> None:
    tree = tree_of(repo)
    init_repo(tree, {"theirs.txt": "theirs\n"})
    before = git(tree, "rev-parse", "HEAD")
    with pytest.raises(WorkspaceError, match="not a worktree of this repository"):
        ensure(repo, settings(), "pt-1", "main")
    assert git(tree, "rev-parse", "HEAD") == before
    assert (tree / "theirs.txt").read_text() == "theirs\n"


def test_a_lone_git_file_of_a_live_foreign_repository_is_refused(
    repo: Path, tmp_path: Path
) -> None:
    other = init_repo(tmp_path / "other")
    git(other, "worktree", "add", "-q", str(tmp_path / "other-wt"))
    tree = tree_of(repo)
    tree.mkdir(parents=True)
    pointer = (tmp_path / "other-wt" / ".git").read_text()
    (tree / ".git").write_text(pointer)
    with pytest.raises(WorkspaceError):
        ensure(repo, settings(), "pt-1", "main")
    assert (tree / ".git").read_text() == pointer


# -- base_branch and find ---------------------------------------------------------------


def test_base_branch_is_the_configured_one_or_the_root_checkout(repo: Path) -> None:
    assert base_branch(repo, settings()) == "main"
    git(repo, "branch", "release")
    assert base_branch(repo, settings(baseBranch="release")) == "release"
    with pytest.raises(WorkspaceError, match=r"workspace.baseBranch is 'gone'.*'gone'"):
        base_branch(repo, settings(baseBranch="gone"))
    git(repo, "checkout", "-q", "--detach")
    with pytest.raises(WorkspaceError, match=r"check out .* or set workspace\.baseBranch"):
        base_branch(repo, settings())


def test_find_reports_the_recorded_base_and_falls_back_when_the_record_is_lost(
    repo: Path,
) -> None:
    assert find(repo, settings(), "pt-1") is None
    git(repo, "branch", "release")
    ws, _ = ensure(repo, settings(), "pt-1", "release")
    assert find(repo, settings(), "pt-1") == ws
    record = admin_of(repo) / RECORD
    assert json.loads(record.read_text())["base"] == "release"
    record.write_text("{not json")
    assert find(repo, settings(), "pt-1").base_branch == "main"  # type: ignore[union-attr]
    import shutil

    shutil.rmtree(ws.tree)  # the directory gone: still found by its branch
    found = find(repo, settings(), "pt-1")
    assert found is not None and found.tree == ws.tree


# -- agent files -----------------------------------------------------------------------


def test_agent_files_missing_from_the_branch_are_copied_and_never_committed(
    repo: Path, tmp_path: Path
) -> None:
    (repo / "CLAUDE.md").write_text("from the branch\n")
    commit_all(repo, "a committed CLAUDE.md")
    (repo / "CLAUDE.md").write_text("edited at the root, uncommitted\n")
    (repo / "AGENTS.md").write_text("agents\n")
    hooks = repo / ".claude" / "hooks"
    hooks.mkdir(parents=True)
    (hooks / "check.sh").write_text("#!/bin/sh\n")
    (hooks / "check.sh").chmod(0o750)
    outside = tmp_path / "outside.json"
    outside.write_text("{}")
    (repo / ".claude" / "settings.json").symlink_to(outside)
    ws, notes = ensure(repo, settings(), "pt-1", "main")
    assert ws.copied == (".claude", "AGENTS.md")
    assert (ws.tree / "AGENTS.md").read_text() == "agents\n"
    assert (ws.tree / "CLAUDE.md").read_text() == "from the branch\n"
    assert (ws.tree / ".claude" / "hooks" / "check.sh").stat().st_mode & 0o777 == 0o750
    link = ws.tree / ".claude" / "settings.json"
    assert link.is_symlink() and os.readlink(link) == str(outside)
    assert sorted(n for n in notes if n.startswith("copied")) == [
        f"copied .claude from the project root into {ws.tree}",
        f"copied AGENTS.md from the project root into {ws.tree}",
    ]
    record = json.loads((admin_of(repo) / RECORD).read_text())
    assert record == {"base": "main", "copied": [".claude", "AGENTS.md"]}
    (ws.tree / "feature.txt").write_text("feature\n")
    sha = checkpoint(ws, "work", {})
    committed = git(ws.tree, "show", "--name-only", "--format=", str(sha)).splitlines()
    assert committed == ["feature.txt"]


def test_agent_files_gone_from_the_worktree_are_copied_again(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("agents\n")
    ws, _ = ensure(repo, settings(), "pt-1", "main")
    (ws.tree / "AGENTS.md").unlink()
    leftovers = [".AGENTS.md.tf-fsm-copy", "..AGENTS.md.tf-fsm-copy.4242.7.tmp"]
    for name in leftovers:  # a copy cut off, and its atomic write's temporary file
        (ws.tree / name).write_text("half a copy")
    _, notes = ensure(repo, settings(), "pt-1", "main")
    assert (ws.tree / "AGENTS.md").read_text() == "agents\n"
    assert not [name for name in leftovers if (ws.tree / name).exists()]
    assert notes == [f"copied AGENTS.md from the project root into {ws.tree}"]


def test_a_lost_record_still_keeps_copied_files_out_of_checkpoints(repo: Path) -> None:
    (repo / "AGENTS.md").write_text("agents\n")
    ensure(repo, settings(), "pt-1", "main")
    (admin_of(repo) / RECORD).unlink()
    again, _ = ensure(repo, settings(), "pt-1", "main")
    assert again.copied == ("AGENTS.md",)


@pytest.mark.parametrize("entry", ["../outside", "/etc", ""])
def test_agent_files_outside_the_project_are_refused(repo: Path, entry: str) -> None:
    from tf_fsm.errors import SettingsError

    with pytest.raises(SettingsError, match=r"workspace\.agentFiles"):
        settings(agentFiles=[entry])


# -- remove -------------------------------------------------------------------------------


def test_remove_refuses_an_unmerged_branch_unless_forced(repo: Path) -> None:
    ws, _ = ensure(repo, settings(), "pt-1", "main")
    tip = commit_all_with(ws.tree, "feature.txt", "feature\n")
    (ws.tree / "draft.txt").write_text("not committed\n")
    with pytest.raises(WorkspaceError, match=r"tf/pt-1 .*prune --force") as caught:
        remove(ws, delete_branch=True)
    assert "tf-fsm workspaces prune --force" in str(caught.value)
    assert ws.tree.is_dir() and branches(repo, "tf/*") == ["tf/pt-1"]
    notes = remove(ws, delete_branch=True, force=True)
    assert not ws.tree.exists() and branches(repo, "tf/*") == []
    assert git(repo, "rev-parse", "refs/tf/pt-1/removed-branch") == tip
    uncommitted = git(repo, "show", "refs/tf/pt-1/removed-uncommitted:draft.txt")
    assert uncommitted == "not committed"
    assert registered(repo) == [str(repo.resolve())]
    assert any("removed-branch" in n for n in notes)


def test_remove_deletes_a_merged_branch_and_is_idempotent(repo: Path) -> None:
    ws, _ = ensure(repo, settings(), "pt-1", "main")
    commit_all_with(ws.tree, "feature.txt", "feature\n")
    git(repo, "merge", "-q", "--ff-only", "tf/pt-1")
    remove(ws, delete_branch=True)
    assert branches(repo, "tf/*") == [] and not ws.tree.exists()
    assert git(repo, "for-each-ref", "refs/tf/") == ""  # nothing needed keeping
    assert remove(ws, delete_branch=True) == []


def test_remove_deletes_a_squash_merged_branch_named_by_its_trailer(repo: Path) -> None:
    ws, _ = ensure(repo, settings(), "pt-1", "main")
    tip = commit_all_with(ws.tree, "feature.txt", "feature\n")
    git(repo, "merge", "-q", "--squash", "tf/pt-1")
    git(repo, "commit", "-q", "-m", f"pt-1\n\nTf-Ticket: pt-1\nTf-Merged-Tip: {tip}")
    remove(ws, delete_branch=True)
    assert branches(repo, "tf/*") == []
    assert git(repo, "for-each-ref", "refs/tf/") == ""


def test_remove_keeps_the_branch_when_asked(repo: Path) -> None:
    ws, _ = ensure(repo, settings(), "pt-1", "main")
    remove(ws, delete_branch=False)
    assert not ws.tree.exists() and branches(repo, "tf/*") == ["tf/pt-1"]
    ensure(repo, settings(), "pt-1", "main")
    assert_complete(repo)


def test_remove_finishes_a_half_removed_worktree(repo: Path) -> None:
    ws, _ = ensure(repo, settings(), "pt-1", "main")
    (ws.tree / ".git").unlink()  # `git worktree remove` killed after deleting it
    remove(ws, delete_branch=False)
    assert not ws.tree.exists()
    assert registered(repo) == [str(repo.resolve())]


def test_remove_leaves_a_foreign_directory_alone(repo: Path) -> None:
    ws, _ = ensure(repo, settings(), "pt-1", "main")
    remove(ws, delete_branch=False)
    ws.tree.mkdir(parents=True)
    (ws.tree / "notes.txt").write_text("mine\n")
    notes = remove(ws, delete_branch=False)
    assert (ws.tree / "notes.txt").read_text() == "mine\n"
    assert any("left" in n for n in notes)


# -- disk usage --------------------------------------------------------------------------


def test_disk_usage_counts_blocks_once_and_follows_no_link(tmp_path: Path) -> None:
    top = tmp_path / "top"
    top.mkdir()
    (top / "data").write_bytes(os.urandom(64 * 1024))
    os.link(top / "data", top / "same-data")
    big = tmp_path / "big"
    big.write_bytes(os.urandom(1024 * 1024))
    (top / "link").symlink_to(big)
    used = disk_usage(top)
    assert 64 * 1024 <= used < 1024 * 1024
    assert disk_usage(tmp_path / "missing") == 0


def commit_all_with(cwd: Path, name: str, text: str) -> str:
    path = cwd / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return commit_all(cwd, f"edit {name}")
