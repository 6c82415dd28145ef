"""What the merge queue's rebase made of a ticket's commits (docs/workspaces.md, "What status,
diagram and --plan show"): each commit of the branch before the rebase -> the commit it
became, so that the journal's checkpoints can be named by shas that are on a branch. Commits
are matched by their `Tf-Attempt` and `Tf-Phase` trailers, in order (a rebase keeps the order
of the commits it replays); a commit the rebase dropped (its change already on the base) maps
to nothing."""

from __future__ import annotations

from tf_fsm.workspace.git import Git

#: one commit per record: its sha, then the attempt and phase its trailers name
_FORMAT = "%H%x00%(trailers:key=Tf-Attempt,valueonly)%x00%(trailers:key=Tf-Phase,valueonly)%x1e"


def rebased_commits(git: Git, base: str, old_tip: str, new_tip: str) -> dict[str, str]:
    """Each commit of `base..old_tip` (the branch before it was rebased onto `base`) -> its
    rebased commit in `base..new_tip`, matched by trailers in order."""
    old, new = _by_trailers(git, base, old_tip), _by_trailers(git, base, new_tip)
    found: dict[str, str] = {}
    for key, before in old.items():
        found.update(zip(before, new.get(key, []), strict=False))
    return {sha: became for sha, became in found.items() if sha != became}


def _by_trailers(git: Git, base: str, tip: str) -> dict[tuple[str, str], list[str]]:
    """The commits of `base..tip`, oldest first, grouped by their (attempt, phase) trailers."""
    out = git.out("log", "--reverse", f"--format={_FORMAT}", f"{base}..{tip}", "--")
    grouped: dict[tuple[str, str], list[str]] = {}
    for record in out.split("\x1e"):
        fields = record.strip("\n").split("\x00")
        if len(fields) == 3 and fields[0]:
            key = (fields[1].strip(), fields[2].strip())
            grouped.setdefault(key, []).append(fields[0])
    return grouped
