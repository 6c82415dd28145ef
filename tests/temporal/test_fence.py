"""Fenced pushes with real git (a bare repository as the remote): the owner ref's lease is
honoured inside `git push --atomic`, so a try another took over publishes nothing at all."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.gitrepo import git, init_repo, isolate
from tf_fsm.temporal.fence import Fenced, Update, owner_ref, publish, remote_values, take
from tf_fsm.workspace.git import Git

BRANCH = "refs/heads/tf/pt-1"


def test_a_try_taken_over_publishes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    clones = []
    for name in ("a", "b"):
        clone = init_repo(tmp_path / name, {f"{name}.txt": name})
        git(clone, "remote", "add", "origin", str(remote))
        clones.append(Git(clone))
    a, b = clones
    owner = owner_ref("pt-1")

    zombie = take(a, "pt-1", "host-a try 1", "act", None)
    took = take(b, "pt-1", "host-b try 2", "act", remote_values(b, owner)[owner])
    assert took.previous_activity == "act"
    with pytest.raises(Fenced):  # try 1's token is gone: its lease on it fails
        take(a, "pt-1", "host-a try 1 again", "act", zombie.token)

    before = remote_values(a, BRANCH, owner)
    with pytest.raises(Fenced, match="refused the publication"):
        publish(a, zombie, [Update(BRANCH, None, a.rev("HEAD"))])
    assert remote_values(a, BRANCH, owner) == before == {BRANCH: None, owner: took.token}

    seal = publish(b, took, [Update(BRANCH, None, b.rev("HEAD"))])
    assert remote_values(b, BRANCH, owner) == {BRANCH: b.rev("HEAD"), owner: seal}
    assert git(b.cwd, "rev-parse", f"{seal}^") == took.token
