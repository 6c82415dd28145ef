"""The harness of the workspace end-to-end tests (docs/workspaces.md): real `tf-fsm ralph`/`run`
processes, real agent processes (tests/fake_agent.py, which edits files and never runs git)
and real git repositories. Everything is judged from the outside, by git: the base branch's
first-parent history and each merge's parents and trailers, `git status` at the root, the
worktrees, the `tf/` branches and the `refs/tf/` refs left; and by the ticket's journal.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.conftest import run_cli, tk_ticket
from tests.gitrepo import commit_all, git, status
from tf_fsm.workspace.locks import git_processes_in

AGENT = Path(__file__).resolve().parent.parent / "fake_agent.py"
STRONG = "openai-codex/gpt-5.3-codex"
#: the settings every project here starts from: the fake agent, a short lifecycle (implement,
#: one reviewer, the fixer when there are findings), escalation of the fixer to STRONG
BASE_SETTINGS: dict[str, Any] = {
    "metaModels": {"strong": {"model": STRONG, "thinking": "high"}},
    "workflow": {
        "failOn": ["Critical", "Major"],
        "enableResearcher": False,
        "enableReviewers": ["reviewer-general"],
        "enableCloser": False,
        "escalation": {"enabled": True, "maxRetries": 2, "models": {"fixer": "strong"}},
    },
    "executor": {
        "kind": "command",
        "command": [sys.executable, str(AGENT)],
        "timeoutSeconds": 60,
    },
}
#: a git log record: sha, parents, subject, and the trailers tf_fsm writes
LOG_FORMAT = (
    "%H%x00%P%x00%s%x00%(trailers:key=Tf-Ticket,valueonly)%x00"
    "%(trailers:key=Tf-Merged-Tip,valueonly)%x00%(trailers:key=Tf-Phase,valueonly)%x1e"
)


def merged_settings(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """`base` with `extra` merged in, section by section."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merged_settings(out[key], value)
        else:
            out[key] = value
    return out


class Project:
    """A project with tf_fsm's settings, tk tickets and the fake agent, in a git repository
    (or not), run with real `tf-fsm` processes."""

    def __init__(self, root: Path, tmp_path: Path) -> None:
        self.root = root
        self.agent_dir = tmp_path / "agent"
        self.agent_dir.mkdir()
        self.plan_file = self.agent_dir / "plan.json"
        self.log = self.agent_dir / "calls.jsonl"
        self.span_log = self.agent_dir / "spans.jsonl"
        self.sync = tmp_path / "sync"  # the files `pause` rules touch and wait for
        self.sync.mkdir()
        self.plan()

    # -- setup -----------------------------------------------------------------------------

    def create(
        self,
        tickets: Sequence[str],
        settings: dict[str, Any] | None = None,
        files: dict[str, str] | None = None,
        *,
        repository: bool = True,
    ) -> None:
        """`tf-fsm init`, the settings, the tickets (untagged) and `files`; with `repository`,
        all of it committed as the first commit of `main`."""
        done = run_cli("init", cwd=self.root)
        assert done.returncode == 0, done.stderr
        self.settings(settings or {})
        for tid in tickets:
            self.ticket(tid)
        for name, text in (files or {}).items():
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        if repository:
            git(self.root, "init", "-q", "-b", "main")
            commit_all(self.root, "initial")

    def settings(self, extra: dict[str, Any]) -> None:
        path = self.root / ".tf" / "config" / "settings.json"
        path.write_text(json.dumps(merged_settings(BASE_SETTINGS, extra), indent=2))

    def ticket(self, tid: str) -> None:
        text = tk_ticket(tid, title=f"Ticket {tid}", tags="[]")
        (self.root / ".tickets" / f"{tid}.md").write_text(text, encoding="utf-8")

    def plan(self, **plan: Any) -> None:
        self.plan_file.write_text(json.dumps(plan, indent=2), encoding="utf-8")

    def plan_rollback(self) -> None:
        """Attempt 1 edits a.txt in implement and fix and is blocked by a Major finding only
        the escalated fixer clears; attempt 2 pauses in its review until `go` (sync file
        `attempt-2` says it got there)."""
        major = {
            "id": "f1",
            "severity": "Major",
            "text": "`a.txt:1` - wrong",
            "reviewer": "reviewer-general",
            "fixedBy": [STRONG],
        }
        self.plan(
            findings=[major],
            edits=[
                {"phase": "implement", "file": "a.txt", "text": "implement attempt {attempt}"},
                {"phase": "fix", "file": "a.txt", "text": "fix attempt {attempt}"},
            ],
            pause=[
                {
                    "phase": "review",
                    "attempt": 2,
                    "touch": str(self.sync / "attempt-2"),
                    "until": str(self.sync / "go"),
                }
            ],
        )

    # -- running ---------------------------------------------------------------------------

    def env(self) -> dict[str, str]:
        return {
            "FAKE_AGENT_PLAN": str(self.plan_file),
            "FAKE_AGENT_LOG": str(self.log),
            "FAKE_AGENT_SPANS": str(self.span_log),
            "TF_FSM_ROOT": str(self.root),
        }

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(*args, cwd=self.root, env=self.env())

    def start(self, *args: str) -> subprocess.Popen[str]:
        """`tf-fsm <args>` started, not waited for."""
        return subprocess.Popen(
            [sys.executable, "-m", "tf_fsm", *args],
            cwd=self.root,
            env={**os.environ, **self.env()},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def start_alone(self, *args: str) -> subprocess.Popen[bytes]:
        """`tf-fsm <args>` started in a session of its own, so the test may kill its whole
        process group (a loop, its fork server and workers) and nothing else; output dropped."""
        return subprocess.Popen(
            [sys.executable, "-m", "tf_fsm", *args],
            cwd=self.root,
            env={**os.environ, **self.env()},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    def wait_for(self, name: str, proc: subprocess.Popen[str], seconds: float = 30) -> str:
        """The text of the sync file `name` once a paused agent made it."""
        path = self.sync / name
        deadline = time.monotonic() + seconds
        while not path.exists():
            if proc.poll() is not None:
                out, err = proc.communicate()
                raise AssertionError(f"tf-fsm ended ({proc.returncode}) first: {out}{err}")
            assert time.monotonic() < deadline, f"no agent reached {path}"
            time.sleep(0.02)
        return path.read_text(encoding="utf-8")

    def go(self, name: str = "go") -> None:
        (self.sync / name).write_text("go\n", encoding="utf-8")

    def review_pause(self) -> list[dict[str, Any]]:
        """A plan's `pause` rules: a reviewer touches the sync file `review`, waits for `go`."""
        until = str(self.sync / "go")
        return [{"phase": "review", "touch": str(self.sync / "review"), "until": until}]

    def run_while_a_person_commits(
        self, tid: str, name: str, text: str, message: str, seconds: float = 60
    ) -> subprocess.Popen[str]:
        """`tf-fsm run tid`; while its reviewer waits (a plan with `review_pause`), a person
        commits the file `name` holding `text` on the base branch at the root. The run,
        finished."""
        run = self.start("run", tid)
        self.wait_for("review", run)
        self.person_commits(name, text, message)
        self.go()
        run.communicate(timeout=seconds)
        return run

    def person_commits(
        self,
        name: str = "person.txt",
        text: str = "a person's change\n",
        message: str = "a person's commit",
    ) -> str:
        """A person's commit of the file `name` holding `text` on main at the root; its sha."""
        (self.root / name).write_text(text, encoding="utf-8")
        git(self.root, "add", name)
        git(self.root, "commit", "-q", "-m", message)
        return git(self.root, "rev-parse", "HEAD")

    # -- observation -----------------------------------------------------------------------

    def calls(self, **match: Any) -> list[dict[str, Any]]:
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        found = [json.loads(line) for line in lines]
        return [c for c in found if all(c[k] == v for k, v in match.items())]

    def spans(self) -> list[dict[str, Any]]:
        lines = self.span_log.read_text().splitlines() if self.span_log.exists() else []
        return [json.loads(line) for line in lines]

    def events(self, tid: str, name: str | None = None) -> list[dict[str, Any]]:
        path = self.root / ".tf" / "knowledge" / "tickets" / tid / "events.jsonl"
        evs = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        return [e for e in evs if name is None or e["event"] == name]

    def status_json(self) -> dict[str, dict[str, Any]]:
        done = self.cli("status", "--json")
        assert done.returncode == 0, done.stderr
        rows = [json.loads(line) for line in done.stdout.splitlines()]
        return {row["ticket"]: row for row in rows}

    def log_of(self, *spec: str) -> list[dict[str, Any]]:
        """`git log` records (newest first): sha, parents, subject, ticket, tip, phase."""
        out = git(self.root, "log", f"--format={LOG_FORMAT}", *spec)
        keys = ("sha", "parents", "subject", "ticket", "tip", "phase")
        records = []
        for raw in out.split("\x1e"):
            if raw.strip("\n"):
                fields = raw.strip("\n").split("\x00")
                record = dict(zip(keys, (f.strip() for f in fields), strict=True))
                records.append({**record, "parents": record["parents"].split()})
        return records

    def first_parent(self) -> list[dict[str, Any]]:
        return self.log_of("--first-parent", "main")

    def tk_status(self, tid: str, ref: str | None = None) -> str:
        """The `status:` of the tk ticket: at the root, or as committed on `ref`."""
        if ref is None:
            text = (self.root / ".tickets" / f"{tid}.md").read_text(encoding="utf-8")
        else:
            text = git(self.root, "show", f"{ref}:.tickets/{tid}.md")
        return next(ln for ln in text.splitlines() if ln.startswith("status: "))[8:]

    def worktrees(self) -> list[tuple[str, str]]:
        """(path, branch) of every working tree of the repository."""
        out = git(self.root, "worktree", "list", "--porcelain")
        found, path = [], ""
        for line in out.splitlines():
            if line.startswith("worktree "):
                path = line[len("worktree ") :]
            elif line.startswith("branch "):
                found.append((path, line[len("branch refs/heads/") :]))
        return found

    def pooled(self) -> list[str]:
        """The worktrees waiting in the pool, each detached (no branch held) and named so."""
        out = git(self.root, "worktree", "list", "--porcelain")
        found = [b.splitlines() for b in out.split("\n\n") if "\ndetached" in b]
        paths = [lines[0].removeprefix("worktree ") for lines in found]
        assert all(Path(p).name.startswith(".pool-") for p in paths), paths
        return paths

    def ticket_branches(self) -> list[str]:
        return git(self.root, "branch", "--list", "tf/*", "--format=%(refname:short)").split()

    def tf_refs(self) -> list[str]:
        return git(self.root, "for-each-ref", "--format=%(refname)", "refs/tf/").split()

    def show(self, spec: str) -> str:
        return git(self.root, "show", spec) + "\n"

    def assert_nothing_left(self, pool: int | None = None) -> None:
        """The state after a loop whose tickets all merged: a clean root, no worktree but
        those waiting in the worktree pool (detached; at most `pool`), no ticket branch, no
        ref set aside, no merge in progress."""
        assert (left := status(self.root)) == "", left
        assert self.worktrees() == [(str(self.root), "main")]
        assert pool is None or len(self.pooled()) <= pool
        assert self.ticket_branches() == []
        assert self.tf_refs() == []
        assert not (self.root / ".git" / "MERGE_HEAD").exists()
        merging = self.root / ".tf" / "ralph" / "merging"
        assert not merging.exists() or list(merging.iterdir()) == []


def changes(tree: Path) -> list[str]:
    """`git status --porcelain` lines (untracked files included), sorted, not stripped."""
    out = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"],
        cwd=tree,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return sorted(out.splitlines())


def patch_id(root: Path, sha: str) -> str:
    """The id of the change `sha` makes, whatever its parent (git patch-id)."""
    diff = git(root, "diff-tree", "-p", "--root", sha) + "\n"
    out = subprocess.run(
        ["git", "patch-id", "--stable"],
        cwd=root,
        input=diff,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split()[0]


def overlapping(spans: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """Pairs of different tickets with agent invocations running at the same time."""
    pairs = set()
    for a in spans:
        for b in spans:
            if a["ticket"] < b["ticket"] and a["start"] < b["end"] and b["start"] < a["end"]:
                pairs.add((a["ticket"], b["ticket"]))
    return sorted(pairs)


def worktree_of(proj: Project, tid: str) -> Path:
    return proj.root / ".tf" / "ralph" / "worktrees" / tid


def group_members(pgid: int) -> list[int]:
    """The live (not zombie) processes of process group `pgid`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def kill_when(
    proj: Project,
    proc: subprocess.Popen[bytes],
    ready: Callable[[], bool],
    delay: float,
    how: str,
) -> str:
    """SIGKILL `proc` (started by `start_alone`) `delay` s after `ready()`: its process group
    when `how` is "group", else its pid alone. Returns once nothing it started runs any more:
    what went wrong, or "" when it was killed as meant."""
    deadline = time.monotonic() + 40
    while not ready():
        if proc.poll() is not None:
            return f"tf-fsm ended ({proc.returncode}) before the operation started"
        if time.monotonic() > deadline:
            break
        time.sleep(0.003)
    else:
        time.sleep(delay)
    if proc.poll() is not None:
        return f"tf-fsm ended ({proc.returncode}) before it was killed"
    if how == "group":
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    wait_gone(proj, proc.pid)
    return "" if time.monotonic() <= deadline else "the operation was never seen to start"


def wait_gone(proj: Project, pgid: int, seconds: float = 30) -> None:
    """Until no process is left in the killed process group (a killed loop's workers stop by
    themselves) and no git runs in the project (a killed run's git dies with it, soon after)."""
    deadline = time.monotonic() + seconds
    while (left := group_members(pgid) + git_processes_in([proj.root])) != []:
        assert time.monotonic() < deadline, f"still running after the kill: {left}"
        time.sleep(0.02)
