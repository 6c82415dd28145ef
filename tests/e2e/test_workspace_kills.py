"""SIGKILL trials of ticket workspaces (docs/workspaces.md, "Recovery"): a real `tf-fsm ralph`
or `tf-fsm run` is killed at a random instant while git makes a ticket's worktree, commits a
checkpoint, rebases a branch onto a base a person moved, merges it, or removes the merged
ticket's worktree and branch; then the same command runs again until every ticket is closed.
Whatever the instant, each ticket is merged exactly once, main holds every ticket's change and
the person's commit, and nothing is left behind: no worktree, ticket branch, git lock or merge
in progress, and each removal journaled.

Each trial is driven by a seed from a fixed list (a failure names its seed): the kill waits
until the journal (or the agent's log) shows the operation under way, then a random delay.
What the killed run had really reached is read back from its journal, and each operation must
have been hit by at least one of its seeds. The repository holds many files, so that git's
checkouts take long enough to be hit.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import run_cli, wait_for
from tests.e2e.conftest import alive
from tests.e2e.workspace_project import BASE_SETTINGS, Project, changes, kill_when, worktree_of
from tests.gitrepo import commit_all, git, isolate

#: the real git, for the shim that stands in front of it
GIT = shutil.which("git") or "git"

FILES = 1000
RALPH_TICKETS = ["pt-1", "pt-2"]
RUN_TICKETS = ["pt-1"]
PERSON_FILE, PERSON_SUBJECT = "person.txt", "a person's commit"
MAX_RERUNS = 3
#: (seed, how tf-fsm is killed): `loop` SIGKILLs ralph's loop process alone, `group` its whole
#: process group (loop, fork server, workers), `run` a `tf-fsm run --worktree` process (the
#: git it runs dies with it)
TRIALS: dict[str, list[tuple[int, str]]] = {
    "worktree": [(101, "group"), (102, "run"), (103, "loop")],
    "checkpoint": [(201, "group"), (202, "run"), (203, "loop")],
    "rebase": [(301, "group"), (302, "run"), (303, "loop")],
    "merge": [(401, "group"), (402, "run"), (403, "loop")],
    "removal": [(501, "group"), (502, "run"), (503, "loop")],
}
#: a longer soak for local runs: TF_FSM_KILL_SOAK=N adds N more seeds per operation (the kill
#: modes in turn), e.g. `TF_FSM_KILL_SOAK=20 pytest tests/e2e/test_workspace_kills.py`
SOAK = int(os.environ.get("TF_FSM_KILL_SOAK", "0"))
#: the journal's last word on a merged ticket's workspace must be its removal
WORKSPACE_ENDS = ("MergeCompleted", "WorkspaceRemoved")


def soak(target: str) -> list[tuple[int, str]]:
    first = TRIALS[target][-1][0] + 1000
    return [(first + n, ("group", "run", "loop")[n % 3]) for n in range(SOAK)]


#: the random delay (seconds, from, to) after the operation's sign (see `under_way`): about
#: the time from the sign to the operation's end here (a checkpoint, the rebase and the merge
#: take 40-100 ms; a worktree of FILES files 0.1-1 s, from its `locked` marker on)
WINDOW = {
    "worktree": (0.0, 0.05),
    "checkpoint": (0.015, 0.06),
    "rebase": (0.0, 0.05),
    "merge": (0.0, 0.07),
    "removal": (0.0, 0.03),
}


# -- the project ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project made once and copied for each trial: `tf-fsm init`, the fake agent's
    settings and FILES small files, committed as main's first commit (objects packed, so a
    copy has FILES files to write, not twice as many)."""
    root = tmp_path_factory.mktemp("template") / "project"
    (root / ".tf" / "config").mkdir(parents=True)
    done = run_cli("init", cwd=root, env={"TF_FSM_ROOT": str(root)})
    assert done.returncode == 0, done.stderr
    (root / ".tf" / "config" / "settings.json").write_text(json.dumps(BASE_SETTINGS, indent=2))
    for n in range(FILES):
        path = root / "lib" / f"d{n % 40}" / f"f{n}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"file {n}\n", encoding="utf-8")
    git(root, "init", "-q", "-b", "main")
    commit_all(root, "initial")
    git(root, "repack", "-a", "-d", "-q")
    git(root, "prune-packed")
    return root


def new_project(template: Path, tmp: Path, tickets: list[str]) -> Project:
    """A copy of the template with `tickets`, committed on main."""
    root = tmp / "project"
    subprocess.run(["cp", "-a", str(template), str(root)], check=True)
    proj = Project(root, tmp)
    for tid in tickets:
        proj.ticket(tid)
    git(root, "add", ".tickets")
    git(root, "commit", "-q", "-m", "the tickets")
    return proj


class Person(threading.Thread):
    """A person who commits on main at the root while the first ticket's agent works (its
    `implement` waits for them: a pause rule), so the tickets' branches must be rebased."""

    def __init__(self, proj: Project) -> None:
        super().__init__(daemon=True)
        self.proj, self.stop, self.error, self.commit = proj, threading.Event(), "", ""

    def run(self) -> None:
        while not self.stop.is_set():
            if any(self.proj.sync.glob("reached-*")):
                try:
                    self._commit()
                except AssertionError as exc:
                    self.error = str(exc)
                self.proj.go()
                return
            time.sleep(0.01)

    def _commit(self) -> None:
        (self.proj.root / PERSON_FILE).write_text("a person's change\n", encoding="utf-8")
        for _ in range(50):  # a git of tf-fsm's may hold the root's index for an instant
            try:
                git(self.proj.root, "add", PERSON_FILE)
                git(self.proj.root, "commit", "-q", "-m", PERSON_SUBJECT, "--", PERSON_FILE)
                self.commit = git(self.proj.root, "rev-parse", "HEAD")
                return
            except AssertionError:
                time.sleep(0.05)
        raise AssertionError("the person could not commit on main")


# -- the kill ---------------------------------------------------------------------------------


def under_way(proj: Project, tickets: list[str], target: str) -> bool:
    """Has the targeted operation started (the instant the random delay counts from)? git's
    registry of worktrees (made by the first `git worktree add`), the implement agent's end
    (its checkpoint follows), MergeStarted (the rebase follows), MergeRebased (the merge)."""
    if target == "worktree":  # git's half-made marker, there while the checkout is written
        return any((proj.root / ".git" / "worktrees").glob("*/locked"))
    if target == "checkpoint":
        return any(s["phase"] == "implement" for s in proj.spans())
    if target == "removal":
        return any(closed_merged(journal(proj, tid)) for tid in tickets)
    name = "MergeStarted" if target == "rebase" else "MergeRebased"
    return any(name in journal_text(proj, tid) for tid in tickets)


def journal_text(proj: Project, tid: str) -> str:
    path = proj.root / ".tf" / "knowledge" / "tickets" / tid / "events.jsonl"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def journal(proj: Project, tid: str) -> list[dict[str, object]]:
    """The ticket's journal so far (a line being written is left out)."""
    found = []
    for line in journal_text(proj, tid).splitlines():
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return found


def closed_merged(evs: list[dict[str, object]]) -> bool:
    """Has the merged attempt's end been journaled, and its workspace not removed yet?"""
    names = [e["event"] for e in evs]
    ended = [e for e in evs if e["event"] == "AttemptFinished" and e.get("status") == "closed"]
    return bool(ended) and "MergeCompleted" in names and "WorkspaceRemoved" not in names


# -- what the killed run reached ----------------------------------------------------------------


def reached(proj: Project, tid: str) -> str | None:
    """The operation the killed run was in for `tid`, from its journal and git: `git worktree
    add` (its registry entry still marked `locked`, no WorkspaceReady), a checkpoint (the
    implement agent's invocation journaled, its phase not), the rebase (merge started on a
    base that moved, not rebased yet), the merge (rebased, or started on a base that did
    not move, and not completed) or the removal of the merged ticket's worktree and branch
    (its attempt's end journaled, the removal not)."""
    evs = journal(proj, tid)
    names = [e["event"] for e in evs]
    if closed_merged(evs):
        return "removal"
    if "WorkspaceReady" not in names:
        half_made = (proj.root / ".git" / "worktrees" / tid / "locked").exists()
        return "worktree" if half_made else None
    merging = [e for e in evs if e["event"] in ("MergeStarted", "MergeRebased", "MergeCompleted")]
    if merging and merging[-1]["event"] == "MergeStarted":
        base, tip = merging[-1]["baseSha"], merging[-1]["tip"]
        return "merge" if git(proj.root, "merge-base", base, tip) == base else "rebase"
    if merging and merging[-1]["event"] == "MergeRebased":
        return "merge"
    implement = [e["event"] for e in evs if e.get("phase") == "implement"]
    ran = "InvocationFinished" in implement and "PhaseCompleted" not in implement
    return "checkpoint" if ran else None


def git_left(proj: Project) -> list[str]:
    """What the killed git left in the repository: lock files, a rebase, a merge."""
    dot_git = proj.root / ".git"
    found = [*dot_git.rglob("*.lock"), *dot_git.rglob("rebase-merge"), *dot_git.glob("MERGE_HEAD")]
    return sorted(str(p.relative_to(dot_git)) for p in found)


# -- a trial ----------------------------------------------------------------------------------


@dataclass
class Trial:
    seed: int
    target: str
    how: str
    hits: set[str] = field(default_factory=set)
    left: list[str] = field(default_factory=list)
    reruns: list[int] = field(default_factory=list)

    def __str__(self) -> str:
        return (
            f"seed {self.seed} ({self.target}, kill {self.how}): reached {sorted(self.hits)}, "
            f"git left {self.left}, reruns exited {self.reruns}"
        )


def run_trial(template: Path, tmp: Path, seed: int, target: str, how: str) -> Trial:
    """One project, one kill, reruns until done, and the checks."""
    rng = random.Random(seed)  # noqa: S311 - seeded instants, not a secret
    trial = Trial(seed, target, how)
    tickets = RUN_TICKETS if how == "run" else RALPH_TICKETS
    proj = new_project(template, tmp, tickets)
    base = git(proj.root, "rev-parse", "main")
    proj.plan(
        edits=[
            {
                "phase": "implement",
                "file": "src/{ticket}.py",
                "text": "X = '{ticket}'",
                "mode": "write",
            }
        ],
        pause=[
            {
                "phase": "implement",
                "touch": str(proj.sync / "reached-{ticket}"),
                "until": str(proj.sync / "go"),
                "seconds": 40,
            },
            {"phase": "review", "seconds": round(rng.uniform(0, 0.3), 3)},
        ],
    )
    argv = ["run", "pt-1", "--worktree"] if how == "run" else ["ralph", "--workers", "2"]
    person = Person(proj)
    person.start()
    try:
        proc = proj.start_alone(*argv)
        ready = lambda: under_way(proj, tickets, target)  # noqa: E731
        wrong = kill_when(proj, proc, ready, rng.uniform(*WINDOW[target]), how)
        assert wrong == "", f"{trial}: {wrong}"
        for tid in tickets:  # merged once or not at all, whatever the instant
            merges = [c for c in proj.first_parent() if c["ticket"] == tid]
            assert len(merges) <= 1, f"{trial}: {tid} merged {len(merges)} times at the kill"
        trial.left = git_left(proj)
        trial.hits = {hit for tid in tickets if (hit := reached(proj, tid))}
        rerun_until_done(proj, trial, argv)
    finally:
        person.stop.set()
        person.join(timeout=10)
    assert person.error == "", f"{trial}: {person.error}"
    check_outcome(proj, trial, tickets, [person.commit, base])
    return trial


def rerun_until_done(proj: Project, trial: Trial, argv: list[str]) -> None:
    """The killed command again until every ticket is closed; every rerun must succeed."""
    for _ in range(MAX_RERUNS):
        done = proj.cli(*argv)
        trial.reruns.append(done.returncode)
        assert done.returncode == 0, f"{trial}:\n{done.stdout}\n{done.stderr}"
        rows = proj.status_json()
        if all(row["state"] == "closed" for row in rows.values()):
            return
    open_ = {tid: row["state"] for tid, row in rows.items() if row["state"] != "closed"}
    raise AssertionError(
        f"{trial}: not closed after {MAX_RERUNS} reruns: {open_}; the last rerun said:\n"
        f"{done.stderr}\n" + "\n".join(log_tail(proj, tid) for tid in open_)
    )


def log_tail(proj: Project, tid: str, lines: int = 8) -> str:
    """The end of a ticket's ralph log (a loop exits 0 when a worker fails: the log says why)."""
    path = proj.root / ".tf" / "ralph" / "logs" / f"{tid}.log"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return f"{path.name}:\n" + "\n".join(text.splitlines()[-lines:])


def check_outcome(proj: Project, trial: Trial, tickets: list[str], kept: list[str]) -> None:
    """Merged once each, main's content whole (the person's commit and main's commits from
    before the run on its first-parent line: never rewritten), nothing left behind."""
    line = proj.first_parent()
    assert set(kept) <= {c["sha"] for c in line}, f"{trial}: {kept} not on main: {line}"
    for tid in tickets:
        merged = [c["subject"] for c in line if c["ticket"] == tid]
        assert merged == [f"Merge {tid}: Ticket {tid}"], f"{trial}: {tid} merged as {merged}"
        assert proj.show(f"main:src/{tid}.py") == f"X = '{tid}'\n", trial
        assert proj.tk_status(tid, "main") == "closed" == proj.tk_status(tid), trial
    subjects = [c["subject"] for c in proj.log_of("main")]
    assert subjects.count(PERSON_SUBJECT) == 1, f"{trial}: {subjects}"  # not replayed either
    assert proj.show(f"main:{PERSON_FILE}") == "a person's change\n", trial
    files = git(proj.root, "ls-tree", "-r", "--name-only", "main", "lib").splitlines()
    assert len(files) == FILES, f"{trial}: {len(files)} files under lib/"
    locks = sorted(str(p) for p in (proj.root / ".git").rglob("*.lock"))
    assert locks == [], f"{trial}: git locks left: {locks}"
    for tid in tickets:  # the removal after the merge, journaled (by the rerun if need be)
        ends = [e for e in journal(proj, tid) if e["event"] in WORKSPACE_ENDS]
        assert ends[-1]["event"] == "WorkspaceRemoved", f"{trial}: {tid} ends {ends[-1:]}"
        assert ends[-1]["branchDeleted"] is True, f"{trial}: {ends[-1]}"
    drop_set_aside(proj, trial, tickets)
    proj.assert_nothing_left()


def drop_set_aside(proj: Project, trial: Trial, tickets: list[str]) -> None:
    """Every ref under refs/tf/ is work tf_fsm journaled as set aside (a killed phase's
    uncommitted edits): checked, then deleted, as a person who looked at it would."""
    journaled = {e["ref"] for tid in tickets for e in proj.events(tid, "WorkSetAside")}
    refs = set(proj.tf_refs())
    assert refs == journaled, f"{trial}: refs {sorted(refs)}, journaled {sorted(journaled)}"
    for ref in refs:
        git(proj.root, "update-ref", "-d", ref)


# -- the tests --------------------------------------------------------------------------------


@pytest.mark.parametrize("target", list(TRIALS))
def test_sigkill_at_a_random_instant_of_a_workspace_operation_loses_and_repeats_nothing(
    template: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str
) -> None:
    isolate(monkeypatch)
    trials = []
    for seed, how in TRIALS[target] + soak(target):
        tmp = tmp_path / f"seed-{seed}"
        tmp.mkdir()
        trials.append(run_trial(template, tmp, seed, target, how))
        print(trials[-1])
    hit = [t for t in trials if target in t.hits]
    assert hit, f"no trial was killed during the {target}: " + "; ".join(map(str, trials))


#: the person's signing program (gpg.program, with commit.gpgSign): git runs it as it makes a
#: commit object, so while a rebase commits a pick it has applied and staged (tf_fsm's git
#: runs no hook, and its configuration is the person's). The first time in a rebase it says
#: so (`held`, and its git's pid in `held.git`) and waits until its git is gone or a zombie
#: (or until it is ended with its git's process group, as tf_fsm's launcher ends what a killed
#: run started), then says so (`held.gone`); else it signs as gpg would, in form
HOLD_REBASE_PICK = """#!/bin/sh
if [ -d "$(git rev-parse --git-dir)/rebase-merge" ] && [ ! -e "{held}" ]; then
    echo "$PPID" > "{held}.git"
    echo "$(pwd)" > "{held}"
    while :; do
        case "$(cut -d' ' -f3 /proc/$PPID/stat 2>/dev/null)" in ""|Z|X) break;; esac
        sleep 0.02
    done
    echo gone > "{held}.gone"
    exit 1
fi
cat > /dev/null
printf '\\n[GNUPG:] SIG_CREATED D 1 8 00 0 0\\n' >&2
printf -- '-----BEGIN PGP SIGNATURE-----\\n\\nnot a signature\\n-----END PGP SIGNATURE-----\\n'
"""


def test_a_kill_between_the_rebases_pick_and_its_commit_is_undone_by_the_rerun(
    proj: Project,
) -> None:
    """An instant the rebase trials hit by chance, hit every time: tf-fsm's rebase
    of the ticket's branch has staged the pick on a detached HEAD and not committed it. The
    rerun undoes its own killed rebase and merges the ticket, once."""
    proj.create(["pt-1"], {"workspace": {"mode": "worktree"}})
    held = proj.sync / "held"
    signer = proj.sync / "sign"
    signer.write_text(HOLD_REBASE_PICK.replace("{held}", str(held)), encoding="utf-8")
    signer.chmod(0o755)
    git(proj.root, "config", "commit.gpgSign", "true")
    git(proj.root, "config", "gpg.program", str(signer))
    proj.plan(
        edits=[{"phase": "implement", "file": "src/{ticket}.py", "text": "X = 1"}],
        pause=[
            {
                "phase": "implement",
                "touch": str(proj.sync / "reached-{ticket}"),
                "until": str(proj.sync / "go"),
            }
        ],
    )
    person = Person(proj)
    person.start()
    proc = proj.start_alone("run", "pt-1")
    wrong = kill_when(proj, proc, held.exists, 0.0, "run")
    person.join(timeout=10)
    assert wrong == "" and person.commit, (wrong, person.error)
    its_git = int((proj.sync / "held.git").read_text(encoding="utf-8"))
    wait_for(lambda: not alive(its_git), 10, "the end of the killed run's git")
    tree = worktree_of(proj, "pt-1")
    assert held.read_text(encoding="utf-8") == f"{tree}\n"
    assert git(tree, "status", "--porcelain") == "A  src/pt-1.py"  # staged, not committed
    assert git(tree, "rev-parse", "HEAD") == person.commit  # the detached HEAD: main's tip

    done = proj.cli("run", "pt-1")
    assert done.returncode == 0, done.stderr
    line = proj.first_parent()
    assert [c["ticket"] for c in line][:2] == ["pt-1", ""], line
    assert line[1]["sha"] == person.commit
    assert proj.show("main:src/pt-1.py") == "X = 1\n"
    assert proj.tk_status("pt-1", "main") == "closed"
    proj.assert_nothing_left()


HEAVY = 600  # files pt-2 adds: its merge's checkout at the root takes a while


def test_a_merge_killed_half_way_at_the_root_is_undone_after_another_ticket_merged(
    proj: Project,
) -> None:
    """An instant the merge trials hit by chance, hit every time: `git merge` was writing the
    ticket's files at the root, not its index yet, when tf-fsm was killed; another ticket
    merges next, then the ticket's rerun undoes its half merge and merges it, once."""
    proj.create(["pt-1", "pt-2"], {"workspace": {"mode": "worktree"}})
    heavy = [
        {"phase": "implement", "ticket": "pt-2", "file": f"src/pt-2/f{n}.txt", "text": "{ticket}"}
        for n in range(HEAVY)
    ]
    pt_1 = {"phase": "implement", "ticket": "pt-1", "file": "src/pt-1.py", "text": "X = 1"}
    proj.plan(edits=[*heavy, pt_1])
    run = proj.start_alone("run", "pt-2")
    wrong = kill_when(proj, run, (proj.root / "src" / "pt-2").exists, 0.0, "run")
    assert wrong == ""
    assert (proj.root / ".git" / "index.lock").exists()  # cut short before its index
    assert not (proj.root / ".git" / "MERGE_HEAD").exists()
    half = [line for line in changes(proj.root) if line.startswith("?? src/pt-2/")]
    assert 0 < len(half) < HEAVY, len(half)

    first = proj.cli("run", "pt-1")
    assert first.returncode == 0, first.stderr
    assert [c["ticket"] for c in proj.first_parent()] == ["pt-1", ""]
    done = proj.cli("run", "pt-2")
    assert done.returncode == 0, done.stderr
    assert [c["ticket"] for c in proj.first_parent()] == ["pt-2", "pt-1", ""]
    assert len(git(proj.root, "ls-tree", "--name-only", "main:src/pt-2").split()) == HEAVY
    assert proj.tk_status("pt-2", "main") == "closed"
    proj.assert_nothing_left()


#: a `git` first on PATH (tf_fsm's own git runs no hook to hold it with): the first time it is
#: asked to delete a ticket branch, it says so (`held`) and sleeps instead; tf-fsm is killed
#: meanwhile, and the parent-death signal ends it. Any other command is the real git.
#: a git that stops for good (until tf-fsm is killed) in the first deletion of a ticket
#: branch, before it (`during`: the ref is locked) or after it (`after`: the branch is gone)
HOLD_BRANCH_DELETION = """#!/bin/sh
case "$*" in
    *update-ref*" -d refs/heads/tf/"*)
        if [ ! -e "{held}" ]; then {after}echo held > "{held}"; exec sleep 600; fi;;
esac
exec {git} "$@"
"""
AFTER_DELETION = {"during": "", "after": '{git} "$@" || exit $?; '}


@pytest.mark.parametrize("when", ["during", "after"])
@pytest.mark.parametrize("rerun", [["run", "pt-1"], ["ralph"]])
def test_a_kill_while_a_merged_tickets_branch_is_deleted_is_finished_by_the_rerun(
    proj: Project, rerun: list[str], when: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Instants the removal trials hit by chance, hit every time: the ticket is merged and
    closed, its worktree removed, its branch being deleted (its ref locked) or deleted, when
    tf-fsm is killed. The rerun, `run` or the loop (which finds the branch without a worktree,
    or the removal's mark), deletes the branch and journals the removal; nothing is merged
    again, and the mark goes."""
    proj.create(["pt-1"], {"workspace": {"mode": "worktree"}})
    held = proj.sync / "held"
    shim = proj.sync / "bin"
    shim.mkdir()
    text = HOLD_BRANCH_DELETION.replace("{after}", AFTER_DELETION[when])
    text = text.replace("{held}", str(held)).replace("{git}", GIT)
    (shim / "git").write_text(text, encoding="utf-8")
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}{os.pathsep}{os.environ['PATH']}")
    proj.plan(edits=[{"phase": "implement", "file": "src/{ticket}.py", "text": "X = 1"}])
    proc = proj.start_alone("run", "pt-1")
    assert kill_when(proj, proc, held.exists, 0.0, "run") == ""
    merged = proj.first_parent()
    assert [c["ticket"] for c in merged] == ["pt-1", ""]
    assert proj.tk_status("pt-1", "main") == "closed" == proj.tk_status("pt-1")
    assert not worktree_of(proj, "pt-1").exists()
    assert proj.ticket_branches() == (["tf/pt-1"] if when == "during" else [])
    assert "WorkspaceRemoved" not in journal_text(proj, "pt-1")
    mark = worktree_of(proj, "pt-1").with_name(".removed-pt-1")
    assert mark.is_file()
    assert proj.status_json()["pt-1"]["next"].startswith("merged and closed; a run killed")

    done = proj.cli(*rerun)
    assert done.returncode == 0, done.stderr
    assert proj.first_parent() == merged
    (removed,) = proj.events("pt-1", "WorkspaceRemoved")
    assert removed["branchDeleted"] is True
    assert sorted(str(p) for p in (proj.root / ".git").rglob("*.lock")) == []
    proj.assert_nothing_left()
    assert not mark.exists()
    assert proj.status_json()["pt-1"]["next"].startswith("nothing: closed")
    mark.touch()  # as a run killed after the journal recorded the removal leaves it
    assert proj.cli(*rerun).returncode == 0
    assert len(proj.events("pt-1", "WorkspaceRemoved")) == 1
    assert mark.exists() == (rerun[0] == "run")  # the loop drops it; `run` never looks
