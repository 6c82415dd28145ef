"""Merge conflicts resolved by the agents (docs/workspaces.md, "Conflicts"), on a repository of
the hard cases, with real `tf-fsm ralph --workers 3` processes, the fake agent as a real
process (tests/fake_agent.py) and a real pytest gate.

The repository: a small Python project whose test suite has one test that fails before any
ticket runs, and six tickets, all ready at once:

- t1 and t2 add an entry to the same list in src/notes.py (the same hunk: a content conflict);
- t3 renames src/util.py to src/helpers.py, t4 adds a function to src/util.py (a rename beside
  an edit of the renamed file) and, on its first try, breaks another function's test, which
  the gate catches and the fixer puts right;
- t5 moves legacy_fn from src/legacy.py into src/core.py, deleting src/legacy.py; t6 changes
  what legacy_fn returns in src/legacy.py (a delete beside an edit: modify/delete).

Run 1, a resolving agent: its `resolve` edits keep both sides (both entries; legacy_fn moved
and changed). Budget: every ticket closed, no human step, every ticket's intended change on
main, no conflict marker, `git status` clean, no worktree, ticket branch or kept ref left.
Run 2, an agent that cannot resolve (it leaves the markers): every ticket that conflicted ends
merge_conflict, and nothing is lost (each one's branch still holds its whole change, main the
others'). Run 3: one ticket that does not conflict, run with workspace.conflicts.mode agent
and human, its git processes counted (a `git` first on PATH that logs each one): the
resolution step adds none. Run 4: the loop's rule that keeps apart tickets known to change the
same files (tests/e2e/test_conflict_overlap.py's backlog), on and off: the conflicts and
resolutions each way, and the wall time.

    python benchmarks/bench_conflicts.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from _budget import CHECKOUT, budget

sys.path.append(str(CHECKOUT))
from tests.conftest import tk_ticket
from tests.gitrepo import GIT_ENV

AGENT = CHECKOUT / "tests" / "fake_agent.py"
TICKETS = ("t1", "t2", "t3", "t4", "t5", "t6")
NOTES_BASE = 'NOTES = [\n    "base",\n]\n'
NOTES_BOTH = 'NOTES = [\n    "base",\n    "from t1",\n    "from t2",\n]\n'
UTIL = (
    "def shout(text):\n    return text.upper()\n\n\n"
    "def quote(text):\n    return f'\"{text}\"'\n\n\n"
    "def strip(text):\n    return text.strip()\n"
)
UTIL_WHISPER = UTIL + "\n\ndef whisper(text):\n    return text.lower()\n"
UTIL_BROKEN = UTIL_WHISPER.replace("return text.upper()", "return text")
CORE = 'def core_fn():\n    return "core"\n'
CORE_MOVED = CORE + '\n\ndef legacy_fn():\n    return "old"\n'
CORE_BOTH = CORE + '\n\ndef legacy_fn():\n    return "new"\n'
FILES = {
    "pytest.ini": "[pytest]\npythonpath = .\n",
    "src/__init__.py": "",
    "src/notes.py": NOTES_BASE,
    "src/util.py": UTIL,
    "src/legacy.py": 'def legacy_fn():\n    return "old"\n',
    "src/core.py": CORE,
    "tests/test_util.py": "from src.util import shout\n\n\ndef test_shout():\n"
    "    assert shout('a') == 'A'\n",
    "tests/test_known.py": "def test_known_failure():\n    assert 1 == 2  # broken before\n",
}


def write(rule_file: str, text: str, **more: Any) -> dict[str, Any]:
    return {"file": rule_file, "text": text, "mode": "write", **more}


def plan(resolving: bool) -> dict[str, Any]:
    edits = [
        write(
            "src/notes.py",
            NOTES_BASE.replace("]", '    "from t1",\n]'),
            phase="implement",
            ticket="t1",
        ),
        write(
            "src/notes.py",
            NOTES_BASE.replace("]", '    "from t2",\n]'),
            phase="implement",
            ticket="t2",
        ),
        {"phase": "implement", "ticket": "t3", "file": "src/util.py", "mode": "delete"},
        write("src/helpers.py", UTIL, phase="implement", ticket="t3"),
        write(
            "tests/test_util.py",
            "from src.helpers import shout\n\n\ndef test_shout():\n    assert shout('a') == 'A'\n",
            phase="implement",
            ticket="t3",
        ),
        write("src/util.py", UTIL_BROKEN, phase="implement", ticket="t4", attempt=1),
        write("src/util.py", UTIL_WHISPER, phase="fix", ticket="t4"),
        {"phase": "implement", "ticket": "t5", "file": "src/legacy.py", "mode": "delete"},
        write("src/core.py", CORE_MOVED, phase="implement", ticket="t5"),
        write(
            "src/legacy.py", 'def legacy_fn():\n    return "new"\n', phase="implement", ticket="t6"
        ),
    ]
    if resolving:
        for tid in ("t1", "t2"):
            edits.append(write("src/notes.py", NOTES_BOTH, phase="resolve", ticket=tid))
        for tid in ("t5", "t6"):
            edits.append(
                {"phase": "resolve", "ticket": tid, "file": "src/legacy.py", "mode": "delete"}
            )
            edits.append(write("src/core.py", CORE_BOTH, phase="resolve", ticket=tid))
    # t4's first try breaks test_shout: the gate's feedback round sends the fixer back
    return {"edits": edits, "pause": [{"phase": "implement", "seconds": 0.3}]}


def settings(extra: dict[str, Any] | None = None) -> dict[str, Any]:
    gate = {
        "name": "tests",
        "command": [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        "timeoutSeconds": 120,
    }
    base: dict[str, Any] = {
        "workflow": {
            "failOn": ["Critical", "Major"],
            "enableResearcher": False,
            "enableReviewers": ["reviewer-general"],
            "enableCloser": False,
            "qualityGates": [gate],
            "escalation": {"enabled": True, "maxRetries": 2},
        },
        "executor": {
            "kind": "command",
            "command": [sys.executable, str(AGENT)],
            "timeoutSeconds": 120,
        },
        "workspace": {"mode": "worktree"},
    }
    for key, value in (extra or {}).items():
        base[key] = {**base.get(key, {}), **value}
    return base


class Project:
    def __init__(
        self,
        root: Path,
        tickets: tuple[str, ...],
        files: dict[str, str],
        conf: dict[str, Any],
        agent_plan: dict[str, Any],
    ) -> None:
        self.root = root
        root.mkdir(parents=True)
        self.env = {
            **os.environ,
            **GIT_ENV,
            "TF_FSM_ROOT": str(root),
            "FAKE_AGENT_PLAN": str(root.parent / "plan.json"),
            "FAKE_AGENT_LOG": str(root.parent / "calls.jsonl"),
        }
        (root.parent / "plan.json").write_text(json.dumps(agent_plan))
        self.cli("init")
        (root / ".tf/config/settings.json").write_text(json.dumps(conf, indent=2))
        for tid in tickets:
            (root / ".tickets" / f"{tid}.md").write_text(tk_ticket(tid, f"Ticket {tid}", tags="[]"))
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.git("init", "-q", "-b", "main")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "initial")

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "tf_fsm", *args],
            cwd=self.root,
            env=self.env,
            capture_output=True,
            text=True,
        )

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.root, env=self.env, check=True, capture_output=True, text=True
        ).stdout.strip()

    def events(self, tid: str, name: str) -> list[dict[str, Any]]:
        path = self.root / ".tf/knowledge/tickets" / tid / "events.jsonl"
        if not path.exists():
            return []
        lines = (json.loads(ln) for ln in path.read_text().splitlines() if ln.strip())
        return [e for e in lines if e["event"] == name]

    def attempts(self, tid: str) -> list[dict[str, Any]]:
        path = self.root / ".tf/knowledge/tickets" / tid / "retry-state.json"
        return json.loads(path.read_text())["attempts"] if path.exists() else []

    def status(self) -> dict[str, dict[str, Any]]:
        out = self.cli("status", "--json").stdout
        return {row["ticket"]: row for row in map(json.loads, out.splitlines())}

    def show(self, spec: str) -> str | None:
        done = subprocess.run(
            ["git", "show", spec], cwd=self.root, env=self.env, capture_output=True, text=True
        )
        return done.stdout if done.returncode == 0 else None


def figures(proj: Project) -> dict[str, Any]:
    """The run's figures: a human step is a ticket left for a person; an attempt is wasted
    when it did not close its ticket (each ticket needs one)."""
    rows = proj.status()
    attempts = {t: len(proj.attempts(t)) for t in rows}
    closed = [t for t, r in rows.items() if r["state"] == "closed"]
    started = sum(len(proj.events(t, "ResolutionStarted")) for t in rows)
    passed = sum(sum(e["passed"] for e in proj.events(t, "ResolutionFinished")) for t in rows)
    return {
        "tickets": len(rows),
        "closed": len(closed),
        "human steps": len(rows) - len(closed),
        "attempts per closed ticket": round(
            sum(attempts[t] for t in closed) / max(1, len(closed)), 2
        ),
        "attempts wasted": sum(attempts.values()) - len(closed),
        "resolutions tried": started,
        "resolutions passed": passed,
    }


def intended(proj: Project, ref: str = "main") -> dict[str, bool]:
    """Each ticket's intended change, as `ref` has it (on main, a resolution's result: t4's
    function in t3's renamed file, t6's change in t5's moved function)."""
    notes = proj.show(f"{ref}:src/notes.py") or ""
    helpers = proj.show(f"{ref}:src/helpers.py") or ""
    core = proj.show(f"{ref}:src/core.py") or ""
    legacy = proj.show(f"{ref}:src/legacy.py")
    return {
        "t1": '"from t1"' in notes,
        "t2": '"from t2"' in notes,
        "t3": bool(helpers) and proj.show(f"{ref}:src/util.py") is None,
        "t4": "def whisper" in (helpers or proj.show(f"{ref}:src/util.py") or ""),
        "t5": legacy is None and "def legacy_fn" in core,
        "t6": 'return "new"' in (core if legacy is None else legacy),
    }


def leftovers(proj: Project) -> dict[str, Any]:
    worktrees = proj.git("worktree", "list", "--porcelain").count("worktree ") - 1
    return {
        "status": proj.git("status", "--porcelain"),
        "worktrees": worktrees,
        "branches": proj.git("branch", "--list", "tf/*"),
        "refs": proj.git("for-each-ref", "--format=%(refname)", "refs/tf/"),
        "markers": subprocess.run(
            ["git", "grep", "-n", "-E", "^(<<<<<<<|>>>>>>>) ", "main"],
            cwd=proj.root,
            capture_output=True,
            text=True,
        ).stdout,
    }


def main_suite_passes(proj: Project, where: Path) -> str:
    """pytest on main's tree: only the test that failed before any ticket may fail."""
    shutil.rmtree(where, ignore_errors=True)
    proj.git("worktree", "add", "-q", "--detach", str(where), "main")
    try:
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
            cwd=where,
            capture_output=True,
            text=True,
        )
    finally:
        proj.git("worktree", "remove", "--force", str(where))
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr


def resolving_run(tmp: Path) -> None:
    proj = Project(tmp / "resolving" / "repo", TICKETS, FILES, settings(), plan(True))
    started = time.perf_counter()
    done = proj.cli("ralph", "--workers", "3")
    wall = time.perf_counter() - started
    fig, want, left = figures(proj), intended(proj), leftovers(proj)
    suite = main_suite_passes(proj, tmp / "resolving" / "check")
    print(f"resolving agent ({wall:.1f} s): {json.dumps(fig)}")
    print(f"  intended changes on main: {want}; main's suite: {suite}")
    ok = (
        done.returncode == 0
        and fig["closed"] == len(TICKETS)
        and fig["human steps"] == 0
        and all(want.values())
        and not any(left.values())
        and "1 failed" in suite
    )
    budget(
        "every ticket closed, no human step, every change on main, nothing left",
        0 if ok else 1,
        0,
        f"{fig}; leftovers {left}; ralph exit {done.returncode}",
    )


def unresolving_run(tmp: Path) -> None:
    proj = Project(tmp / "unresolving" / "repo", TICKETS, FILES, settings(), plan(False))
    proj.cli("ralph", "--workers", "3")
    rows, fig = proj.status(), figures(proj)
    conflicted = [t for t in TICKETS if proj.events(t, "MergeRefused")]
    on_main = intended(proj)
    lost = [t for t in TICKETS if rows[t]["state"] == "closed" and not on_main[t]]
    lost += [t for t in conflicted if not intended(proj, f"tf/{t}")[t]]
    ended = all(rows[t].get("failureClass") == "merge_conflict" for t in conflicted)
    print(f"agent that cannot resolve: {json.dumps(fig)}; conflicted {conflicted}")
    ok = bool(conflicted) and ended and not lost and fig["human steps"] == len(conflicted)
    budget(
        "a failed resolution ends merge_conflict and loses nothing",
        0 if ok else 1,
        0,
        f"conflicted {conflicted}, all merge_conflict {ended}, lost {lost}",
    )


def git_shim(tmp: Path) -> tuple[Path, Path]:
    shim_dir, log = tmp / "shim", tmp / "git.log"
    shim_dir.mkdir()
    real = shutil.which("git")
    (shim_dir / "git").write_text(f'#!/bin/sh\nprintf "%s\\n" "$1" >> {log}\nexec {real} "$@"\n')
    (shim_dir / "git").chmod(0o755)
    return shim_dir, log


def git_count(tmp: Path, mode: str) -> int:
    files = {"a.txt": "a\n"}
    one = {"edits": [write("b.txt", "b", phase="implement")]}
    conf = settings({"workspace": {"mode": "worktree", "conflicts": {"mode": mode}}})
    conf["workflow"]["qualityGates"] = []
    proj = Project(tmp / mode / "repo", ("t1",), files, conf, one)
    shim, log = git_shim(tmp / mode)
    proj.env["PATH"] = f"{shim}{os.pathsep}{proj.env['PATH']}"
    done = proj.cli("run", "t1")
    assert done.returncode == 0, done.stderr
    return len(log.read_text().splitlines())


def overlap_run(tmp: Path, avoid: bool) -> tuple[float, int, int]:
    from tests.e2e.test_conflict_overlap import SHARED, overlap_plan
    from tests.e2e.workspace_project import BASE_SETTINGS

    conf = settings({"workspace": {"mode": "worktree", "conflicts": {"avoidOverlap": avoid}}})
    conf["workflow"] = BASE_SETTINGS["workflow"]
    conf["metaModels"] = BASE_SETTINGS["metaModels"]
    agent_plan = overlap_plan()
    name = "apart" if avoid else "side-by-side"
    proj = Project(tmp / name / "repo", ("pt-1", "pt-2"), {"shared.txt": SHARED}, conf, agent_plan)
    started = time.perf_counter()
    proj.cli("ralph", "--workers", "2")
    wall = time.perf_counter() - started
    refused = sum(len(proj.events(t, "MergeRefused")) for t in ("pt-1", "pt-2"))
    resolved = sum(len(proj.events(t, "ResolutionStarted")) for t in ("pt-1", "pt-2"))
    return wall, refused, resolved


def main() -> int:
    tmp = Path(tempfile.mkdtemp(prefix="tf-fsm-bench-conflicts-"))
    try:
        resolving_run(tmp)
        unresolving_run(tmp)
        agent, human = git_count(tmp, "agent"), git_count(tmp, "human")
        print(
            f"git processes of a ticket that does not conflict: mode agent {agent}, "
            f"mode human {human} (ratio {agent / human:.2f})"
        )
        budget(
            "the resolution step adds no git work to a ticket that does not conflict",
            agent - human,
            0,
            f"{agent} against {human} git processes",
        )
        apart, side = overlap_run(tmp, True), overlap_run(tmp, False)
        print(
            f"tickets known to change the same file: kept apart {apart[0]:.1f} s, "
            f"{apart[1]} refused merges, {apart[2]} resolutions; side by side "
            f"{side[0]:.1f} s, {side[1]} refused merges, {side[2]} resolutions "
            f"(wall ratio {apart[0] / side[0]:.2f})"
        )
        budget(
            "kept apart, the overlapping tickets do not conflict",
            apart[1] + apart[2],
            0,
            f"{apart[2]} resolutions kept apart, {side[2]} side by side",
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
