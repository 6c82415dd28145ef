"""The git CLI, run through the project's one subprocess door (tf_fsm.process.door).

tf_fsm uses the user's own `git`, so worktrees, rebases and merges behave exactly as the
user's git does, with the user's configuration. It sets nothing in any git config: what a
command needs (no prompt, no editor, C locale for the messages it parses, no hooks, an
identity when the user has none) goes in that command's environment only.

The user's hooks run only where a commit of theirs would run them: the commit that merges a
ticket into the base branch (`Git.with_hooks`, docs/workspaces.md "Hooks"). Every other
command is tf_fsm's own bookkeeping on its own branch, worktrees and refs, and runs none.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from tf_fsm.errors import GitError, WorkspaceError
from tf_fsm.process.door import ProcessResult, run_process

#: the identity of tf_fsm's commits when the user's git has none configured (no config is
#: written: it is passed to the commit command's environment)
FALLBACK_NAME, FALLBACK_EMAIL = "tf-fsm", "tf-fsm@localhost"
#: no git command tf_fsm runs should take long; a hung one (a credential prompt, a hook
#: waiting on a terminal) is ended rather than waited on forever
TIMEOUT_SECONDS = 600.0

_QUIET_ENV = {
    "GIT_TERMINAL_PROMPT": "0",  # never ask for a password on a terminal tf_fsm owns
    "GIT_EDITOR": "true",  # a merge or rebase never opens an editor
    "GIT_SEQUENCE_EDITOR": "true",
    "GIT_MERGE_AUTOEDIT": "no",
    "LC_ALL": "C",  # tf_fsm reads a few of git's messages (conflicts)
    "LANGUAGE": "C",
}
#: what else than a working tree's `.git` decides where git finds its directories
_LOCATING_ENV = ("GIT_DIR", "GIT_COMMON_DIR", "GIT_WORK_TREE")
#: a branch's name tf_fsm reads from a loose ref file itself (anything else asks git): plain
#: components, none starting with a dot (no `..`; reftable's `refs/heads/.invalid` neither)
_COMPONENT = r"[A-Za-z0-9_](?:[A-Za-z0-9_.-]*(?<!\.lock))?"  # `x.lock`: a lock file
_PLAIN_BRANCH = re.compile(rf"refs/heads/(?:{_COMPONENT}/)*{_COMPONENT}")
_OBJECT_ID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
#: what git said where a working tree is (its top, own git directory, common git directory),
#: by what decides it (see `_identity`): asked once per tree and process, not per operation
_WHERE: dict[tuple[object, ...], tuple[Path | None, Path, Path]] = {}
#: where git looks for the user's hooks, by working tree and configuration
_HOOKS: dict[tuple[object, ...], Path] = {}
#: where tf_fsm's own git commands look for hooks (core.hooksPath): a path no file can be
#: under, so that none is found
NO_HOOKS = os.devnull


@dataclass(frozen=True)
class Git:
    """git in one working tree (`cwd`): the project root or a ticket's worktree. Its commands
    run no hook unless `hooks` (see `with_hooks`)."""

    cwd: Path
    env: Mapping[str, str] = field(default_factory=dict)
    hooks: bool = False

    def with_hooks(self) -> Git:
        """The same git running the user's hooks: for the commit that merges a ticket into
        its base branch, and nothing else."""
        return replace(self, hooks=True)

    def run(
        self,
        *args: str,
        check: bool = True,
        stdin: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float | None = TIMEOUT_SECONDS,
        keep: int | None = None,
    ) -> ProcessResult:
        """`git <args>` in `cwd`; raises GitError when it fails and `check` is set. `keep`:
        only the first and last `keep` bytes of each stream are kept (tf_fsm.process.door)."""
        full_env = {**os.environ, **_QUIET_ENV, **self.env, **(env or {})}
        if not self.hooks:
            full_env.update(_without_hooks(full_env))
        # git ended early (Ctrl-C, the run stopping) is killed, not asked to stop: what a kill
        # leaves, tf_fsm repairs (tf_fsm.workspace.removal.clear, stale locks), while git's
        # own clean-up on SIGTERM races the processes it started: `git worktree add` deletes
        # its registry entry, then its tree, as the checkout it runs still writes there
        result = run_process(
            ["git", *args],
            cwd=self.cwd,
            env=full_env,
            stdin=stdin,
            timeout=timeout,
            keep=keep,
            grace=0,
        )
        if check and (result.timed_out or result.exit_code != 0):
            raise GitError(args, self.cwd, result.exit_code, said(result))
        return result

    def out(self, *args: str, stdin: str | None = None) -> str:
        """The command's standard output, its trailing newline removed."""
        return self.run(*args, stdin=stdin).stdout.rstrip("\n")

    def ok(self, *args: str) -> bool:
        """Did `git <args>` exit 0 (a question such as `merge-base --is-ancestor`)?"""
        return self.run(*args, check=False).exit_code == 0

    # -- questions every caller asks ------------------------------------------------------

    def rev(self, name: str) -> str | None:
        """The commit `name` points at, or None when there is no such ref or commit. HEAD and
        a branch (`refs/heads/...`) are read from their loose ref file when git's own files
        say it plainly; anything else (a packed ref, reftable, a detached HEAD) asks git."""
        loose = self._loose(name)
        if loose is not None:
            return loose
        result = self.run("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", check=False)
        return result.stdout.strip() or None if result.exit_code == 0 else None

    def head_branch(self) -> str | None:
        """The branch checked out here, or None on a detached HEAD or an unborn branch."""
        named = self._head_ref()
        if named is not None and self._loose(named) is not None:
            return named.removeprefix("refs/heads/")
        result = self.run("symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        name = result.stdout.strip()
        return name if result.exit_code == 0 and name and self.rev("HEAD") else None

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return self.ok("merge-base", "--is-ancestor", ancestor, descendant)

    def git_dir(self) -> Path:
        """This working tree's own git directory (a worktree's is under the common one)."""
        return self.dirs()[0]

    def common_dir(self) -> Path:
        """The repository's git directory, shared by all its worktrees."""
        return self.dirs()[1]

    def dirs(self) -> tuple[Path, Path]:
        """`git_dir()` and `common_dir()`, asked of git once per working tree and process."""
        _top, own, common = self._where()
        return own, common

    def top(self) -> Path | None:
        """The top of the working tree `cwd` is in (None: git says it is in none)."""
        return self._where()[0]

    def _where(self) -> tuple[Path | None, Path, Path]:
        key = self._identity()
        known = _WHERE.get(key) if key is not None else None
        if known is not None:
            return known
        asked = self.run(
            "rev-parse", "--git-dir", "--git-common-dir", "--show-toplevel", check=False
        )
        lines = asked.stdout.split("\n")
        if asked.exit_code == 0 and len(lines) >= 3 and lines[2]:
            top: Path | None = Path(lines[2])
        else:  # no working tree (a git directory): its directories are still git's answer
            lines, top = self.out("rev-parse", "--git-dir", "--git-common-dir").split("\n"), None
        where = (top, (self.cwd / lines[0]).resolve(), (self.cwd / lines[1]).resolve())
        if key is not None:
            _WHERE[key] = where
        return where

    def hook_present(self, name: str) -> bool:
        """Is there a file for the user's hook `name` where git looks for hooks (the
        repository's hooks directory, or the `core.hooksPath` its config names)? Executable
        or not: `git hook run` says itself what it does with one that is not."""
        key = self._identity()
        if key is not None:
            key = (*key, *self._config_stamp())
        where = _HOOKS.get(key) if key is not None else None
        if where is None:
            where = self.cwd / self.with_hooks().out("rev-parse", "--git-path", "hooks")
            if key is not None:
                _HOOKS[key] = where
        return os.path.lexists(where / name)

    def _config_stamp(self) -> tuple[object, ...]:
        """What a change of git's configuration changes: the config files' contents (a digest
        of each; git rewrites a file whole, also when nothing in it changed), and the
        settings given in the environment."""
        home = Path(os.environ.get("HOME", "/"))
        xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
        files = (self.common_dir() / "config", home / ".gitconfig", xdg / "git" / "config")
        stamps: list[object] = []
        for path in (*files, Path("/etc/gitconfig")):
            try:
                stamps.append(hashlib.sha256(path.read_bytes()).digest())
            except OSError:
                stamps.append(None)
        env = {**os.environ, **self.env}
        return (*stamps, *sorted((k, v) for k, v in env.items() if k.startswith("GIT_CONFIG")))

    def _identity(self) -> tuple[object, ...] | None:
        """What decides git's answer to where this tree's git directories are: the tree, its
        `.git` (a worktree's `.git` file names its own directory) and the environment's
        GIT_DIR and the like. None when `cwd` has no `.git` (git would look above it)."""
        dot = self.cwd / ".git"
        try:
            info = os.lstat(dot)
            named = dot.read_text(encoding="utf-8") if stat.S_ISREG(info.st_mode) else ""
        except (OSError, UnicodeDecodeError):
            return None
        env = {**os.environ, **self.env}
        return (str(self.cwd), info.st_dev, info.st_ino, named, *map(env.get, _LOCATING_ENV))

    def _head_ref(self) -> str | None:
        """The branch HEAD's file names (`ref: refs/heads/<name>`), when the tree's git
        directories are known already and the file says it plainly; else None."""
        key = self._identity()
        known = _WHERE.get(key) if key is not None else None
        if known is None:
            return None
        try:
            text = (known[1] / "HEAD").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None
        named = text.removeprefix("ref: ").rstrip("\n")
        return named if text.startswith("ref: ") and _PLAIN_BRANCH.fullmatch(named) else None

    def _loose(self, name: str) -> str | None:
        """The commit of HEAD or a branch from its loose ref file (git writes each whole, by
        a rename; a loose ref is the one git reads before any packed one), or None when
        that file does not say it (git then answers)."""
        if "GIT_NAMESPACE" in os.environ or "GIT_NAMESPACE" in self.env:
            return None
        ref = self._head_ref() if name == "HEAD" else name
        key = self._identity()
        known = _WHERE.get(key) if key is not None else None
        if ref is None or known is None or not _PLAIN_BRANCH.fullmatch(ref):
            return None
        try:
            sha = (known[2] / ref).read_text(encoding="ascii").rstrip("\n")
        except (OSError, UnicodeDecodeError):
            return None
        return sha if _OBJECT_ID.fullmatch(sha) else None

    def commit_env(self) -> dict[str, str]:
        """What a commit tf_fsm makes needs in its environment: an identity, when the user's
        git has none (neither configured nor in the environment)."""
        if _has_identity(self.cwd, tuple(sorted(self.env.items()))):
            return {}
        return {
            "GIT_AUTHOR_NAME": FALLBACK_NAME,
            "GIT_AUTHOR_EMAIL": FALLBACK_EMAIL,
            "GIT_COMMITTER_NAME": FALLBACK_NAME,
            "GIT_COMMITTER_EMAIL": FALLBACK_EMAIL,
        }


def _without_hooks(env: Mapping[str, str]) -> dict[str, str]:
    """What turns every hook off for a git run with `env`: core.hooksPath set to `NO_HOOKS`
    as one more command-line setting (GIT_CONFIG_COUNT, git 2.31+), after any the user set
    there. A setting of the command, never of a config file."""
    try:
        count = max(int(env.get("GIT_CONFIG_COUNT", "0")), 0)
    except ValueError:
        count = 0  # not a count: git would refuse it; this one setting replaces it
    return {
        "GIT_CONFIG_COUNT": str(count + 1),
        f"GIT_CONFIG_KEY_{count}": "core.hooksPath",
        f"GIT_CONFIG_VALUE_{count}": NO_HOOKS,
    }


@cache
def _has_identity(cwd: Path, env: tuple[tuple[str, str], ...]) -> bool:
    git = Git(cwd, dict(env))
    named = "GIT_AUTHOR_NAME" in os.environ or git.run("config", "user.name", check=False).stdout
    mailed = "GIT_AUTHOR_EMAIL" in os.environ or git.run("config", "user.email", check=False).stdout
    return bool(named and mailed)


def said(result: ProcessResult) -> str:
    """What git said about its failure: its `fatal:`/`error:` lines, else its last lines."""
    lines = [ln for ln in (result.stderr + "\n" + result.stdout).splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith(("fatal:", "error:"))]
    return "\n".join(errors or lines[-3:])


def repository_root(path: Path) -> Path | None:
    """The top of the git working tree `path` is in, or None when it is in none (or git is
    not installed)."""
    try:
        result = Git(path).run("rev-parse", "--show-toplevel", check=False)
    except FileNotFoundError:
        return None
    top = result.stdout.strip()
    return Path(top) if result.exit_code == 0 and top else None


def require_repository(root: Path, why: str) -> Git:
    """git at the project root, which must be the top of a git working tree with a commit."""
    git = Git(root)
    try:
        top = git.top()
    except (FileNotFoundError, GitError):  # no git installed, or not in a repository
        top = None
    if top is None:
        raise WorkspaceError(f"{root} is not in a git repository, so {why} cannot be used")
    if top.resolve() != root.resolve():
        raise WorkspaceError(
            f"{root} is inside the git working tree {top}, not at its top; {why} needs the "
            "project root to be the repository's top (run tf-fsm from there)"
        )
    if git.rev("HEAD") is None:
        raise WorkspaceError(f"the git repository at {root} has no commit yet; {why} needs one")
    return git


def remember_worktree(tree: Path, own: Path, common: Path) -> None:
    """Note where the worktree just made at `tree` has its git directories (git's registry
    says it: `own` is its entry), so that no git process is asked."""
    key = Git(tree)._identity()
    if key is not None:
        _WHERE[key] = (tree, own.resolve(), common.resolve())


def paths_of(output: str) -> list[str]:
    """The paths of a `-z` listing (NUL-separated)."""
    return [p for p in output.split("\0") if p]


def pathspec_excluding(paths: Sequence[str]) -> list[str]:
    """A pathspec of the whole tree except `paths` (git's `:(exclude)` magic)."""
    return [".", *(f":(exclude,literal){p}" for p in paths)]


def literal(paths: Sequence[str]) -> list[str]:
    """`paths` as a pathspec that takes every character literally."""
    return [f":(literal){p}" for p in paths]


def under(path: str, tops: Sequence[str]) -> bool:
    """Is the repository path `path` one of `tops` or inside one of them?"""
    return any(path == t or path.startswith(t.rstrip("/") + "/") for t in tops)


#: the directories in a git directory that say a rebase is in progress there
REBASE_STATES = ("rebase-merge", "rebase-apply")


def unmerged(git: Git) -> list[str]:
    """The paths git's index holds unmerged (a conflict of a merge or rebase under way)."""
    return paths_of(git.out("diff", "--name-only", "--diff-filter=U", "-z"))


def rebase_in_progress(own: Path) -> bool:
    """Is a rebase in progress in the working tree whose own git directory is `own`?"""
    return any((own / state).is_dir() for state in REBASE_STATES)
