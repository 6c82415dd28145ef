"""End-to-end: what the merge queue commits and leaves (docs/workspaces.md, "The merge
queue"), with real `tf-fsm` processes, real agent processes (tests/fake_agent.py) and real git
repositories, judged from the outside by git (tests/e2e/workspace_project.py).
"""

from __future__ import annotations

from tests.e2e.workspace_project import Project, changes
from tests.gitrepo import git

# -- a close is always committed with the merge ----------------------------------------------


def test_a_ticket_with_no_commit_of_its_own_gets_its_close_committed_after_the_base_moved(
    proj: Project,
) -> None:
    """Its agents change nothing, and a person commits on main while it runs: its branch's
    tip (main's old tip) is in main's history, yet nothing has merged it. The merge commits
    its tk close on main; the root is left clean."""
    proj.create(["pt-1"], {"workspace": {"mode": "worktree"}})
    proj.plan(
        pause=[{"phase": "review", "touch": str(proj.sync / "review"),
                "until": str(proj.sync / "go")}],
    )  # fmt: skip
    run = proj.start("run", "pt-1")
    proj.wait_for("review", run)
    (proj.root / "person.txt").write_text("a person's change\n", encoding="utf-8")
    git(proj.root, "add", "person.txt")
    git(proj.root, "commit", "-q", "-m", "a person's commit")
    person = git(proj.root, "rev-parse", "main")
    proj.go()
    _out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err

    assert proj.tk_status("pt-1", "main") == "closed"
    assert proj.tk_status("pt-1") == "closed"
    line = proj.first_parent()
    assert [(c["ticket"], c["subject"]) for c in line] == [
        ("pt-1", "Merge pt-1: Ticket pt-1"), ("", "a person's commit"), ("", "initial"),
    ]  # fmt: skip
    assert line[0]["parents"] == [person]  # nothing to merge but the close
    assert proj.show("main:person.txt") == "a person's change\n"
    (completed,) = proj.events("pt-1", "MergeCompleted")
    assert completed["commit"] == line[0]["sha"] and completed["already"] is False
    assert changes(proj.root) == []
    proj.assert_nothing_left()


def test_parallel_tickets_with_no_commits_of_their_own_each_commit_their_close(
    proj: Project,
) -> None:
    """Three tickets whose agents change nothing, side by side: each branch starts at the
    same commit, which every later merge finds in main's history (and, once one of them
    merged, named in that one's trailer). Each still gets its own commit closing it."""
    tickets = ["pt-1", "pt-2", "pt-3"]
    proj.create(tickets)
    proj.plan(pause=[{"phase": "implement", "seconds": 0.3}])
    done = proj.cli("ralph", "--workers", "3")
    assert done.returncode == 0, done.stderr
    assert "3 closed" in done.stdout, done.stdout

    line = proj.first_parent()
    assert sorted(c["ticket"] for c in line[:-1]) == tickets
    for tid in tickets:
        assert proj.tk_status(tid, "main") == "closed", tid
        assert proj.tk_status(tid) == "closed", tid
    assert changes(proj.root) == []
    proj.assert_nothing_left()
