"""End-to-end: the user's git hooks over a ticket's whole life in a worktree (docs/workspaces.md,
"Hooks"), with a real `tf-fsm run`, real agent processes and a hook script for every client
hook git has: the worktree made, checkpoints, a blocked attempt rolled back, the branch
rebased onto a base a person moved, the merge, the worktree and branch removed. Only the
commit merging the ticket runs hooks, at the base branch's checkout."""

from __future__ import annotations

from tests.e2e.workspace_project import Project
from tests.gitrepo import git, hooks_run, logging_hooks

#: what the merge commit runs: pre-merge-commit (run by tf_fsm, as `git merge` would before
#: a merge commit), then `git commit`'s hooks
MERGE_COMMIT_HOOKS = [
    "pre-merge-commit", "post-index-change", "pre-commit", "prepare-commit-msg", "commit-msg",
    "reference-transaction", "post-commit",
]  # fmt: skip


def test_only_the_merge_commit_runs_the_users_hooks(proj: Project) -> None:
    proj.create(["pt-1"], {"workspace": {"mode": "worktree", "rollback": "reset"}})
    log = proj.sync / "hooks.log"
    logging_hooks(proj.root / ".git" / "hooks", log)
    proj.plan_rollback()
    run = proj.start("run", "pt-1")
    proj.wait_for("attempt-2", run)
    assert hooks_run(log) == []  # the worktree, 3 checkpoints, the rollback: none
    (proj.root / "person.txt").write_text("a person's change\n", encoding="utf-8")
    unhooked = f"core.hooksPath={proj.sync / 'none'}"  # the person's own git: not logged
    git(proj.root, "-c", unhooked, "add", "person.txt")
    git(proj.root, "-c", unhooked, "commit", "-q", "-m", "moved")
    proj.go()
    _out, err = run.communicate(timeout=120)
    assert run.returncode == 0, err

    assert [e["event"] for e in proj.events("pt-1") if e["event"] == "MergeRebased"] != []
    assert proj.tf_refs() == ["refs/tf/pt-1/attempt-1"]  # the rollback happened
    line = proj.first_parent()
    assert [(c["ticket"], c["subject"]) for c in line][:2] == [
        ("pt-1", "Merge pt-1: Ticket pt-1"),
        ("", "moved"),
    ]
    assert proj.ticket_branches() == []  # removed after the merge
    assert hooks_run(log) == [(name, str(proj.root)) for name in MERGE_COMMIT_HOOKS]
