"""tk's ticket files in a ticket's worktree.

The tk state of record is the project root's `.tickets/`: tf_fsm edits it there, the loop
reads it there, and the merge commits it on the base branch (docs/workspaces.md). An agent
that ran `tk` in its worktree changed a copy nobody reads, which checkpoints never commit and
which would stop the rebase before the merge. Before the merge, such changes are kept under
a ref (never dropped) and the worktree's `.tickets/` is put back as the branch has it.
"""

from __future__ import annotations

from tf_fsm.workspace.checkpoint import commit_message, save_ref
from tf_fsm.workspace.git import Git, literal
from tf_fsm.workspace.model import TK_DIR, Workspace


def set_aside_tk_changes(ws: Workspace, name: str = "tickets-in-worktree") -> str | None:
    """Keep the worktree's changes under `.tickets/` as a commit on HEAD under
    `refs/tf/<id>/<name>`, then restore `.tickets/` to HEAD; the ref, or None when nothing
    there changed (one git process then)."""
    git = ws.git
    spec = ["--", *literal([TK_DIR])]
    if not git.out("status", "--porcelain", "-z", "--untracked-files=all", *spec):
        return None
    index = git.git_dir() / "tf-fsm-tickets.index"
    aside = Git(ws.tree, {**git.env, "GIT_INDEX_FILE": str(index)})
    try:
        aside.run("read-tree", "HEAD")
        aside.run("add", "--all", *spec)
        tree = aside.out("write-tree")
    finally:
        index.unlink(missing_ok=True)
    text = commit_message(f"tf-fsm: tk file changes kept as {name}", ws.ticket_id, {})
    made = git.run("commit-tree", tree, "-p", "HEAD", "-F", "-", stdin=text, env=git.commit_env())
    sha = made.stdout.strip()
    ref = save_ref(ws, name, sha)
    _restore_tk_files(ws)
    return ref


def _restore_tk_files(ws: Workspace) -> None:
    """The worktree's `.tickets/` back as its branch has it (after the branch moved, or once its
    changes were kept): nothing there is the state of record."""
    git, spec = ws.git, ["--", *literal([TK_DIR])]
    if git.out("ls-tree", "--name-only", "HEAD", *spec):  # the branch holds tk files
        git.run("checkout", "HEAD", *spec)  # tracked files back as the branch has them
    git.run("clean", "-f", "-d", "--quiet", *spec)
