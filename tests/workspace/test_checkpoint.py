"""The commits and refs of a ticket's branch (tf_fsm.workspace.checkpoint) on real git
repositories: checkpoints of every kind of change and no bookkeeping, a merge completed,
stale locks cleared, and work set aside or rolled back always kept reachable under a ref."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tests.gitrepo import git, init_repo, isolate, status
from tf_fsm.errors import GitError, WorkspaceError
from tf_fsm.settings.load import settings_from_dict
from tf_fsm.workspace.checkpoint import (
    checkpoint,
    head,
    keep_uncommitted,
    reset_to,
    save_ref,
    set_aside,
)
from tf_fsm.workspace.model import Workspace
from tf_fsm.workspace.worktree import ensure


@pytest.fixture
def ws(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Workspace:
    """pt-1's workspace in a repository whose root has an AGENTS.md the branch lacks."""
    isolate(monkeypatch)
    root = init_repo(
        tmp_path / "repo",
        {
            "src/app.py": "v1\n",
            "src/old.py": "old\n",
            "docs/guide.md": "guide\n",
            ".tickets/pt-1.md": "---\nid: pt-1\n---\n",
            "build/.gitignore": "*.o\n",
        },
    )
    (root / "AGENTS.md").write_text("agents\n")
    made, _ = ensure(root, settings_from_dict({}), "pt-1", "main")
    assert made.copied == ("AGENTS.md",)
    return made


def write(ws: Workspace, name: str, text: str) -> Path:
    path = ws.tree / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def changed(ws: Workspace, sha: str) -> list[str]:
    """`git show --name-status -M` of `sha`: one `STATUS<TAB>path...` line per file."""
    out = git(ws.tree, "show", "--name-status", "-M", "-z", "--format=", sha)
    parts = [p for p in out.split("\0") if p]
    lines, i = [], 0
    while i < len(parts):
        width = 3 if parts[i].startswith("R") else 2
        lines.append("\t".join([parts[i][:1], *parts[i + 1 : i + width]]))
        i += width
    return sorted(lines)


def commit_on_other(ws: Workspace, name: str, text: str) -> str:
    """A commit on a branch `other` made at the root (its untracked AGENTS.md left out)."""
    git(ws.root, "checkout", "-q", "-b", "other", "main")
    (ws.root / name).write_text(text)
    git(ws.root, "add", name)
    git(ws.root, "commit", "-q", "-m", "other side")
    return git(ws.root, "rev-parse", "HEAD")


# -- checkpoint -----------------------------------------------------------------------------


def test_a_checkpoint_commits_every_kind_of_change_with_its_trailers(ws: Workspace) -> None:
    before = head(ws)
    write(ws, "src/app.py", "v2\n")
    (ws.tree / "docs" / "guide.md").unlink()
    (ws.tree / "src" / "old.py").rename(ws.tree / "src" / "new.py")
    odd = ["with space.txt", "new\nline.txt", "ünïcödé/日本.txt", "-dash.txt"]
    for name in odd:
        write(ws, name, f"{name}\n")
    sha = checkpoint(ws, "tf-fsm: pt-1 attempt 1 implement", {"Tf-Phase": "implement"})
    assert sha == head(ws) == git(ws.root, "rev-parse", "tf/pt-1")
    assert git(ws.tree, "rev-parse", f"{sha}^") == before
    assert changed(ws, str(sha)) == sorted(
        ["M\tsrc/app.py", "D\tdocs/guide.md", "R\tsrc/old.py\tsrc/new.py"]
        + [f"A\t{name}" for name in odd]
    )
    message = git(ws.tree, "log", "-1", "--format=%B", str(sha))
    assert message.startswith("tf-fsm: pt-1 attempt 1 implement\n\n")
    trailers = git(ws.tree, "log", "-1", "--format=%(trailers:only,unfold)", str(sha))
    assert trailers.splitlines() == ["Tf-Ticket: pt-1", "Tf-Phase: implement"]
    assert status(ws.tree) == "?? AGENTS.md"


def test_bookkeeping_and_copied_files_are_never_committed(ws: Workspace) -> None:
    write(ws, ".tf/knowledge/tickets/pt-1/implementation.md", "notes\n")
    write(ws, ".tf/config/settings.json", "{}\n")
    write(ws, ".tickets/pt-1.md", "---\nid: pt-1\nstatus: closed\n---\n")
    write(ws, ".tickets/pt-2.md", "new ticket\n")
    write(ws, "AGENTS.md", "edited copy\n")
    git(ws.tree, "add", "-f", ".tickets/pt-2.md", "AGENTS.md")  # an agent staged them
    write(ws, "src/app.py", "v2\n")
    sha = checkpoint(ws, "implement", {})
    assert changed(ws, str(sha)) == ["M\tsrc/app.py"]
    assert (ws.tree / ".tickets" / "pt-2.md").read_text() == "new ticket\n"  # kept, unstaged
    assert git(ws.tree, "diff", "--cached", "--name-only") == ""


def test_nothing_changed_is_no_commit_in_two_git_processes(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(ws, ".tf/knowledge/tickets/pt-1/review.md", "only bookkeeping\n")
    write(ws, "build/out.o", "ignored\n")
    shim, log = tmp_path / "shim", tmp_path / "git.log"
    shim.mkdir()
    (shim / "git").write_text(f'#!/bin/sh\necho "$1" >> {log}\nexec {shutil.which("git")} "$@"\n')
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
    tip = head(ws)  # read from the branch's loose ref: no git process
    log.unlink(missing_ok=True)
    assert checkpoint(ws, "nothing", {}) is None
    # the worktree's git directories are known since it was made (worktree.ensure)
    assert log.read_text().split() == ["add", "diff"]
    assert head(ws) == tip


def test_a_merge_in_progress_is_completed_by_the_checkpoint(ws: Workspace) -> None:
    write(ws, "src/app.py", "ticket\n")
    ours = checkpoint(ws, "implement", {})
    theirs = commit_on_other(ws, "src/app.py", "other\n")
    git(ws.tree, "merge", "--no-edit", "other", check=False)  # conflicts in src/app.py
    assert (ws.tree / ".git").is_file() and "<<<<<<<" in (ws.tree / "src/app.py").read_text()
    write(ws, "src/app.py", "resolved by the agent\n")
    sha = checkpoint(ws, "merge", {})
    parents = git(ws.tree, "log", "-1", "--format=%P", str(sha)).split()
    assert parents == [ours, theirs]
    assert git(ws.tree, "show", f"{sha}:src/app.py") == "resolved by the agent"
    assert git(ws.tree, "rev-parse", "-q", "--verify", "MERGE_HEAD", check=False) == ""


def test_a_clean_merge_with_nothing_changed_still_commits(ws: Workspace) -> None:
    commit_on_other(ws, "other.txt", "other\n")
    tip = head(ws)
    git(ws.tree, "merge", "--no-commit", "--no-ff", "other")
    sha = checkpoint(ws, "merge", {})
    assert sha is not None and len(git(ws.tree, "log", "-1", "--format=%P", sha).split()) == 2
    assert git(ws.tree, "rev-parse", f"{sha}^1") == tip


def test_stale_locks_are_cleared_and_hooks_do_not_run(ws: Workspace) -> None:
    own = Path(git(ws.tree, "rev-parse", "--absolute-git-dir"))
    (own / "index.lock").write_text("")  # git killed in `add`
    branch_lock = ws.root / ".git" / "refs" / "heads" / "tf" / "pt-1.lock"
    branch_lock.write_text("")  # git killed in `commit`, moving the branch
    hooks = ws.root / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-commit").write_text("#!/bin/sh\nexit 1\n")
    (hooks / "pre-commit").chmod(0o755)
    write(ws, "src/app.py", "v2\n")
    sha = checkpoint(ws, "implement", {})
    assert sha is not None and not (own / "index.lock").exists()
    assert not branch_lock.exists()
    assert git(ws.root, "rev-parse", "tf/pt-1") == sha


def test_a_trailer_key_git_cannot_read_is_refused(ws: Workspace) -> None:
    write(ws, "src/app.py", "v2\n")
    with pytest.raises(ValueError, match="trailer key"):
        checkpoint(ws, "implement", {"Bad Key": "x"})


# -- save_ref ---------------------------------------------------------------------------


def test_save_ref_never_overwrites_a_ref_holding_another_commit(ws: Workspace) -> None:
    first = head(ws)
    write(ws, "src/app.py", "v2\n")
    second = str(checkpoint(ws, "implement", {}))
    assert save_ref(ws, "attempt-1", first) == "refs/tf/pt-1/attempt-1"
    assert save_ref(ws, "attempt-1", first) == "refs/tf/pt-1/attempt-1"
    assert save_ref(ws, "attempt-1", second) == "refs/tf/pt-1/attempt-1-2"
    assert save_ref(ws, "attempt-1", second) == "refs/tf/pt-1/attempt-1-2"
    assert git(ws.root, "rev-parse", "refs/tf/pt-1/attempt-1") == first
    with pytest.raises(GitError, match="update-ref"):
        save_ref(ws, "bad..name", first)


# -- set_aside and reset_to ---------------------------------------------------------------


def dirty(ws: Workspace) -> None:
    """A phase cut off half-way: edits, a deletion, a new file, and files to be left alone."""
    write(ws, "src/app.py", "half-made\n")
    (ws.tree / "docs" / "guide.md").unlink()
    write(ws, "src/draft.py", "draft\n")
    git(ws.tree, "add", "src/draft.py")
    write(ws, "notes/new.md", "new\n")
    write(ws, "build/out.o", "ignored\n")
    write(ws, ".tf/knowledge/tickets/pt-1/implementation.md", "bookkeeping\n")
    write(ws, "AGENTS.md", "edited copy\n")


def assert_left_alone(ws: Workspace) -> None:
    assert (ws.tree / "build" / "out.o").read_text() == "ignored\n"
    assert (ws.tree / ".tf/knowledge/tickets/pt-1/implementation.md").exists()
    assert (ws.tree / "AGENTS.md").read_text() == "edited copy\n"
    assert status(ws.tree) == "?? AGENTS.md"


def assert_kept(ws: Workspace, ref: str, parent: str) -> None:
    assert git(ws.root, "rev-parse", f"{ref}^") == parent
    assert git(ws.root, "show", f"{ref}:src/app.py") == "half-made"
    assert git(ws.root, "show", f"{ref}:src/draft.py") == "draft"
    assert git(ws.root, "show", f"{ref}:notes/new.md") == "new"
    files = git(ws.root, "ls-tree", "-r", "--name-only", ref).splitlines()
    assert "docs/guide.md" not in files
    assert not {"build/out.o", "AGENTS.md"} & set(files)
    assert not [f for f in files if f.startswith(".tf/")]


def test_set_aside_keeps_the_uncommitted_work_under_a_ref_and_resets_the_tree(
    ws: Workspace,
) -> None:
    tip = head(ws)
    dirty(ws)
    ref = set_aside(ws, "attempt-1-interrupted")
    assert ref == "refs/tf/pt-1/attempt-1-interrupted"
    assert_kept(ws, ref, tip)
    assert head(ws) == tip == git(ws.root, "rev-parse", "tf/pt-1")
    assert (ws.tree / "src" / "app.py").read_text() == "v1\n"
    assert (ws.tree / "docs" / "guide.md").read_text() == "guide\n"
    assert not (ws.tree / "src" / "draft.py").exists()
    assert_left_alone(ws)
    assert set_aside(ws, "attempt-1-interrupted") is None


def test_the_same_changes_kept_twice_are_one_commit_under_one_ref(ws: Workspace) -> None:
    """A run killed after keeping the changes and before resetting the tree keeps them again
    when it reruns: the same commit, under the ref already made (journaled once, then)."""
    tip = head(ws)
    dirty(ws)
    first = keep_uncommitted(ws, "attempt-1-interrupted")
    time.sleep(1.1)  # commit dates have a one-second grain: a later second would show
    again = keep_uncommitted(ws, "attempt-1-interrupted")
    assert first == again == "refs/tf/pt-1/attempt-1-interrupted"
    assert git(ws.root, "for-each-ref", "--format=%(refname)", "refs/tf/") == first
    assert_kept(ws, first, tip)
    write(ws, "src/app.py", "other edit\n")
    assert keep_uncommitted(ws, "attempt-1-interrupted") == f"{first}-2"


def test_reset_to_keeps_the_old_tip_and_the_uncommitted_work(ws: Workspace) -> None:
    start = head(ws)
    write(ws, "src/app.py", "attempt 1\n")
    write(ws, "feature.py", "feature\n")
    blocked = str(checkpoint(ws, "implement", {}))
    dirty(ws)
    ref = reset_to(ws, start, keep_as="attempt-1")
    assert ref == "refs/tf/pt-1/attempt-1"
    assert git(ws.root, "rev-parse", ref) == blocked
    assert git(ws.root, "show", f"{ref}:feature.py") == "feature"
    assert_kept(ws, "refs/tf/pt-1/attempt-1-uncommitted", blocked)
    assert head(ws) == start == git(ws.root, "rev-parse", "tf/pt-1")
    assert not (ws.tree / "feature.py").exists()
    assert (ws.tree / "src" / "app.py").read_text() == "v1\n"
    assert_left_alone(ws)
    assert reset_to(ws, start, keep_as="attempt-1") is None


def test_an_edit_in_the_same_instant_as_the_checkpoint_is_kept_by_a_rollback(
    ws: Workspace,
) -> None:
    """An edit of the same size made in the clock tick of the checkpoint's index write looks
    unchanged by its stat data: git re-reads such a file because it is not older than the
    index ("racily clean"). The temporary index that keeps uncommitted work must say the same
    age, or the edit is missed, and the rollback's reset then drops it. The tick is made
    here by setting the times, as the file system's clock would."""
    start = head(ws)
    tick = time.time_ns() - 10**9
    app = write(ws, "src/app.py", "v2\n")
    os.utime(app, ns=(tick, tick))
    blocked = str(checkpoint(ws, "implement", {}))
    own = Path(git(ws.tree, "rev-parse", "--absolute-git-dir"))
    os.utime(own / "index", ns=(tick, tick))  # the checkpoint wrote its index in that tick
    write(ws, "src/app.py", "v3\n")  # and the agent's next edit came in it too
    os.utime(app, ns=(tick, tick))
    reset_to(ws, start, keep_as="attempt-1")
    kept = "refs/tf/pt-1/attempt-1-uncommitted"
    assert git(ws.root, "show", f"{kept}:src/app.py") == "v3"
    assert git(ws.root, "rev-parse", f"{kept}^") == blocked


def test_reset_to_moves_only_the_tickets_own_branch(ws: Workspace) -> None:
    git(ws.tree, "checkout", "-q", "--detach")
    with pytest.raises(WorkspaceError, match="does not have the branch tf/pt-1 checked out"):
        reset_to(ws, head(ws), keep_as="attempt-1")
    git(ws.tree, "checkout", "-q", "tf/pt-1")
    with pytest.raises(WorkspaceError, match="no such commit"):
        reset_to(ws, "0" * 40, keep_as="attempt-1")


def test_no_checkpoint_lands_on_a_detached_head(ws: Workspace) -> None:
    git(ws.tree, "checkout", "-q", "--detach")  # as a rebase cut off leaves it
    write(ws, "src/app.py", "v2\n")
    with pytest.raises(WorkspaceError, match="will not commit a checkpoint"):
        checkpoint(ws, "implement", {})
    assert (ws.tree / "src" / "app.py").read_text() == "v2\n"
