"""The merge queue's git operations (tf_fsm.workspace.merge) on real repositories: each
strategy's history, the trailers, a merge never made twice, the refusals that protect a
person's work (staged changes, local changes git would overwrite), the user's hooks, the base
branch checked out nowhere (compare-and-swap), and the queue's lock across processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import tk_ticket, wait_for
from tests.gitrepo import commit_all, git, init_repo, isolate, status
from tf_fsm.errors import WorkspaceError
from tf_fsm.workspace.merge import (
    Merged,
    Strategy,
    merge,
    merge_lock,
    merge_of,
    merged_commit,
    rebase_onto_base,
)
from tf_fsm.workspace.model import Workspace

TK_OPEN = tk_ticket("pt-1")
TK_CLOSED = TK_OPEN.replace("status: open", "status: closed")
TK_FILE = ".tickets/pt-1.md"
STRATEGIES: tuple[Strategy, ...] = ("merge", "squash", "rebase")
#: git's files of an operation in progress, none of which a merge may leave behind
STATE_FILES = ("MERGE_HEAD", "MERGE_MSG", "SQUASH_MSG", "rebase-merge", "rebase-apply")


# -- helpers shared with test_rebase.py ----------------------------------------------------


def make_repo(root: Path) -> Path:
    """A project on `main` with a tk ticket and two source files."""
    files = {"app.py": "def app():\n    return 1\n", "lib.py": "X = 1\n", TK_FILE: TK_OPEN}
    return init_repo(root, files)


def add_ticket_worktree(root: Path) -> Workspace:
    """The ticket's branch `tf/pt-1` (from main) in its worktree, made with plain git."""
    if not git(root, "branch", "--list", "tf/pt-1"):
        git(root, "branch", "tf/pt-1", "main")
    tree = root / ".tf" / "ralph" / "worktrees" / "pt-1"
    git(root, "worktree", "add", "-q", str(tree), "tf/pt-1")
    return Workspace("pt-1", root, tree, "tf/pt-1", "main")


def ticket(tmp_path: Path) -> Workspace:
    return add_ticket_worktree(make_repo(tmp_path / "repo"))


def work(ws: Workspace, files: dict[str, str], message: str = "ticket work") -> str:
    """Commit `files` on the ticket's branch, in its worktree; the new tip."""
    for name, text in files.items():
        path = ws.tree / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return commit_all(ws.tree, message)


def close_at_root(root: Path) -> None:
    """What the run does to the tk file at the root before merging: edits it, unstaged."""
    (root / TK_FILE).write_text(TK_CLOSED, encoding="utf-8")


def merge_ticket(ws: Workspace, strategy: Strategy = "merge") -> Merged:
    return merge(
        ws,
        strategy=strategy,
        message="Merge pt-1: add a depth limit",
        tk_file=TK_FILE,
        tk_text=TK_CLOSED,
    )


def with_trailer(root: Path, tip: str, ref: str = "main") -> list[str]:
    """The commits of `ref` that say they merged `tip`."""
    out = git(root, "log", "--format=%H", "--fixed-strings", f"--grep=Tf-Merged-Tip: {tip}", ref)
    return out.split()


def trailer(root: Path, commit: str, key: str) -> str:
    return git(root, "log", "-1", f"--format=%(trailers:key={key},valueonly)", commit)


def parents(root: Path, commit: str) -> list[str]:
    return git(root, "rev-list", "--parents", "-n1", commit).split()[1:]


def leftovers(root: Path) -> list[str]:
    """git's in-progress state and tf-fsm's merge notes and temporary trees at the root."""
    found = [name for name in STATE_FILES if (root / ".git" / name).exists()]
    merging = root / ".tf" / "ralph" / "merging"
    return found + (sorted(p.name for p in merging.iterdir()) if merging.exists() else [])


def changes(tree: Path) -> list[str]:
    """`git status --porcelain` lines, untracked files included (unstripped, unlike status)."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.splitlines()


def show(root: Path, spec: str) -> str:
    return subprocess.run(
        ["git", "show", spec], cwd=root, capture_output=True, text=True, check=True
    ).stdout


def hook(root: Path, name: str, body: str) -> Path:
    path = root / ".git" / "hooks" / name
    path.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    path.chmod(0o755)
    return path


# -- each strategy -------------------------------------------------------------------------


def test_merge_strategy_makes_one_merge_commit_with_two_parents_holding_the_tk_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    base = git(ws.root, "rev-parse", "main")
    work(ws, {"feature.py": "A = 1\n"}, "first")
    tip = work(ws, {"feature.py": "A = 2\n"}, "second")
    close_at_root(ws.root)

    merged = merge_ticket(ws, "merge")

    assert merged == Merged(git(ws.root, "rev-parse", "main"), base, already=False)
    assert parents(ws.root, merged.commit) == [base, tip]
    assert (
        git(ws.root, "log", "-1", "--format=%s", merged.commit) == "Merge pt-1: add a depth limit"
    )
    assert trailer(ws.root, merged.commit, "Tf-Ticket") == "pt-1"
    assert trailer(ws.root, merged.commit, "Tf-Merged-Tip") == tip
    assert show(ws.root, f"main:{TK_FILE}") == TK_CLOSED
    assert show(ws.root, "main:feature.py") == "A = 2\n"
    assert status(ws.root) == ""  # the tk file is committed as the run left it, nothing else
    assert leftovers(ws.root) == []


def test_squash_makes_one_commit_with_the_ticket_changes_and_the_tk_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    base = git(ws.root, "rev-parse", "main")
    work(ws, {"feature.py": "A = 1\n"}, "first")
    tip = work(ws, {"lib.py": "X = 2\n"}, "second")
    close_at_root(ws.root)

    merged = merge_ticket(ws, "squash")

    assert parents(ws.root, merged.commit) == [base]
    assert git(ws.root, "rev-list", f"main..{tip}") != ""  # the ticket's commits stay apart
    assert git(ws.root, "diff", "--name-only", tip, "main").split() == [TK_FILE]
    assert trailer(ws.root, merged.commit, "Tf-Merged-Tip") == tip
    assert trailer(ws.root, merged.commit, "Tf-Ticket") == "pt-1"
    assert status(ws.root) == ""
    assert leftovers(ws.root) == []


def test_rebase_strategy_is_the_ticket_commits_plus_one_commit_for_the_tk_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    base = git(ws.root, "rev-parse", "main")
    first = work(ws, {"feature.py": "A = 1\n"}, "first")
    tip = work(ws, {"feature.py": "A = 2\n"}, "second")
    close_at_root(ws.root)

    merged = merge_ticket(ws, "rebase")

    assert git(ws.root, "rev-list", "--reverse", f"{base}..main").split() == [
        first,
        tip,
        merged.commit,
    ]
    assert git(ws.root, "rev-list", "--merges", "main") == ""
    assert git(ws.root, "diff", "--name-only", tip, "main").split() == [TK_FILE]
    assert trailer(ws.root, merged.commit, "Tf-Merged-Tip") == tip
    assert status(ws.root) == ""


# -- never twice ---------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_merged_tip_is_found_and_never_merged_again(
    strategy: Strategy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    base = git(ws.root, "rev-parse", "main")
    tip = work(ws, {"feature.py": "A = 1\n"})
    close_at_root(ws.root)
    assert merged_commit(ws) is None

    merged = merge_ticket(ws, strategy)
    (ws.root / "later.txt").write_text("a person's later commit\n")
    later = commit_all(ws.root, "later work on main")

    assert merged_commit(ws) == merged.commit
    assert merged_commit(ws, since=base) == merged.commit
    again = merge_ticket(ws, strategy)
    assert again == Merged(merged.commit, later, already=True)
    assert git(ws.root, "rev-parse", "main") == later
    assert with_trailer(ws.root, tip) == [merged.commit]


def test_merged_commit_since_only_looks_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    work(ws, {"feature.py": "A = 1\n"})
    merged = merge_ticket(ws, "squash")  # squash: only the trailer says it is merged
    assert merged_commit(ws, since=merged.commit) is None
    assert merged_commit(ws, since=f"{merged.commit}~1") == merged.commit


def test_a_merge_made_by_hand_holds_the_work_and_still_gets_the_tk_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A person merged the branch by hand, and main moved on: its work is held (the branch may
    go: merge_of), but the queue has not merged it, so its tk close is still to be committed:
    the branch is brought up to main (nothing re-applied) and one commit closes it."""
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tip = work(ws, {"feature.py": "A = 1\n"})
    git(ws.root, "merge", "-q", "--no-ff", "-m", "merged by a person", "tf/pt-1")
    by_hand = git(ws.root, "rev-parse", "main")
    (ws.root / "later.txt").write_text("later\n")
    later = commit_all(ws.root, "later")

    assert merge_of(ws.root_git, tip, later) == by_hand
    assert merged_commit(ws) is None
    assert rebase_onto_base(ws).moved  # a fast-forward to main
    close_at_root(ws.root)
    merged = merge_ticket(ws)
    assert not merged.already and parents(ws.root, merged.commit) == [later]
    assert show(ws.root, f"main:{TK_FILE}") == TK_CLOSED
    assert git(ws.root, "diff", "--name-only", later, merged.commit) == TK_FILE
    assert merged_commit(ws) == merged.commit


def test_a_fast_forward_by_hand_followed_by_more_work_holds_the_tip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tip = work(ws, {"feature.py": "A = 1\n"})
    git(ws.root, "merge", "-q", "--ff-only", "tf/pt-1")
    (ws.root / "later.txt").write_text("later\n")
    later = commit_all(ws.root, "later")
    assert merge_of(ws.root_git, tip, later) == tip
    assert merged_commit(ws) is None  # the queue's commit with the tk close is not there


def test_a_tip_another_tickets_merge_names_is_not_this_tickets_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Tickets with no commit of their own share their branch's tip (the base they started
    from): the first one's merge names that tip in its trailer, which is no merge of the
    others, pt-10 included (its id begins with pt-1's)."""
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    start = git(ws.root, "rev-parse", "main")
    close_at_root(ws.root)
    first = merge_ticket(ws)
    assert trailer(ws.root, first.commit, "Tf-Merged-Tip") == start
    for other in ("pt-2", "pt-10"):
        git(ws.root, "branch", f"tf/{other}", start)
        mine = Workspace(other, ws.root, ws.tree, f"tf/{other}", "main")
        assert merged_commit(mine) is None, other
    git(ws.root, "branch", "tf/pt", start)
    assert merged_commit(Workspace("pt", ws.root, ws.tree, "tf/pt", "main")) is None
    assert merged_commit(ws) == first.commit


def test_a_fast_forward_by_hand_without_the_tk_commit_gets_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The base at the ticket's tip (a fast-forward by hand, or a rebase merge killed after
    its fast-forward): not merged yet, the tk commit is made on top; once the base moved on
    past the tip, the tip itself is what merged it."""
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tip = work(ws, {"feature.py": "A = 1\n"})
    git(ws.root, "merge", "-q", "--ff-only", "tf/pt-1")
    close_at_root(ws.root)
    assert merged_commit(ws) is None

    merged = merge_ticket(ws, "merge")

    assert not merged.already and parents(ws.root, merged.commit) == [tip]
    assert with_trailer(ws.root, tip) == [merged.commit]
    assert show(ws.root, f"main:{TK_FILE}") == TK_CLOSED


def test_a_ticket_with_no_commit_of_its_own_gets_its_tk_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    base = git(ws.root, "rev-parse", "main")
    close_at_root(ws.root)
    merged = merge_ticket(ws, "squash")
    assert parents(ws.root, merged.commit) == [base]
    assert trailer(ws.root, merged.commit, "Tf-Merged-Tip") == base
    assert merge_ticket(ws, "squash").already


# -- what protects a person's work ---------------------------------------------------------


def test_a_branch_without_the_base_tip_is_refused_until_rebased(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    work(ws, {"feature.py": "A = 1\n"})
    (ws.root / "lib.py").write_text("X = 3\n")
    moved = commit_all(ws.root, "a person's commit on main")

    with pytest.raises(WorkspaceError, match="rebase it onto main"):
        merge_ticket(ws)
    assert git(ws.root, "rev-parse", "main") == moved
    assert leftovers(ws.root) == []


def test_staged_changes_at_the_root_refuse_the_merge_and_stay_staged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    work(ws, {"feature.py": "A = 1\n"})
    base = git(ws.root, "rev-parse", "main")
    (ws.root / "lib.py").write_text("X = 'staged by a person'\n")
    git(ws.root, "add", "lib.py")

    with pytest.raises(WorkspaceError, match=r"staged changes \(lib\.py\)") as caught:
        merge_ticket(ws)
    assert "git restore --staged" in str(caught.value)
    assert git(ws.root, "rev-parse", "main") == base
    assert git(ws.root, "diff", "--cached", "--name-only") == "lib.py"
    assert (ws.root / "lib.py").read_text() == "X = 'staged by a person'\n"
    assert leftovers(ws.root) == []


def test_an_unfinished_merge_of_somebody_else_refuses_the_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    work(ws, {"feature.py": "A = 1\n"})
    git(ws.root, "checkout", "-q", "-b", "side")
    (ws.root / "side.txt").write_text("side\n")
    commit_all(ws.root, "side work")
    git(ws.root, "checkout", "-q", "main")
    git(ws.root, "merge", "-q", "--no-ff", "--no-commit", "side")

    with pytest.raises(WorkspaceError, match=r"unfinished merge .*git merge --abort"):
        merge_ticket(ws)
    assert (ws.root / ".git" / "MERGE_HEAD").read_text().strip() == git(
        ws.root, "rev-parse", "side"
    )


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_unstaged_edits_and_untracked_files_of_the_user_survive_untouched(
    strategy: Strategy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    work(ws, {"feature.py": "A = 1\n", "app.py": "def app():\n    return 2\n"})
    close_at_root(ws.root)
    (ws.root / "lib.py").write_text("X = 'a person is editing this'\n")
    (ws.root / "notes.txt").write_text("a person's notes\n")

    merged = merge_ticket(ws, strategy)

    assert (ws.root / "lib.py").read_text() == "X = 'a person is editing this'\n"
    assert (ws.root / "notes.txt").read_text() == "a person's notes\n"
    assert show(ws.root, f"{merged.commit}:lib.py") == "X = 1\n"  # not taken into the merge
    assert show(ws.root, f"{merged.commit}:app.py") == "def app():\n    return 2\n"
    assert changes(ws.root) == [" M lib.py", "?? notes.txt"]


def test_local_changes_git_would_overwrite_are_named_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    work(ws, {"feature.py": "A = 1\n", "app.py": "def app():\n    return 2\n"})
    base = git(ws.root, "rev-parse", "main")
    close_at_root(ws.root)
    (ws.root / "app.py").write_text("a person's edit\n")
    (ws.root / "feature.py").write_text("a person's own feature\n")

    with pytest.raises(WorkspaceError, match="overwrite local changes in") as caught:
        merge_ticket(ws)
    assert "app.py" in str(caught.value) and "feature.py" in str(caught.value)
    assert (ws.root / "app.py").read_text() == "a person's edit\n"
    assert (ws.root / "feature.py").read_text() == "a person's own feature\n"
    assert (ws.root / TK_FILE).read_text() == TK_CLOSED
    assert git(ws.root, "rev-parse", "main") == base
    assert leftovers(ws.root) == []


# -- the user's hooks ----------------------------------------------------------------------


@pytest.mark.parametrize(("strategy", "name"), [("merge", "pre-commit"), ("squash", "commit-msg")])
def test_a_failing_hook_undoes_the_merge_and_says_why(
    strategy: Strategy, name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tip = work(ws, {"feature.py": "A = 1\n"})
    base = git(ws.root, "rev-parse", "main")
    close_at_root(ws.root)
    (ws.root / "lib.py").write_text("X = 'unstaged'\n")
    refusing = hook(ws.root, name, "echo 'style check failed: feature.py' >&2; exit 1")

    with pytest.raises(WorkspaceError, match=r"style check failed: feature\.py") as caught:
        merge_ticket(ws, strategy)
    assert "the merge was undone: main is unchanged" in str(caught.value)
    assert git(ws.root, "rev-parse", "main") == base
    assert leftovers(ws.root) == []
    assert changes(ws.root) == [" M .tickets/pt-1.md", " M lib.py"]
    assert (ws.root / TK_FILE).read_text() == TK_CLOSED

    refusing.unlink()
    merged = merge_ticket(ws, strategy)
    assert with_trailer(ws.root, tip) == [merged.commit]
    assert (ws.root / "lib.py").read_text() == "X = 'unstaged'\n"


def test_hooks_run_on_the_merge_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    work(ws, {"feature.py": "A = 1\n"})
    hook(ws.root, "commit-msg", 'echo "Reviewed-by: the hook" >> "$1"')
    merged = merge_ticket(ws)
    assert trailer(ws.root, merged.commit, "Reviewed-by") == "the hook"


def test_a_failing_hook_after_a_rebase_fast_forward_leaves_only_the_tk_commit_to_make(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tip = work(ws, {"feature.py": "A = 1\n"})
    close_at_root(ws.root)
    refusing = hook(ws.root, "pre-commit", "echo 'no commits today' >&2; exit 1")

    with pytest.raises(WorkspaceError, match=r"only the commit of \.tickets/pt-1\.md is missing"):
        merge_ticket(ws, "rebase")
    assert git(ws.root, "rev-parse", "main") == tip  # the base is never moved back
    assert changes(ws.root) == [" M .tickets/pt-1.md"]
    assert merged_commit(ws) is None

    refusing.unlink()
    merged = merge_ticket(ws, "rebase")
    assert not merged.already and parents(ws.root, merged.commit) == [tip]
    assert with_trailer(ws.root, tip) == [merged.commit]


# -- the base branch checked out nowhere ---------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_base_checked_out_nowhere_is_merged_in_a_temporary_worktree(
    strategy: Strategy, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    base = git(ws.root, "rev-parse", "main")
    tip = work(ws, {"feature.py": "A = 1\n"})
    git(ws.root, "checkout", "-q", "-b", "elsewhere")
    close_at_root(ws.root)

    merged = merge_ticket(ws, strategy)

    assert git(ws.root, "rev-parse", "main") == merged.commit
    assert merged.base_before == base and with_trailer(ws.root, tip) == [merged.commit]
    assert show(ws.root, f"main:{TK_FILE}") == TK_CLOSED
    assert git(ws.root, "symbolic-ref", "--short", "HEAD") == "elsewhere"
    assert changes(ws.root) == [" M .tickets/pt-1.md"]  # the root is not touched
    assert len(git(ws.root, "worktree", "list").splitlines()) == 2
    assert leftovers(ws.root) == []
    assert merge_ticket(ws, strategy).already


def test_a_base_moved_during_a_detached_merge_is_not_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The compare-and-swap: a hook that moves main while the merge commit is made stands
    for another process moving it at that moment."""
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tip = work(ws, {"feature.py": "A = 1\n"})
    git(ws.root, "checkout", "-q", "-b", "elsewhere")
    (ws.root / "other.txt").write_text("moved meanwhile\n")
    other = commit_all(ws.root, "another process's commit")
    hook(ws.root, "post-commit", f"git update-ref refs/heads/main {other}")

    with pytest.raises(WorkspaceError, match="main moved while tf/pt-1 was being merged"):
        merge_ticket(ws)
    assert git(ws.root, "rev-parse", "main") == other
    assert with_trailer(ws.root, tip) == []
    assert leftovers(ws.root) == []
    assert len(git(ws.root, "worktree", "list").splitlines()) == 2


def test_the_base_checked_out_in_another_worktree_is_merged_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    ws = ticket(tmp_path)
    tip = work(ws, {"feature.py": "A = 1\n"})
    git(ws.root, "checkout", "-q", "-b", "elsewhere")
    other = tmp_path / "main-checkout"
    git(ws.root, "worktree", "add", "-q", str(other), "main")

    merged = merge_ticket(ws)

    assert git(other, "rev-parse", "HEAD") == merged.commit
    assert (other / "feature.py").read_text() == "A = 1\n"
    assert (other / TK_FILE).read_text() == TK_CLOSED
    assert status(other) == "" and with_trailer(ws.root, tip) == [merged.commit]


# -- the queue -----------------------------------------------------------------------------

LOCK_TAKER = """
import sys
from pathlib import Path
from tf_fsm.workspace.merge import merge_lock
with merge_lock(Path(sys.argv[1])):
    print("got the merge queue", flush=True)
"""


def _waits_on_a_flock(pid: int) -> bool:
    with open("/proc/locks", encoding="utf-8") as locks:
        return any(
            line.split()[1:3] == ["->", "FLOCK"] and line.split()[5] == str(pid) for line in locks
        )


def test_the_merge_lock_lets_one_process_merge_at_a_time(tmp_path: Path) -> None:
    root = tmp_path / "queue"
    root.mkdir()
    with merge_lock(root):
        assert (root / ".tf" / "ralph" / "merge.lock").is_file()
        waiting = subprocess.Popen(
            [sys.executable, "-c", LOCK_TAKER, str(root)], stdout=subprocess.PIPE, text=True
        )
        # the kernel lists it as a waiter of the lock's flock ("->"): it reached the queue
        wait_for(lambda: _waits_on_a_flock(waiting.pid), 30, "the second process waiting")
        assert waiting.poll() is None  # still waiting for the queue
    out, _ = waiting.communicate(timeout=30)
    assert waiting.returncode == 0 and out == "got the merge queue\n"
