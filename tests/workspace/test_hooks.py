"""Which of the user's git hooks each git step of tf_fsm runs (docs/workspaces.md, "Hooks"),
with real hook scripts in real repositories: tf_fsm's own bookkeeping runs none, wherever the
hooks are (`.git/hooks`, or a `core.hooksPath` of the repository's config); the commit that
merges a ticket into its base branch runs the user's, as `git merge` would."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.gitrepo import commit_all, git, hooks_run, init_repo, isolate, logging_hooks
from tf_fsm.engine.gates import run_gate
from tf_fsm.errors import WorkspaceError
from tf_fsm.settings.load import QualityGate, settings_from_dict
from tf_fsm.workspace.baseline import baseline
from tf_fsm.workspace.checkpoint import checkpoint, reset_to, set_aside
from tf_fsm.workspace.merge import Strategy, merge
from tf_fsm.workspace.model import Workspace
from tf_fsm.workspace.worktree import ensure, remove

TK_FILE = ".tickets/pt-1.md"
#: what the commit concluding a merge runs, in git's order (post-index-change: `git commit`
#: writes the index's cache tree; reference-transaction: the end of the branch's update)
COMMIT_HOOKS = [
    "post-index-change",
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "reference-transaction",
    "post-commit",
]


@pytest.fixture(params=["hooks dir", "core.hooksPath"])
def repo(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository whose every hook logs to `<tmp>/hooks.log`: in `.git/hooks`, or in a
    directory its own config names (core.hooksPath, as husky and pre-commit set it)."""
    isolate(monkeypatch)
    root = init_repo(tmp_path / "repo", {"src/app.py": "v1\n", TK_FILE: "status: open\n"})
    if request.param == "core.hooksPath":
        git(root, "config", "core.hooksPath", ".githooks")
        logging_hooks(root / ".githooks", tmp_path / "hooks.log")
        commit_all(root, "the project's hooks")
    else:
        logging_hooks(root / ".git" / "hooks", tmp_path / "hooks.log")
    log = tmp_path / "hooks.log"
    (root / "person.txt").write_text("a person's file\n")
    commit_all(root, "a person's commit")
    assert ("pre-commit", str(root)) in hooks_run(log)  # the hooks are live for a person
    log.unlink()
    return root


def log_of(root: Path) -> Path:
    return root.parent / "hooks.log"


def edit(ws: Workspace, text: str) -> None:
    (ws.tree / "src" / "app.py").write_text(text, encoding="utf-8")


def test_tf_fsms_own_git_commands_run_no_hook(repo: Path) -> None:
    """Making the worktree and the branch, checkpoints, work set aside, a rollback, the gate
    baseline's temporary worktree, removing the worktree and the branch: no hook runs."""
    ws, _ = ensure(repo, settings_from_dict({}), "pt-1", "main")
    edit(ws, "v2\n")
    first = checkpoint(ws, "implement", {"Tf-Phase": "implement"})
    assert first is not None
    edit(ws, "v3\n")
    assert set_aside(ws, "interrupted") is not None
    edit(ws, "v4\n")
    assert checkpoint(ws, "fix", {}) is not None
    edit(ws, "v5, uncommitted\n")
    assert reset_to(ws, first, "attempt-1") is not None
    gate = QualityGate(name="check", command=[sys.executable, "-c", "print('ok')"])
    assert baseline(repo, first, [gate], run_gate, lambda _: None)["check"].passed
    edit(ws, "v6, uncommitted\n")
    assert remove(ws, delete_branch=True, force=True) != []
    assert git(repo, "for-each-ref", "--format=%(refname)", "refs/tf/pt-1/").split() == [
        "refs/tf/pt-1/attempt-1",
        "refs/tf/pt-1/attempt-1-uncommitted",
        "refs/tf/pt-1/interrupted",
        "refs/tf/pt-1/removed-branch",
        "refs/tf/pt-1/removed-uncommitted",
    ]
    assert hooks_run(log_of(repo)) == []


def merged_ticket(repo: Path, strategy: Strategy) -> tuple[Workspace, str]:
    ws, _ = ensure(repo, settings_from_dict({}), "pt-1", "main")
    edit(ws, "v2\n")
    assert checkpoint(ws, "implement", {}) is not None
    commit = merge(
        ws,
        strategy=strategy,
        message="Merge pt-1: a change",
        tk_file=TK_FILE,
        tk_text="status: closed\n",
    ).commit
    return ws, commit


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("merge", ["pre-merge-commit", *COMMIT_HOOKS]),
        ("squash", COMMIT_HOOKS),
        ("rebase", COMMIT_HOOKS),
    ],
)
def test_the_commit_merging_a_ticket_runs_the_users_hooks_at_the_base(
    repo: Path, strategy: Strategy, expected: list[str]
) -> None:
    """The merge commit runs what `git merge` runs before a merge commit of its own
    (pre-merge-commit) and what `git commit` runs; a squash or the commit after a
    fast-forward, what `git commit` runs. Beginning the merge (`git merge --no-commit`,
    `--squash`, `--ff-only`) runs none, so post-merge never runs."""
    _, commit = merged_ticket(repo, strategy)
    assert git(repo, "rev-parse", "main") == commit
    assert hooks_run(log_of(repo)) == [(name, str(repo)) for name in expected]


def test_a_refusing_pre_merge_commit_hook_undoes_the_merge(repo: Path) -> None:
    hooks = Path(git(repo, "rev-parse", "--git-path", "hooks"))
    hooks = hooks if hooks.is_absolute() else repo / hooks
    (hooks / "pre-merge-commit").write_text("#!/bin/sh\necho 'merges are frozen' >&2\nexit 1\n")
    base = git(repo, "rev-parse", "main")
    with pytest.raises(WorkspaceError, match="merges are frozen") as refused:
        merged_ticket(repo, "merge")
    assert "the merge was undone: main is unchanged" in str(refused.value)
    assert git(repo, "rev-parse", "main") == base
    assert not (repo / ".git" / "MERGE_HEAD").exists()
    assert [name for name, _ in hooks_run(log_of(repo))] == []  # refused before the commit


def test_settings_given_to_git_in_the_environment_are_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A core.hooksPath the user gives every git in the environment (GIT_CONFIG_COUNT): tf_fsm
    adds its own setting after it, so its bookkeeping runs no hook and the merge commit runs
    the hooks of the user's directory."""
    isolate(monkeypatch)
    repo = init_repo(tmp_path / "repo", {"src/app.py": "v1\n", TK_FILE: "status: open\n"})
    log = tmp_path / "hooks.log"
    logging_hooks(tmp_path / "env-hooks", log)
    monkeypatch.setenv("GIT_CONFIG_COUNT", "1")
    monkeypatch.setenv("GIT_CONFIG_KEY_0", "core.hooksPath")
    monkeypatch.setenv("GIT_CONFIG_VALUE_0", str(tmp_path / "env-hooks"))
    ws, _ = ensure(repo, settings_from_dict({}), "pt-1", "main")
    edit(ws, "v2\n")
    assert checkpoint(ws, "implement", {}) is not None
    assert hooks_run(log) == []
    merge(ws, strategy="squash", message="Merge pt-1", tk_file=TK_FILE, tk_text="closed\n")
    assert hooks_run(log) == [(name, str(repo)) for name in COMMIT_HOOKS]
