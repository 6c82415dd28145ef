"""A ticket's diff for its page: its branch against its base (`git diff base...branch`), or one
checkpoint against the checkpoint before it (the first against the base), through the one git
door (tf_fsm.workspace.git). Only names the ticket's own journal gives reach git: its branch,
its base, and a checkpoint only when it is one of the ticket's own. The text is redacted as
every artifact is, and cut at DIFF_BYTES, saying so."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tf_fsm.settings.load import LoadedSettings

#: how much of a diff the page shows
DIFF_BYTES = 512 * 1024
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class NotADiff(Exception):
    """The ticket has no such diff: no workspace, or a checkpoint that is not its own."""


@dataclass
class Diff:
    ticket: str
    what: str  # what is compared, in words
    workspace: dict[str, Any]
    checkpoint: str | None = None
    lines: list[tuple[str, str]] = field(default_factory=list)  # (kind, text)
    cut: bool = False
    problem: str | None = None  # what git said when it could not tell


def ticket_diff(
    root: Path, settings: LoadedSettings, ticket_id: str, checkpoint: str | None
) -> Diff:
    """The diff the page asked for (see the module's docstring); NotADiff when there is none."""
    from tf_fsm.storage.backends import open_store
    from tf_fsm.views.status import ticket_view

    store = open_store(root, settings, ticket_id)
    ws = ticket_view(root, settings, ticket_id, store).workspace
    if ws is None:
        raise NotADiff(f"{ticket_id} has no git workspace")
    if checkpoint is None:
        old, new, what = _branch_range(ws)
    else:
        old, new, what = _checkpoint_range(ticket_id, ws, checkpoint)
    diff = Diff(ticket_id, what, ws, checkpoint)
    _read(root, old, new, diff, store.redactor)
    return diff


def _branch_range(ws: dict[str, Any]) -> tuple[str, str, str]:
    """base...branch; once the branch is gone after its merge, the merge commit's own change."""
    if ws["merged"] and ws["branchDeleted"]:
        merged = ws["merged"]
        return f"{merged}^1", merged, f"the merge commit {merged[:10]} against {ws['base']}"
    return f"{ws['base']}...", ws["branch"], f"branch {ws['branch']} against {ws['base']}"


def _checkpoint_range(ticket_id: str, ws: dict[str, Any], sha: str) -> tuple[str, str, str]:
    shas = [c["sha"] for c in ws["checkpoints"]]
    if not _SHA.fullmatch(sha) or sha not in shas:
        raise NotADiff(f"{sha[:64]!r} is not a checkpoint of {ticket_id}'s current attempt")
    at = shas.index(sha)
    phase = ws["checkpoints"][at]["phase"]
    if at == 0:
        return f"{ws['base']}...", sha, f"checkpoint {sha[:10]} ({phase}) against {ws['base']}"
    before = shas[at - 1]
    return before, sha, f"checkpoint {sha[:10]} ({phase}) against {before[:10]}"


def _read(root: Path, old: str, new: str, diff: Diff, redact: Any) -> None:
    from tf_fsm.workspace.git import Git, said

    # `old...` + `new` as one argument (A...B); a two-dot range otherwise (old new)
    span = [f"{old}{new}"] if old.endswith("...") else [old, new]
    result = Git(root).run(
        "diff", "--no-color", "--no-ext-diff", "--end-of-options", *span, "--",
        check=False, keep=DIFF_BYTES,
    )  # fmt: skip
    if result.timed_out or result.exit_code != 0:
        diff.problem = redact(said(result))
        return
    # redacted before it is cut, so that no secret is kept in part
    text = redact(result.stdout)
    if len(text) > DIFF_BYTES:
        text, diff.cut = text[: text.rfind("\n", 0, DIFF_BYTES) + 1], True
    diff.lines = [(_kind(line), line) for line in text.splitlines()]


def _kind(line: str) -> str:
    if line.startswith(("diff --git", "+++ ", "--- ", "index ")):
        return "file"
    if line.startswith("@@"):
        return "hunk"
    if line.startswith("+"):
        return "add"
    if line.startswith("-"):
        return "del"
    return ""
