"""The backlog on a cluster: real `tf-fsm worker` processes in three clones ("hosts") of a
bare remote, real dispatchers (`tf-fsm ralph --temporal`) in a fourth, real agents. Judged
from the outside: the remote's base branch, the agents' call log, the workflows' runs."""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from tests.temporal.cluster import Cluster, wait_until
from tests.temporal.conftest import DevServer
from tf_fsm.temporal.identity import repository_identity, workflow_id

TICKETS = [f"pt-{n}" for n in range(1, 7)]


@pytest.fixture
def cluster(tmp_path: Path, temporal: DevServer) -> Iterator[Cluster]:
    made = Cluster(tmp_path, temporal.address, f"tf-fsm-{tmp_path.name}")
    try:
        yield made
    finally:
        made.end()


def runs_of(temporal: DevServer, root: Path, ticket: str) -> int:
    """How many runs the ticket's workflow id has had on the server."""
    wid = workflow_id(repository_identity(root), ticket)

    async def count() -> int:
        return len([w async for w in temporal.client.list_workflows(f'WorkflowId = "{wid}"')])

    return temporal.run(count())


def test_a_backlog_closes_across_three_hosts_under_two_dispatchers(
    cluster: Cluster, temporal: DevServer
) -> None:
    cluster.create(TICKETS)
    cluster.seed.plan(edits=[{"phase": "implement", "file": "src/{ticket}.txt", "text": "done"}])
    for host in ("host-a", "host-b", "host-c"):
        cluster.worker(host)
    first = cluster.dispatcher("ralph")
    second = cluster.dispatcher("ralph", name="desk-2")
    # the first dispatcher is killed once a ticket has merged, and started again
    wait_until("a first merge", lambda: cluster.merges(), seconds=120)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    again = cluster.dispatcher("ralph")
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0, err
    out2, err2 = second.communicate(timeout=120)
    assert second.returncode == 0, err2

    assert cluster.merges() == Counter({tid: 1 for tid in TICKETS})
    calls = Counter((c["ticket"], c["attempt"], c["phase"], c["role"]) for c in cluster.agent_calls())
    assert calls and set(calls.values()) == {1}, calls
    assert {c["ticket"] for c in cluster.agent_calls()} == set(TICKETS)
    hosts = {Path(c["cwd"]).relative_to(cluster.tmp).parts[0] for c in cluster.agent_calls()}
    assert len(hosts) > 1, hosts  # the backlog spread over the hosts
    desk = cluster.clone("desk")
    for tid in TICKETS:
        assert runs_of(temporal, desk, tid) == 1
        # the dispatcher's clone ends with the ticket's files, as a local run leaves them
        files = desk / ".tf/knowledge/tickets" / tid
        assert '"status": "closed"' in (files / "retry-state.json").read_text()
        assert (files / "events.jsonl").read_text().count('"TicketClosed"') == 1
    assert "closed" in out
