"""Real git repositories for tests: the `git` CLI, a fixed identity and no global or system
config (set in the environment of each command, so the machine's own git config never leaks
in and nothing is written to it)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

#: what every git command of a test runs with (and tf_fsm's own git, via os.environ, when a
#: test sets it there with `isolate`)
GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.com",
    "GIT_COMMITTER_NAME": "Test Committer",
    "GIT_COMMITTER_EMAIL": "committer@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_TERMINAL_PROMPT": "0",
}


def isolate(monkeypatch: object) -> None:
    """Give this test's processes (tf_fsm's git included) GIT_ENV."""
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)  # type: ignore[attr-defined]


def git(cwd: Path, *args: str, check: bool = True) -> str:
    """`git <args>` in `cwd`; its stdout (stripped). Raises with git's stderr when it fails."""
    result = subprocess.run(
        ["git", *args], cwd=cwd, env={**os.environ, **GIT_ENV}, capture_output=True, text=True
    )
    if check and result.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed in {cwd}: {result.stderr.strip()}")
    return result.stdout.strip()


def init_repo(
    root: Path, files: dict[str, str] | None = None, branch: str = "main", *, ignores: bool = True
) -> Path:
    """A repository at `root` on `branch` with one commit of `files` (and, with `ignores`, a
    .gitignore that keeps tf_fsm's run state out, as `tf-fsm init` writes it)."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q", "-b", branch)
    ignored = {".gitignore": ".tf/knowledge/\n.tf/ralph/\n"} if ignores else {}
    for name, text in {**ignored, **(files or {})}.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    commit_all(root, "initial")
    return root


def commit_all(cwd: Path, message: str) -> str:
    """Stage everything and commit; the new commit's sha."""
    git(cwd, "add", "-A")
    git(cwd, "commit", "-q", "--allow-empty", "-m", message)
    return git(cwd, "rev-parse", "HEAD")


def status(cwd: Path) -> str:
    """`git status --porcelain` (untracked files included): empty when the tree is clean."""
    return git(cwd, "status", "--porcelain", "--untracked-files=all")


def branches(cwd: Path, pattern: str = "*") -> list[str]:
    out = git(cwd, "for-each-ref", "--format=%(refname:short)", f"refs/heads/{pattern}")
    return out.splitlines()


#: every hook git runs on a local repository's client side (githooks(5)), server hooks left out
CLIENT_HOOKS = (
    "applypatch-msg", "pre-applypatch", "post-applypatch", "pre-commit", "pre-merge-commit",
    "prepare-commit-msg", "commit-msg", "post-commit", "pre-rebase", "post-checkout",
    "post-merge", "pre-push", "pre-auto-gc", "post-rewrite", "reference-transaction",
    "post-index-change",
)  # fmt: skip


def logging_hooks(hooks: Path, log: Path) -> None:
    """Every client hook in the directory `hooks`, each appending `<name> <its directory>` to
    `log` and letting git go on; reference-transaction only for the transaction's end."""
    hooks.mkdir(parents=True, exist_ok=True)
    for name in CLIENT_HOOKS:
        only = '[ "$1" = committed ] || exit 0\n' if name == "reference-transaction" else ""
        script = f'#!/bin/sh\n{only}echo "{name} $(pwd)" >> "{log}"\nexit 0\n'
        (hooks / name).write_text(script, encoding="utf-8")
        (hooks / name).chmod(0o755)


def hooks_run(log: Path) -> list[tuple[str, str]]:
    """(hook, directory) of each hook run that `logging_hooks` logged, in order."""
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [(name, where) for name, _, where in (ln.partition(" ") for ln in lines)]
