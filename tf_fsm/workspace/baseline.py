"""The gate baseline (docs/gates.md, "The baseline: what a ticket makes worse"): each required
quality gate run once on a base commit, as committed, cached by the commit's sha. The rule that
judges a ticket's failing gate against it is tf_fsm.workspace.judgement.

A test that already fails on the base (broken before the ticket began) does not block the
ticket: only what the ticket makes worse does. That is judged test by test, from a JUnit
report of each side: a failing gate without a report on both sides blocks, even when it fails
on the base too (its failure there may hide a new one). The base result is computed in a
detached worktree of the commit under `.tf/ralph/baseline/<sha>/`, one process at a time per
commit (a flock), and kept in `.tf/ralph/baseline/<sha>.json`, keyed per gate by a digest of
what makes its result (command, cwd, junitXml, timeout, the report tf_fsm asks pytest for), so
a changed gate runs again.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from tf_fsm._json_input import load_json
from tf_fsm.errors import GitError, WorkspaceError
from tf_fsm.fs.atomic import atomic_write_json, exclusive, make_dirs
from tf_fsm.fs.confine import check_within
from tf_fsm.settings.gate_reports import asks_for_report
from tf_fsm.settings.load import QualityGate
from tf_fsm.workspace.git import Git
from tf_fsm.workspace.judgement import BaseResult
from tf_fsm.workspace.locks import worktree_registry

#: 2: a gate without junitXml is run on the base with the report tf_fsm asks pytest for (a
#: version 1 file holds whole-gate results, which no longer judge anything)
CACHE_VERSION = 2
#: a cache file larger than this is not read (a report of every test of a huge suite is less)
MAX_CACHE_BYTES = 256 * 1024 * 1024
_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class GateRun(Protocol):
    """What a gate's run says (tf_fsm.engine.gates.GateResult)."""

    @property
    def passed(self) -> bool: ...
    @property
    def exit_code(self) -> int | None: ...
    @property
    def summary(self) -> str: ...
    @property
    def failing_tests(self) -> frozenset[str] | None: ...
    @property
    def error(self) -> str | None: ...


#: runs one gate with its cwd relative to the given tree, as a ticket's gate runs
RunGate = Callable[[QualityGate, Path], GateRun]


def baseline_dir(root: Path) -> Path:
    return root / ".tf" / "ralph" / "baseline"


def gate_digest(gate: QualityGate) -> str:
    """What makes a gate's result on a commit: a change to any of it runs the gate again."""
    asked = "PYTEST_ADDOPTS --junitxml" if asks_for_report(gate) else None
    key = [gate.command, gate.cwd, gate.junitXml, gate.timeoutSeconds, asked]
    return hashlib.sha256(json.dumps(key).encode("utf-8")).hexdigest()


def baseline(
    root: Path,
    sha: str,
    gates: Sequence[QualityGate],
    run: RunGate,
    note: Callable[[str], None],
) -> dict[str, BaseResult]:
    """Each required gate's result on commit `sha` of the repository at `root` (the project
    root), computed once per commit and gate and then read from the cache. Concurrent callers
    on the same commit compute it once: the second waits for the first and reads its file."""
    sha = full_sha(root, sha)
    required = [g for g in gates if g.required]
    if not required:
        return {}
    place = baseline_dir(root)
    cache = place / f"{sha}.json"
    found = matching(load_cache(cache, sha)[0], sha, required)
    if any(g.name not in found for g in required):
        make_dirs(place, within=root)
        with exclusive(place / f"{sha}.lock", within=root):
            entries, problem = load_cache(cache, sha)  # computed meanwhile?
            if problem:
                note(f"baseline: {cache} {problem}; computing it again")
            found = matching(entries, sha, required)
            missing = [g for g in required if g.name not in found]
            if missing:
                computed = _compute(root, sha, missing, run, note)
                found.update(computed)
                entries.update(_entries_of(missing, computed))
                doc = {"version": CACHE_VERSION, "sha": sha, "gates": entries}
                atomic_write_json(cache, doc, within=root)
    return {g.name: found[g.name] for g in required}


def full_sha(root: Path, sha: str) -> str:
    """The commit's full sha (the cache's file name), asking git only for an abbreviation."""
    if _FULL_SHA.fullmatch(sha):
        return sha
    resolved = Git(root).rev(sha)
    if resolved is None:
        raise WorkspaceError(f"baseline: {sha!r} is not a commit of the repository at {root}")
    return resolved


# -- the cache ------------------------------------------------------------------------------

#: a cache file's entries: gate name -> {digest, passed, exitCode, summary, failingTests}
Entries = dict[str, dict[str, Any]]


def load_cache(cache: Path, sha: str) -> tuple[Entries, str | None]:
    """The cache file's entries, and what is wrong with the file when it cannot be used
    (None when it is fine or absent: no entries)."""
    try:
        if cache.stat().st_size > MAX_CACHE_BYTES:
            return {}, f"is larger than {MAX_CACHE_BYTES} bytes"
        data = load_json(cache.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}, None
    except (OSError, ValueError) as exc:
        return {}, f"cannot be read ({exc})"
    version = data.get("version") if isinstance(data, dict) else None
    if isinstance(version, int) and version != CACHE_VERSION:
        return {}, f"is of another cache version ({version}, not {CACHE_VERSION})"
    ok = (
        isinstance(data, dict)
        and version == CACHE_VERSION
        and data.get("sha") == sha
        and isinstance(data.get("gates"), dict)
    )
    if not ok or not all(_entry_ok(e) for e in data["gates"].values()):
        return {}, "is not a baseline cache of this commit"
    return dict(data["gates"]), None


def matching(entries: Entries, sha: str, gates: Sequence[QualityGate]) -> dict[str, BaseResult]:
    """The cached results of `gates` whose digest still matches their settings."""
    return {
        g.name: _result(g.name, sha, entry)
        for g in gates
        if (entry := entries.get(g.name)) is not None and entry["digest"] == gate_digest(g)
    }


def _entry_ok(entry: Any) -> bool:
    if not isinstance(entry, dict):
        return False
    tests = entry.get("failingTests")
    code = entry.get("exitCode")
    return (
        isinstance(entry.get("digest"), str)
        and isinstance(entry.get("passed"), bool)
        and (code is None or (isinstance(code, int) and not isinstance(code, bool)))
        and isinstance(entry.get("summary"), str)
        and (tests is None or (isinstance(tests, list) and all(isinstance(t, str) for t in tests)))
    )


def _result(name: str, sha: str, entry: Mapping[str, Any]) -> BaseResult:
    tests = entry["failingTests"]
    failing = None if tests is None else frozenset(tests)
    return BaseResult(name, entry["passed"], entry["exitCode"], failing, entry["summary"], sha)


def _entries_of(gates: Sequence[QualityGate], results: Mapping[str, BaseResult]) -> Entries:
    """The cache entries of the gates that started: one that could not start on the base (a
    program missing from PATH) may start later, and says nothing of the commit."""
    return {
        g.name: {
            "digest": gate_digest(g),
            "passed": r.passed,
            "exitCode": r.exit_code,
            "summary": r.summary,
            "failingTests": None if r.failing_tests is None else sorted(r.failing_tests),
        }
        for g in gates
        if (r := results[g.name]).started
    }


# -- computing it in a worktree of the commit -----------------------------------------------


def _compute(
    root: Path, sha: str, gates: Sequence[QualityGate], run: RunGate, note: Callable[[str], None]
) -> dict[str, BaseResult]:
    """Run `gates` in a detached worktree of `sha`, removed afterwards. A computation killed
    half-way leaves that worktree, and no cache entry: it is removed here, the next time."""
    git, tree = Git(root), baseline_dir(root) / sha
    common = git.common_dir()
    check_within(tree, root)
    with worktree_registry(common):
        _clear_leftover(git, tree, note)
        names = ", ".join(g.name for g in gates)
        note(f"baseline: running {names} on the base commit {sha[:12]}, once for this commit")
        _add_worktree(git, tree, sha)
    try:
        results = {}
        for gate in gates:
            r = run(gate, tree)
            results[gate.name] = BaseResult(
                gate.name,
                r.passed,
                r.exit_code,
                r.failing_tests,
                r.summary,
                sha,
                started=r.error is None,
            )
        return results
    finally:
        with worktree_registry(common):
            _remove_worktree(git, tree, note)


def _add_worktree(git: Git, tree: Path, sha: str) -> None:
    try:
        git.run("worktree", "add", "--detach", str(tree), sha)
    except GitError:
        # git keeps a killed `worktree add` locked ("initializing") even once its directory
        # is gone, and refuses the path until the entry is unlocked and pruned
        git.run("worktree", "unlock", str(tree), check=False)
        git.run("worktree", "prune")
        git.run("worktree", "add", "--detach", str(tree), sha)


def _clear_leftover(git: Git, tree: Path, note: Callable[[str], None]) -> None:
    """Remove the worktree a killed computation left (it holds the commit as committed and
    the gates' output: nothing that is not in git). `-f -f`: git leaves a worktree whose
    `worktree add` was killed locked."""
    if not (tree.exists() or tree.is_symlink()):
        return
    note(f"baseline: removing {tree}, left by a baseline computation that was stopped")
    git.run("worktree", "remove", "--force", "--force", str(tree), check=False)
    _remove_dir(tree)
    git.run("worktree", "prune")


def _remove_worktree(git: Git, tree: Path, note: Callable[[str], None]) -> None:
    result = git.run("worktree", "remove", "--force", str(tree), check=False)
    if result.exit_code != 0 or tree.exists():
        _remove_dir(tree)
        if tree.exists():
            note(f"baseline: could not remove {tree}; the next computation will try again")
    git.run("worktree", "prune", check=False)


def _remove_dir(tree: Path) -> None:
    if tree.is_symlink():
        tree.unlink()
    elif tree.exists():
        shutil.rmtree(tree, ignore_errors=True)


# -- the base commit of a tree, and the lazily computed lookup --------------------------------


def base_of(tree: Path) -> tuple[Path, str] | None:
    """(the project root, the base commit) to judge the gates of `tree` against: for the
    repository's main worktree its HEAD commit; for a ticket's worktree the merge-base of its
    HEAD and the branch checked out at the main worktree. None outside a git repository, or
    when `tree` is not the top of one of its worktrees."""
    try:
        listing = Git(tree).run("worktree", "list", "--porcelain", check=False)
    except FileNotFoundError:  # no git installed
        return None
    blocks = [b.splitlines() for b in listing.stdout.split("\n\n") if b.strip()]
    if listing.exit_code != 0 or not blocks:
        return None
    fields = [_fields(b) for b in blocks]
    here = tree.resolve()
    mine = next((f for f in fields if Path(f.get("worktree", "")).resolve() == here), None)
    main = fields[0]
    if mine is None or "HEAD" not in main or "HEAD" not in mine:
        return None
    root = Path(main["worktree"])
    if mine is main:
        return root, main["HEAD"]
    against = main.get("branch", main["HEAD"])
    found = Git(tree).run("merge-base", "HEAD", against, check=False)
    sha = found.stdout.strip()
    return (root, sha) if found.exit_code == 0 and sha else None


def _fields(block: list[str]) -> dict[str, str]:
    """One worktree of `git worktree list --porcelain`: `worktree <path>`, `HEAD <sha>`,
    `branch <ref>` or `detached`."""
    return {key: value for key, _, value in (line.partition(" ") for line in block)}


#: one gate's base result, or None when there is none
Lookup = Callable[[QualityGate], "BaseResult | None"]


def lookup(
    root: Path, sha: str, gates: Sequence[QualityGate], run: RunGate, note: Callable[[str], None]
) -> Lookup:
    """A gate's base result, computed the first time it is asked for (so a ticket whose gates
    pass never runs the base) and kept for later rounds. A base that cannot be computed (git
    refuses the worktree) is noted and judged as none: the failure blocks, as without one."""
    known: dict[str, BaseResult | None] = {}

    def of(gate: QualityGate) -> BaseResult | None:
        if gate.name not in known:
            try:
                known[gate.name] = baseline(root, sha, [gate], run, note).get(gate.name)
            except (GitError, WorkspaceError) as exc:
                note(f"baseline: no base result for {gate.name} on {sha[:12]}: {exc}")
                known[gate.name] = None
        return known[gate.name]

    return of
