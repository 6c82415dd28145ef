"""A ticket's git workspace: its branch and worktree, the checkpoint commits of its phases, the
rollback of a blocked attempt, the merge queue into the base branch, and the gate baseline of
a base commit (docs/workspaces.md). Everything git is done with the real `git` CLI through
tf_fsm.workspace.git."""
