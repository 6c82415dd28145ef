"""Recovery in the merge queue (tf_fsm.workspace.recovery) across tickets, on a real git
repository: a merge of one ticket killed at the root is undone by the next ticket to take
the queue, so that it never blocks another ticket's merge."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import tk_ticket
from tests.gitrepo import git, isolate, status
from tests.workspace.test_merge import TK_FILE, merge_ticket, parents, show, ticket, work
from tf_fsm.workspace.merge import merge, merged_commit
from tf_fsm.workspace.merge_note import note_path, write_note
from tf_fsm.workspace.model import Workspace
from tf_fsm.workspace.recovery import recover


def second_ticket(root: Path) -> Workspace:
    """pt-2's branch and worktree beside pt-1's, with a commit of its own."""
    git(root, "branch", "tf/pt-2", "main")
    tree = root / ".tf" / "ralph" / "worktrees" / "pt-2"
    git(root, "worktree", "add", "-q", str(tree), "tf/pt-2")
    ws = Workspace("pt-2", root, tree, "tf/pt-2", "main")
    work(ws, {"two.py": "TWO = 2\n"}, "pt-2 work")
    return ws


def test_another_tickets_killed_merge_is_undone_before_this_one_merges(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    first = ticket(tmp_path)
    root, base = first.root, git(first.root, "rev-parse", "main")
    tip = work(first, {"one.py": "ONE = 1\n"}, "pt-1 work")
    second = second_ticket(root)
    # pt-1's merge as a kill leaves it: noted, begun at the root, not committed
    note = {
        "ticket": "pt-1",
        "tip": tip,
        "base": base,
        "checkout": str(root),
        "strategy": "merge",
        "tkFile": TK_FILE,
    }
    write_note(root, "pt-1", note)
    git(root, "merge", "--no-ff", "--no-commit", "--no-autostash", tip)
    assert (root / ".git" / "MERGE_HEAD").exists()

    recovered = recover(second)

    assert recovered.notes == [
        f"pt-1: undid an unfinished merge of {tip[:12]} in {root}: it is back at {base[:12]}"
    ]
    assert not (root / ".git" / "MERGE_HEAD").exists()
    assert not note_path(root, "pt-1").exists()
    assert status(root) == "" and not (root / "one.py").exists()
    text = tk_ticket("pt-2").replace("status: open", "status: closed")
    merged = merge(
        second,
        strategy="merge",
        message="Merge pt-2: two",
        tk_file=".tickets/pt-2.md",
        tk_text=text,
    )
    assert parents(root, merged.commit)[0] == base
    assert show(root, "main:two.py") == "TWO = 2\n"
    assert "one.py" not in git(root, "ls-tree", "--name-only", "main").split()
    # pt-1 itself is not lost: its branch is as it was, and it merges in its turn
    assert git(root, "rev-parse", "tf/pt-1") == tip and merged_commit(first) is None
    assert recover(first).notes == []
    git(first.tree, "rebase", "-q", "main")
    assert merge_ticket(first).already is False
    assert show(root, "main:one.py") == "ONE = 1\n"
