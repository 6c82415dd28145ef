"""End-to-end: where tickets run by default (docs/workspaces.md, "Modes"). In a git repository
every ticket runs in a worktree of its own, one ticket at a time as much as side by side, and
is merged; the settings or the flag keep the project's tree; a project that cannot have
worktrees runs there with a line saying why; the root's uncommitted changes are named and left
alone; `init`, `run --plan` and `ralph --dry-run` say which tree. Real `tf-fsm` processes, real
agent processes (tests/fake_agent.py), real git repositories (tests/e2e/workspace_project.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_cli
from tests.e2e.workspace_project import Project, changes, overlapping, worktree_of
from tests.gitrepo import commit_all, git, status

TICKETS = ("pt-1", "pt-2")
EDIT_OWN_FILE = [{"phase": "implement", "file": "{ticket}.txt", "text": "{ticket}"}]
SHARED_NOTE = "{why}: tickets run in the project's working tree"


def assert_each_merged_from_its_worktree(proj: Project) -> None:
    """Every agent ran in its ticket's worktree; main holds one merge per ticket (in order),
    with its file and its tk close; nothing is left: a clean root, no worktree, no branch."""
    calls = proj.calls()
    assert {c["ticket"] for c in calls} == set(TICKETS)
    for call in calls:
        assert call["cwd"] == str(worktree_of(proj, call["ticket"])), call
    assert [c["ticket"] for c in proj.first_parent()] == [*reversed(TICKETS), ""]
    for tid in TICKETS:
        assert proj.show(f"main:{tid}.txt") == f"{tid}\n"
        assert proj.tk_status(tid, "main") == "closed" == proj.tk_status(tid)
    proj.assert_nothing_left()


# -- the default in a git repository ----------------------------------------------------------


def test_run_in_a_git_repository_runs_each_ticket_in_its_worktree_and_merges_it(
    proj: Project,
) -> None:
    proj.create(list(TICKETS))
    proj.plan(edits=EDIT_OWN_FILE)
    for tid in TICKETS:
        done = proj.cli("run", tid)
        assert done.returncode == 0, done.stderr
        assert f"{tid}: CLOSED" in done.stdout
        assert "project's working tree" not in done.stderr  # nothing to say: the default
    assert_each_merged_from_its_worktree(proj)


def test_ralph_with_one_worker_runs_each_ticket_in_its_worktree_and_merges_it(
    proj: Project,
) -> None:
    proj.create(list(TICKETS))
    proj.plan(edits=EDIT_OWN_FILE, pause=[{"phase": "implement", "seconds": 0.2}])
    done = proj.cli("ralph", "--workers", "1")
    assert done.returncode == 0, done.stderr
    assert "after 2 runs: 2 closed" in done.stdout, done.stdout
    assert overlapping(proj.spans()) == []  # one worker: one ticket at a time
    assert_each_merged_from_its_worktree(proj)


def test_resume_continues_in_the_ticket_s_worktree(proj: Project) -> None:
    proj.create(list(TICKETS), {"executor": {"maxRestarts": 0}})
    proj.plan(
        edits=EDIT_OWN_FILE,
        crash=[{"phase": "review", "ticket": "pt-2", "exitCode": 3, "times": 1}],
    )
    assert proj.cli("run", "pt-1").returncode == 0
    failed = proj.cli("run", "pt-2")
    assert failed.returncode == 5, failed.stderr  # review failed: the attempt is in error
    plan = json.loads(proj.cli("resume", "pt-2", "--plan", "--json").stdout)["tree"]
    assert plan["worktree"] is True and plan["exists"] is True
    assert plan["why"] == "it has a workspace (branch tf/pt-2)"
    done = proj.cli("resume", "pt-2")
    assert done.returncode == 0, done.stderr
    assert_each_merged_from_its_worktree(proj)


# -- what keeps the project's tree ----------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        ({"ralph": {"serialUseWorktree": False}}, "ralph.serialUseWorktree false"),
        ({"workspace": {"mode": "shared"}}, "workspace.mode shared"),
    ],
    ids=["serialUseWorktree-false", "mode-shared"],
)
def test_an_explicit_setting_keeps_one_ticket_at_a_time_in_the_projects_tree(
    proj: Project, settings: dict[str, Any], why: str
) -> None:
    proj.create(list(TICKETS), settings)
    proj.plan(edits=EDIT_OWN_FILE)
    tree = json.loads(proj.cli("run", "pt-1", "--plan", "--json").stdout)["tree"]
    assert (tree["worktree"], tree["why"], tree["note"]) == (False, why, None)
    assert tree["summary"] == f"the project's working tree ({why})"
    assert proj.cli("run", "pt-1").returncode == 0
    done = proj.cli("ralph", "--workers", "1")  # runs pt-2
    assert done.returncode == 0, done.stderr
    assert "project's working tree" not in done.stderr  # asked for: nothing to say
    assert {c["cwd"] for c in proj.calls()} == {str(proj.root)}
    assert [c["subject"] for c in proj.first_parent()] == ["initial"]
    assert proj.ticket_branches() == [] and proj.worktrees() == [(str(proj.root), "main")]
    assert changes(proj.root) == [
        " M .tickets/pt-1.md",
        " M .tickets/pt-2.md",
        "?? pt-1.txt",
        "?? pt-2.txt",
    ]


def test_serial_use_worktree_false_still_gives_parallel_tickets_a_worktree_each(
    proj: Project,
) -> None:
    proj.create(list(TICKETS), {"ralph": {"serialUseWorktree": False}})
    proj.plan(edits=EDIT_OWN_FILE)
    dry = proj.cli("ralph", "--workers", "2", "--dry-run", "--json")
    trees = {
        e["ticket"]: e["tree"]
        for e in map(json.loads, dry.stdout.splitlines())
        if e["event"] == "plan"
    }
    parallel = (True, "workspace.mode auto: parallel tickets cannot share a tree")
    assert {t: (tree["worktree"], tree["why"]) for t, tree in trees.items()} == dict.fromkeys(
        TICKETS, parallel
    )
    done = proj.cli("ralph", "--workers", "2")
    assert done.returncode == 0, done.stderr
    assert {c["cwd"] for c in proj.calls()} == {str(worktree_of(proj, t)) for t in TICKETS}
    assert sorted(c["ticket"] for c in proj.first_parent()) == ["", *TICKETS]
    proj.assert_nothing_left()


def test_no_worktree_flag_keeps_the_projects_tree(proj: Project) -> None:
    proj.create(["pt-1"])
    proj.plan(edits=EDIT_OWN_FILE)
    tree = json.loads(proj.cli("run", "pt-1", "--plan", "--json", "--no-worktree").stdout)["tree"]
    assert (tree["worktree"], tree["why"]) == (False, "--no-worktree")
    done = proj.cli("run", "pt-1", "--no-worktree")
    assert done.returncode == 0, done.stderr
    assert {c["cwd"] for c in proj.calls()} == {str(proj.root)}
    assert changes(proj.root) == [" M .tickets/pt-1.md", "?? pt-1.txt"]


def test_an_attempt_begun_in_the_projects_tree_finishes_there(proj: Project) -> None:
    """Resumed in a fresh worktree, its first phases' edits (uncommitted at the root) would be
    left behind: the open attempt finishes where it began, the next one gets a worktree."""
    proj.create(["pt-1"], {"executor": {"maxRestarts": 0}})
    proj.plan(
        edits=EDIT_OWN_FILE,
        crash=[{"phase": "review", "attempt": 1, "exitCode": 3, "times": 1}],
    )
    assert proj.cli("run", "pt-1", "--no-worktree").returncode == 5
    why = "attempt 1 began in the project's tree"
    tree = json.loads(proj.cli("resume", "pt-1", "--plan", "--json").stdout)["tree"]
    assert (tree["worktree"], tree["why"]) == (False, why)
    done = proj.cli("resume", "pt-1")
    assert done.returncode == 0, done.stderr
    assert f"[pt-1] {why}: it finishes there; a new attempt runs in a worktree" in done.stderr
    assert {c["cwd"] for c in proj.calls()} == {str(proj.root)}
    assert (proj.root / "pt-1.txt").read_text() == "pt-1\n"  # one implement, kept
    assert proj.ticket_branches() == []


# -- a project that cannot have worktrees ---------------------------------------------------


def _not_a_repository(proj: Project) -> str:
    return "not a git repository"


def _no_commit_yet(proj: Project) -> str:
    git(proj.root, "init", "-q", "-b", "main")
    return "the git repository has no commit yet"


def _below_the_top(proj: Project) -> str:
    top = proj.root.parent
    git(top, "init", "-q", "-b", "main")
    (top / "other.txt").write_text("x\n", encoding="utf-8")
    git(top, "add", "other.txt")
    git(top, "commit", "-q", "-m", "the outer repository")
    return f"{proj.root} is inside the git working tree {top}, not at its top"


@pytest.mark.parametrize("setup", [_not_a_repository, _no_commit_yet, _below_the_top])
def test_a_project_that_cannot_have_worktrees_runs_in_its_tree_and_says_why(
    proj: Project, tmp_path: Path, setup: Any
) -> None:
    proj.create(["pt-1"], repository=False)
    why = setup(proj)
    proj.plan(edits=EDIT_OWN_FILE)
    tree = json.loads(proj.cli("run", "pt-1", "--plan", "--json").stdout)["tree"]
    assert (tree["worktree"], tree["why"]) == (False, why)
    assert tree["note"] == SHARED_NOTE.format(why=why)
    dry = proj.cli("ralph", "--dry-run")
    assert dry.stdout.splitlines()[0] == f"note: {SHARED_NOTE.format(why=why)}"
    assert f"tree: the project's working tree ({why})" in dry.stdout
    done = proj.cli("run", "pt-1")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count(f"[pt-1] {SHARED_NOTE.format(why=why)}\n") == 1, done.stderr
    assert {c["cwd"] for c in proj.calls()} == {str(proj.root)}
    assert proj.tk_status("pt-1") == "closed"
    assert (proj.root / "pt-1.txt").read_text() == "pt-1\n"


# -- uncommitted changes at the root --------------------------------------------------------


def test_uncommitted_changes_at_the_root_are_named_and_left_alone(proj: Project) -> None:
    proj.create(list(TICKETS), files={"README.md": "a project\n"})
    user_files = {
        "README.md": "a project, edited by its person\n",  # tracked, modified
        "notes.txt": "a person's notes\n",  # untracked
        "AGENTS.md": "agent instructions\n",  # untracked agent file: copied, not left out
        ".tf/scratch.txt": "tf_fsm's directory\n",  # .tf/: not the project's code
    }
    for name, text in user_files.items():
        (proj.root / name).write_text(text, encoding="utf-8")
    before = changes(proj.root)
    note = (
        "worktree starts from the last commit, without the 2 uncommitted files in the "
        "project's tree (README.md, notes.txt), which stay there untouched; commit them for "
        "tickets to see them"
    )
    proj.plan(edits=EDIT_OWN_FILE)

    plan = proj.cli("run", "pt-1", "--plan")
    assert f"\n  the ticket's {note}\n" in plan.stdout, plan.stdout
    tree = json.loads(proj.cli("run", "pt-1", "--plan", "--json").stdout)["tree"]
    assert tree["uncommitted"] == 2 and tree["note"] == f"the ticket's {note}"
    dry = proj.cli("ralph", "--dry-run")
    assert dry.stdout.splitlines()[0] == f"note: each ticket's {note}", dry.stdout

    run = proj.cli("run", "pt-1")
    assert run.returncode == 0, run.stderr
    assert run.stderr.count(f"[pt-1] the ticket's {note}\n") == 1, run.stderr
    loop = proj.cli("ralph", "--workers", "1")  # pt-2
    assert loop.returncode == 0, loop.stderr
    assert loop.stderr.count(f"ralph: each ticket's {note}\n") == 1, loop.stderr

    for name, text in user_files.items():  # untouched, still uncommitted
        assert (proj.root / name).read_text(encoding="utf-8") == text
    assert changes(proj.root) == before
    assert proj.show("main:README.md") == "a project\n"
    for tid in TICKETS:  # each ticket merged, and its worktree never held the notes
        assert proj.show(f"main:{tid}.txt") == f"{tid}\n"
        assert git(proj.root, "ls-tree", "--name-only", "main", "notes.txt", "AGENTS.md") == ""
    assert {c["cwd"] for c in proj.calls()} == {str(worktree_of(proj, t)) for t in TICKETS}


# -- init ------------------------------------------------------------------------------------


def test_init_writes_the_mode_and_says_what_it_means_here(tmp_path: Path) -> None:
    plain, repo = tmp_path / "plain", tmp_path / "repo"
    done = run_cli("--root", str(plain), "init")
    assert done.returncode == 0, done.stderr
    assert (
        'workspace.mode "auto": tickets run in the project\'s tree for now (not a git '
        "repository); at the top of a git repository with a commit, each runs on its own "
        'branch and worktree, merged into the base branch when its gate passes; "shared" '
        "runs every ticket in the project's tree (docs/workspaces.md)\n"
    ) in done.stdout
    settings = json.loads((plain / ".tf/config/settings.json").read_text(encoding="utf-8"))
    assert settings["workspace"] == {"mode": "auto"}
    assert "serialUseWorktree" not in settings["ralph"]  # set, it would mean "shared"

    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    commit_all(repo, "initial")
    done = run_cli("--root", str(repo), "init")
    assert done.returncode == 0, done.stderr
    assert (
        'workspace.mode "auto": this is a git repository: each ticket runs on its own branch '
        "and worktree, merged into the base branch when its gate passes"
    ) in done.stdout
    assert status(repo).splitlines() == ["?? .tf/.gitignore", "?? .tf/config/settings.json"]


# -- what --plan and --dry-run name ----------------------------------------------------------


def test_plan_and_dry_run_name_each_ticket_s_worktree(proj: Project) -> None:
    proj.create(list(TICKETS))
    tree = json.loads(proj.cli("run", "pt-1", "--plan", "--json").stdout)["tree"]
    summary = "the ticket's worktree .tf/ralph/worktrees/pt-1 (branch tf/pt-1 from main)"
    assert tree == {
        "worktree": True,
        "why": "workspace.mode auto",
        "note": None,
        "refused": None,
        "path": str(worktree_of(proj, "pt-1")),
        "branch": "tf/pt-1",
        "base": "main",
        "exists": False,
        "uncommitted": 0,
        "summary": summary,
    }
    text = proj.cli("run", "pt-1", "--plan")
    assert f"\ntree: {summary}\n" in text.stdout, text.stdout

    dry = proj.cli("ralph", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        "  1. pt-1         attempt 1 (initial), base models",
        f"                 tree: {summary}",
        "  2. pt-2         attempt 1 (initial), base models",
        "                 tree: " + summary.replace("pt-1", "pt-2"),
    ]
    as_json = proj.cli("ralph", "--dry-run", "--json")
    plans = [e for e in map(json.loads, as_json.stdout.splitlines()) if e["event"] == "plan"]
    assert [(e["ticket"], e["tree"]["path"], e["tree"]["branch"]) for e in plans] == [
        (t, str(worktree_of(proj, t)), f"tf/{t}") for t in TICKETS
    ]
    assert not (proj.root / ".tf/ralph").exists() and proj.ticket_branches() == []
