"""How many git processes one ticket's workspace life costs (tf_fsm.workspace): its worktree
made, a checkpoint, the merge with its recovery check, the removal, counted by a logging `git`
first on the PATH in a real repository. The process's first ticket asks a few questions once
(where the repository's git directories are, whether the worktrees' directory is tracked or
ignored, where the hooks are); the tickets after it are counted."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.gitrepo import git, init_repo, isolate, status
from tf_fsm.settings.load import LoadedSettings, settings_from_dict
from tf_fsm.workspace import checkpoint, merge, recovery, worktree

#: one ticket's life today, which no change may raise (the budget, which
#: benchmarks/bench_workspace.py prints, is 12)
BUDGET = 11


def life(root: Path, settings: LoadedSettings, ticket: str) -> None:
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
    worktree.remove(ws, delete_branch=True)


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


@pytest.mark.parametrize("copies", [False, True], ids=["no agent files", "agent files copied"])
def test_a_tickets_workspace_life_runs_at_most_eleven_git_processes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logged: Path, copies: bool
) -> None:
    isolate(monkeypatch)
    tickets = {f".tickets/pt-{n}.md": f"---\nid: pt-{n}\nstatus: open\n---\n" for n in (1, 2)}
    root = init_repo(tmp_path / "repo", {"src/app.py": "v1\n", **tickets})
    if copies:  # untracked at the root: copied into each worktree, never committed
        (root / "AGENTS.md").write_text("agents\n")
    settings = settings_from_dict({})
    life(root, settings, "pt-1")
    logged.unlink()
    life(root, settings, "pt-2")
    ran = logged.read_text().splitlines()
    assert len(ran) <= BUDGET, ran
    # the life did its work: both merged with their tk close, nothing left behind
    assert git(root, "log", "--merges", "--format=%s", "main").splitlines() == [
        "Merge pt-2",
        "Merge pt-1",
    ]
    assert "status: closed" in (root / ".tickets" / "pt-2.md").read_text()
    assert git(root, "branch", "--list", "tf/*") == ""
    assert not (root / ".tf" / "ralph" / "worktrees" / "pt-2").exists()
    assert status(root) == ("?? AGENTS.md" if copies else "")
