"""Budget 7: a ticket's workspace operations against the same done by hand with git.

On a generated repository of 10,000 files (one commit, tk tickets and tf_fsm's settings
committed as `tf-fsm init` leaves them), each ticket's workspace life is run twice in the same
process, on two tickets, the two sides alternating which goes first:

    tf_fsm (in-process, as a worker runs it)      by hand (plain git processes)
    create    worktree.ensure                       git worktree add -b <branch> <dir> main
    checkpoint  a small edit, checkpoint.checkpoint   the same edit, git add -A, git commit
    merge     merge_lock + recover + merge at the   git merge --no-ff at the root
              root (a merge commit that also holds
              the tk ticket's close)
    remove    worktree.remove(delete_branch=True,   git worktree remove, git branch -d
              pool=...): into the worktree pool

Twice: with the pool cold (emptied before each of tf_fsm's tickets, untimed: each ticket's
worktree is made by `git worktree add`, and set down into the pool) and warm (each ticket
takes the worktree the ticket before it set down). The small edit changes one tracked file
and adds one. Medians over the tickets, per operation and for the whole life; the budgets:
tf_fsm <= 0.5 x by hand with the pool warm, <= 1.1 x cold, and <= 12 git processes per
ticket's life (the median over the tickets, counted at tf_fsm's door; the git processes git
itself starts, such as the `git branch` of `git worktree add -b`, are not counted on either
side; the warm-up ticket's once-per-process questions are not counted either). Where
tf_fsm's time goes is printed too: per operation its git processes (counted at tf_fsm's one
subprocess door, each with the time the door measured) and the rest (tf_fsm's own Python and
file work); and what one trivial git process costs through the door against a plain
`subprocess.run`.

Every git process here runs with a fixed identity and no global or system config.

    python benchmarks/bench_workspace.py [--files 10000] [--tickets 10] [--disk-tickets 4]
                                         [--history 0]
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _budget import CHECKOUT, budget, median_seconds, ms

sys.path.append(str(CHECKOUT))  # tests.gitrepo: the fixed git identity the tests use too
from tests.gitrepo import GIT_ENV

os.environ.update(GIT_ENV)  # before tf_fsm runs git: its git takes the environment's identity

import tf_fsm.workspace.git as git_door
from tf_fsm.process.door import ProcessResult, run_process
from tf_fsm.settings.load import LoadedSettings, load_settings
from tf_fsm.settings.project import STATE_IGNORE, STATE_IGNORE_RELPATH
from tf_fsm.tk.tickets import new_ticket
from tf_fsm.workspace import checkpoint, merge, recovery, worktree
from tf_fsm.workspace.pool import Pool, idle, pool_of
from tf_fsm.workspace.removal import discard_idle

LIMITS = {"warm": 0.5, "cold": 1.1}
GIT_LIMIT = 12
OPERATIONS = ("create", "checkpoint", "merge", "remove")
CREATED = "2026-02-10T12:00:00Z"
#: file creation is free there: what is left is git's work and tf_fsm's
#: the git processes an operation ran, as (subcommand, seconds), tf_fsm's and by hand
_RUNS: list[tuple[str, float]] = []
TMPFS = Path("/dev/shm")  # noqa: S108 - only a parent for tempfile's own private directories

# -- the repository ------------------------------------------------------------------------


def make_repository(root: Path, files: int, tickets: list[str], history: int) -> None:
    """`history` commits (each changing one of 1,000 small files), then `files` source files
    in directories of 100, tk tickets, settings and the state ignore rules in one commit on
    `main`."""
    plain_git(root, "init", "-q", "-b", "main")
    if history:
        make_history(root, history)
    for i in range(files):
        path = root / "src" / f"pkg{i // 100:03d}" / f"mod{i % 100:02d}.py"
        if i % 100 == 0:
            path.parent.mkdir(parents=True)
        path.write_text(f'"""Module {i}."""\n\nVALUE = {i}\n', encoding="utf-8")
    (root / ".tickets").mkdir()
    for tid in tickets:
        text = new_ticket(tid, f"Ticket {tid}", created=CREATED)
        (root / ".tickets" / f"{tid}.md").write_text(text, encoding="utf-8")
    (root / ".tf" / "config").mkdir(parents=True)
    (root / ".tf" / "config" / "settings.json").write_text(json.dumps({}), encoding="utf-8")
    (root / STATE_IGNORE_RELPATH).write_text(STATE_IGNORE, encoding="utf-8")
    plain_git(root, "add", "-A")
    plain_git(root, "commit", "-q", "-m", "the project")


def make_history(root: Path, commits: int) -> None:
    """`commits` commits on `main`, made by git fast-import (seconds for 50,000), checked out."""
    lines = []
    for i in range(commits):
        message, text = f"change {i}\n\nA commit of the project's history.\n", f"{i}\n"
        lines += [
            "commit refs/heads/main",
            f"mark :{i + 1}",
            f"committer T <t@example.com> {1_700_000_000 + i} +0000",
            f"data {len(message.encode())}",
            message,
            *([f"from :{i}"] if i else []),
            f"M 100644 inline history/f{i % 1000:03d}.txt",
            f"data {len(text)}",
            text,
        ]
    subprocess.run(
        ["git", "fast-import", "--quiet"],
        cwd=root,
        input="\n".join(lines) + "\n",
        text=True,
        check=True,
    )
    plain_git(root, "reset", "--quiet", "--hard", "main")


def plain_git(cwd: Path, *args: str) -> str:
    """git as a person's script runs it: one process, nothing around it (timed, as the door
    times tf_fsm's, so that the two sides' subcommands compare)."""
    start = time.monotonic()
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=False)
    _RUNS.append((_name(args), time.monotonic() - start))
    if done.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed in {cwd}: {done.stderr.strip()}")
    return done.stdout


def small_edit(tree: Path, tid: str, n: int) -> None:
    """One tracked file changed and one file added: a small change of an agent's."""
    with (tree / "src" / f"pkg{n % 100:03d}" / "mod00.py").open("a", encoding="utf-8") as f:
        f.write(f"CHANGED_BY = {tid!r}\n")
    (tree / "src" / f"{tid}.py").write_text(f"TICKET = {tid!r}\n", encoding="utf-8")


# -- tf_fsm's side -------------------------------------------------------------------------


def _counted(argv: list[str], **kwargs: object) -> ProcessResult:
    result = run_process(argv, **kwargs)  # type: ignore[arg-type]
    _RUNS.append((_name(argv[1:]), result.duration))
    return result


def _name(args: Sequence[str]) -> str:
    return " ".join(args[:2]) if args[0] == "worktree" else args[0]


setattr(git_door, "run_process", _counted)  # noqa: B010 - a pass-through: counts and times

Step = dict[str, tuple[float, list[tuple[str, float]]]]


@contextmanager
def step(name: str, into: Step) -> Iterator[None]:
    """Time one operation and keep the git processes it ran."""
    del _RUNS[:]
    start = time.perf_counter()
    yield
    into[name] = (time.perf_counter() - start, list(_RUNS))


def tf_fsm_ticket(root: Path, settings: LoadedSettings, tid: str, n: int, pool: Pool) -> Step:
    out: Step = {}
    with step("create", out):
        ws, _notes = worktree.ensure(root, settings, tid, "main")
    with step("checkpoint", out):
        small_edit(ws.tree, tid, n)
        trailers = {"Tf-Ticket": tid, "Tf-Attempt": "1", "Tf-Phase": "implement"}
        sha = checkpoint.checkpoint(ws, f"tf-fsm: {tid} attempt 1 implement", trailers)
    assert sha is not None, f"{tid}: the checkpoint committed nothing"
    closed = new_ticket(tid, f"Ticket {tid}", status="closed", created=CREATED)
    with step("merge", out), merge.merge_lock(root):
        recovery.recover(ws)
        merged = merge.merge(
            ws,
            strategy="merge",
            message=f"Merge {tid}: Ticket {tid}",
            tk_file=f".tickets/{tid}.md",
            tk_text=closed,
        )
    assert not merged.already, f"{tid} was merged before its merge"
    with step("remove", out):
        worktree.remove(ws, delete_branch=True, pool=pool)
    return out


# -- by hand -------------------------------------------------------------------------------


def by_hand_ticket(root: Path, tid: str, n: int) -> Step:
    out: Step = {}
    tree, branch = root / ".tf" / "ralph" / "worktrees" / tid, f"hand/{tid}"
    with step("create", out):
        plain_git(root, "worktree", "add", "--quiet", "-b", branch, str(tree), "main")
    with step("checkpoint", out):
        small_edit(tree, tid, n)
        plain_git(tree, "add", "-A")
        plain_git(tree, "commit", "--quiet", "-m", f"{tid} implement")
    with step("merge", out):
        plain_git(root, "merge", "--no-ff", "--quiet", "-m", f"Merge {tid}", branch)
    with step("remove", out):
        plain_git(root, "worktree", "remove", str(tree))
        plain_git(root, "branch", "--quiet", "-d", branch)
    return out


# -- the run -------------------------------------------------------------------------------


def run_tickets(root: Path, count: int, pool_state: str) -> tuple[list[Step], list[Step]]:
    """`count` tickets each way plus one of each to warm up (not counted), alternating which
    side goes first; tf_fsm's with the worktree pool `pool_state` ("cold": emptied before
    each ticket, untimed; "warm": as the ticket before left it)."""
    settings = load_settings(root)
    pool = pool_of(root, settings)
    common = git_door.Git(root).common_dir()
    ours: list[Step] = []
    theirs: list[Step] = []
    for n in range(count + 1):

        def tf_side(n: int = n) -> None:
            if pool_state == "cold":
                discard_idle(pool, common)
                os.sync()  # untimed, as the emptying: its deletions' writeback too
            ours.append(tf_fsm_ticket(root, settings, f"tf-{n:03d}", n, pool))

        def hand_side(n: int = n) -> None:
            theirs.append(by_hand_ticket(root, f"hand-{n:03d}", n))

        sides: list[Callable[[], None]] = [tf_side, hand_side]
        for side in sides if n % 2 == 0 else sides[::-1]:
            os.sync()  # untimed: neither side pays for the writeback of what the other wrote
            side()
    return ours[1:], theirs[1:]


def check_result(root: Path, count: int) -> None:
    """Every ticket of both sides merged once, nothing left: else the figures mean nothing."""
    merges = int(plain_git(root, "rev-list", "--count", "--merges", "main"))
    assert merges == 2 * (count + 1), f"{merges} merges on main, not {2 * (count + 1)}"
    assert plain_git(root, "status", "--porcelain") == "", "the root is not clean"
    pooled = len(idle(pool_of(root, load_settings(root))))
    trees = plain_git(root, "worktree", "list", "--porcelain").count("worktree ")
    assert trees == 1 + pooled <= 2, f"{trees - 1} worktrees left, {pooled} of them pooled"
    assert plain_git(root, "branch", "--list", "tf/*", "hand/*") == "", "branches left"


def median_of(steps: list[Step], op: str | None = None) -> float:
    ops = OPERATIONS if op is None else (op,)
    return statistics.median(sum(s[o][0] for o in ops) for s in steps)


def print_where(side: str, steps: list[Step]) -> None:
    """Per operation: the git processes (median count, the median of their summed time) and
    what is left; then each git subcommand, with its time per ticket."""
    print(f"{side}, medians per ticket (per subcommand: the mean per ticket):")
    for op in OPERATIONS:
        runs = [s[op][1] for s in steps]
        count = statistics.median(len(r) for r in runs)
        in_git = statistics.median(sum(d for _, d in r) for r in runs)
        rest = statistics.median(s[op][0] - sum(d for _, d in s[op][1]) for s in steps)
        seconds: dict[str, float] = collections.defaultdict(float)
        times: collections.Counter[str] = collections.Counter()
        for name, took in (run for r in runs for run in r):
            seconds[name] += took / len(runs)
            times[name] += 1
        listed = ", ".join(
            f"{name} x{times[name] / len(runs):g} {seconds[name] * 1e3:.1f}"
            for name in sorted(seconds, key=seconds.__getitem__, reverse=True)
        )
        print(
            f"  {op:<10} {count:>3.0f} git {ms(in_git):>10}, the rest {ms(rest):>9}: {listed} (ms)"
        )


def one_process(root: Path) -> None:
    """The floor of any git process here, through tf_fsm's door and as a plain process."""
    argv = ("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    door = median_seconds(lambda: git_door.Git(root).run(*argv), 30)
    plain = median_seconds(lambda: plain_git(root, *argv), 30)
    print(
        f"one `git rev-parse`: {ms(door)} through tf_fsm's door, {ms(plain)} as a plain "
        "process (medians of 30)"
    )


def git_per_ticket(steps: list[Step]) -> float:
    """The median over the tickets of the git processes of a whole life."""
    return statistics.median(sum(len(s[op][1]) for op in OPERATIONS) for s in steps)


def measure(
    where: Path, files: int, count: int, history: int, pool_state: str
) -> tuple[float, float, float]:
    """The whole comparison in a fresh repository under `where`, the pool `pool_state`:
    tf_fsm / by hand, and the git processes per ticket of each side."""
    with tempfile.TemporaryDirectory(dir=where) as tmp:
        root = Path(tmp) / "repo"
        root.mkdir()
        start = time.perf_counter()
        make_repository(root, files, [f"tf-{n:03d}" for n in range(count + 1)], history)
        print(
            f"repository of {files} files and {history + 1} commits in {where} made in "
            f"{time.perf_counter() - start:.1f} s; {count} tickets each way (and one each "
            f"to warm up), alternating; the pool {pool_state}"
        )
        ours, theirs = run_tickets(root, count, pool_state)
        check_result(root, count)
        print(f"{'operation':<12}{'tf_fsm':>12}{'by hand':>12}{'ratio':>8}")
        for op in (*OPERATIONS, None):
            a, b = median_of(ours, op), median_of(theirs, op)
            print(f"{op or 'whole life':<12}{ms(a):>12}{ms(b):>12}{a / b:>8.2f}")
        print_where("tf_fsm", ours)
        print_where("by hand", theirs)
        one_process(root)
    return median_of(ours) / median_of(theirs), git_per_ticket(ours), git_per_ticket(theirs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--tickets", type=int, default=10, help="tickets per side on tmpfs")
    parser.add_argument(
        "--disk-tickets", type=int, default=4, help="tickets per side on the disk (0: skip)"
    )
    parser.add_argument(
        "--history", type=int, default=0, help="commits on main before the project's (info)"
    )
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count() or 1} cores")
    places = [(TMPFS, args.tickets, "tmpfs")] if TMPFS.is_dir() else []
    if args.disk_tickets:
        places.append((Path(tempfile.gettempdir()), args.disk_tickets, "disk"))
    for where, count, name in places:
        for pool_state, limit in LIMITS.items():
            print(f"\n-- {name}, the pool {pool_state}")
            ratio, ours, theirs = measure(where, args.files, count, args.history, pool_state)
            budget(
                f"workspace life on {name}, pool {pool_state}, tf_fsm / by hand",
                ratio,
                limit,
                f"{ratio:.2f} (budget <= {limit})",
            )
            budget(
                f"git processes per ticket on {name}, pool {pool_state}",
                ours,
                GIT_LIMIT,
                f"{ours:g} (budget <= {GIT_LIMIT}; by hand {theirs:g})",
            )


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"(benchmark took {time.perf_counter() - started:.0f} s)")
