"""How many git processes one ticket's workspace life costs (tf_fsm.workspace): its worktree
made (or taken from the pool), a checkpoint, the merge with its recovery check, the removal
(or the worktree set down into the pool), counted by a logging `git` first on the PATH in a
real repository. The process's first ticket asks a few questions once (where the repository's
git directories are, whether the worktrees' directory is tracked or ignored, where the hooks
are); the tickets after it are counted."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.gitrepo import git, init_repo, isolate, status
from tf_fsm.settings.load import LoadedSettings, settings_from_dict
from tf_fsm.workspace import checkpoint, merge, recovery, worktree
from tf_fsm.workspace.pool import Pool, idle, pool_of

#: one ticket's life today, which no change may raise (the budget, which
#: benchmarks/bench_workspace.py prints, is 12): with no pool, and with the pool warm (the
#: worktree the ticket before set down is taken: its branch checked out and the previous
#: ticket's files cleaned away, one process more than a `git worktree add`)
BUDGET = {"no pool": 11, "pool warm": 12}


def life(root: Path, settings: LoadedSettings, ticket: str, pool: Pool | None) -> None:
    """One ticket's workspace life, as a worker runs it."""
    ws, _notes = worktree.ensure(root, settings, ticket, "main")
    (ws.tree / "src" / "app.py").write_text(f"changed by {ticket}\n")
    (ws.tree / "src" / f"{ticket}.py").write_text("new\n")
    assert checkpoint.checkpoint(ws, f"{ticket} implement", {"Tf-Phase": "implement"})
    with merge.merge_lock(root):
        recovery.recover(ws)
        merged = merge.merge(
            ws,
            strategy="merge",
            message=f"Merge {ticket}",
            tk_file=f".tickets/{ticket}.md",
            tk_text=f"---\nid: {ticket}\nstatus: closed\n---\n",
        )
    assert not merged.already
    worktree.remove(ws, delete_branch=True, pool=pool)


@pytest.fixture
def logged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The log a `git` first on the PATH appends each command's subcommand to."""
    shim, log = tmp_path / "shim", tmp_path / "git.log"
    shim.mkdir()
    real = shutil.which("git")
    (shim / "git").write_text(f'#!/bin/sh\necho "$1 $2" >> {log}\nexec {real} "$@"\n')
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
    return log


@pytest.mark.parametrize("pooled", list(BUDGET))
@pytest.mark.parametrize("copies", [False, True], ids=["no agent files", "agent files copied"])
def test_a_tickets_workspace_life_runs_at_most_its_budget_of_git_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logged: Path, copies: bool, pooled: str
) -> None:
    isolate(monkeypatch)
    tickets = {f".tickets/pt-{n}.md": f"---\nid: pt-{n}\nstatus: open\n---\n" for n in (1, 2)}
    root = init_repo(tmp_path / "repo", {"src/app.py": "v1\n", **tickets})
    if copies:  # untracked at the root: copied into each worktree, never committed
        (root / "AGENTS.md").write_text("agents\n")
    settings = settings_from_dict({})
    pool = pool_of(root, settings) if pooled == "pool warm" else None
    life(root, settings, "pt-1", pool)
    logged.unlink()
    life(root, settings, "pt-2", pool)
    ran = logged.read_text().splitlines()
    assert len(ran) <= BUDGET[pooled], ran
    assert ("checkout --force" in ran) is (pool is not None)  # pt-2 took pt-1's worktree
    # the life did its work: both merged with their tk close, nothing left behind
    assert git(root, "log", "--merges", "--format=%s", "main").splitlines() == [
        "Merge pt-2",
        "Merge pt-1",
    ]
    assert "status: closed" in (root / ".tickets" / "pt-2.md").read_text()
    assert git(root, "branch", "--list", "tf/*") == ""
    assert not (root / ".tf" / "ralph" / "worktrees" / "pt-2").exists()
    if pool is not None:  # pt-2's worktree waits for the next ticket
        assert [p.name for p in idle(pool)] == [".pool-1"]
    assert status(root) == ("?? AGENTS.md" if copies else "")
