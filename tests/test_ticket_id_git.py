"""The ticket id rule (tf_fsm.storage.ticket_id) against git itself: every id it accepts is a
name git takes in the ticket's branch (`tf/<id>`) and refs (`refs/tf/<id>/...`), so a ticket
never gets as far as a raw git error; one git refuses is refused with a clear error naming it
(exit 2), before anything is made."""

from __future__ import annotations

import itertools
import json
import subprocess
from pathlib import Path

import pytest

from tests.conftest import run_cli, tk_ticket
from tests.gitrepo import commit_all, git, isolate
from tf_fsm.errors import InvalidTicketIdError
from tf_fsm.storage.ticket_id import validate_ticket_id

#: pieces ids are made of: the characters the rule allows, and git's special endings
PIECES = ["pt", "-", "_", ".", "1", "lock", ".lock", "@", "{"]


def git_takes(name: str) -> bool:
    done = subprocess.run(["git", "check-ref-format", name], capture_output=True)
    return done.returncode == 0


def test_every_id_the_rule_accepts_git_takes_in_a_branch_and_a_ref() -> None:
    accepted = refused = 0
    for n in (1, 2, 3):
        for parts in itertools.product(PIECES, repeat=n):
            ticket_id = "".join(parts)
            try:
                validate_ticket_id(ticket_id)
            except InvalidTicketIdError:
                refused += 1
                continue
            accepted += 1
            for name in (f"refs/heads/tf/{ticket_id}", f"refs/tf/{ticket_id}/attempt-1"):
                assert git_takes(name), name
    assert accepted > 50 and refused > 50  # both sides really tried


@pytest.mark.parametrize("ticket_id", ["pt-1.lock", "pt-1.", "a.lock"])
def test_an_id_git_cannot_take_is_refused_naming_it(ticket_id: str) -> None:
    assert not git_takes(f"refs/heads/tf/{ticket_id}")
    with pytest.raises(InvalidTicketIdError) as info:
        validate_ticket_id(ticket_id)
    assert "git cannot take it in a branch or ref name" in info.value.reason


def test_run_refuses_such_an_id_before_any_branch_is_made(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    assert run_cli("init", cwd=project).returncode == 0
    settings = {"workspace": {"mode": "worktree"}, "executor": {"kind": "scripted"}}
    (project / ".tf" / "config" / "settings.json").write_text(json.dumps(settings))
    (project / ".tickets" / "pt-1.lock.md").write_text(tk_ticket("pt-1.lock"))
    git(project, "init", "-q", "-b", "main")
    commit_all(project, "initial")
    done = run_cli("run", "pt-1.lock", cwd=project)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.startswith("tf-fsm: error: invalid ticket id 'pt-1.lock': git cannot")
    assert "fatal:" not in done.stderr
    assert git(project, "for-each-ref", "refs/heads/tf/", "refs/tf/") == ""
    assert not (project / ".tf" / "ralph" / "worktrees").exists()
