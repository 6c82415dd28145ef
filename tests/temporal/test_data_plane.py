"""The data plane across hosts: each phase of a ticket run by `run_phase` on one of two clones
of a shared remote, on the files the history holds, published with one fenced push."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from tests.gitrepo import git
from tests.temporal.hosts import TICKET, make_hosts, run_activity
from tf_fsm.temporal.orders import TicketFiles


def test_scratch(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hosts = make_hosts(project, tmp_path, monkeypatch)
    first = run_activity(hosts.activities(hosts.a).run_phase, hosts.order(TicketFiles()))
    print(first.status, first.phase)
    second = run_activity(
        hosts.activities(hosts.b).run_phase, hosts.order(first.files), activity_id="phase-2"
    )
    print(second.status, second.phase, second.journal)
    print(hosts.calls())
    print(git(hosts.b, "log", "--oneline", "--all"))
    assert False
