"""The backlog on a cluster: real `tf-fsm worker` processes in three clones ("hosts") of a
bare remote, real dispatchers (`tf-fsm ralph --temporal`) in a fourth, real agents. Judged
from the outside: the remote's base branch, the agents' call log, the workflows' runs."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from tests.gitrepo import commit_all, git
from tests.temporal.cluster import HEARTBEAT_TIMEOUT, Cluster, wait_until
from tests.temporal.conftest import DevServer, alive, start_ticket
from tf_fsm.temporal.identity import repository_identity, workflow_id, workflow_prefix
from tf_fsm.temporal.merge_queue import merge_queue_id
from tf_fsm.temporal.orders import TicketFiles

TICKETS = [f"pt-{n}" for n in range(1, 7)]
SECRET = "sk-ant-api03-" + "Q" * 40


def runs_of(temporal: DevServer, root: Path, ticket: str) -> int:
    """How many runs the ticket's workflow id has had on the server."""
    wid = workflow_id(repository_identity(root), ticket)

    async def count() -> int:
        return len([w async for w in temporal.client.list_workflows(f'WorkflowId = "{wid}"')])

    return temporal.run(count())


def history(temporal: DevServer, root: Path, ticket: str) -> str:
    """The ticket's workflow history, as JSON."""
    handle = temporal.client.get_workflow_handle(workflow_id(repository_identity(root), ticket))
    return str(temporal.run(handle.fetch_history()).to_json())


def test_a_backlog_closes_across_three_hosts_under_two_dispatchers(
    cluster: Cluster, temporal: DevServer
) -> None:
    cluster.create(TICKETS)
    edit = {"phase": "implement", "file": "src/{ticket}.txt", "text": "done"}
    cluster.seed.plan(edits=[edit], secret=SECRET)  # the reviewers write it in their reviews
    for host in ("host-a", "host-b", "host-c"):
        cluster.worker(host)
    first = cluster.dispatcher("ralph")
    second = cluster.dispatcher("ralph", name="desk-2")
    # the first dispatcher is killed once a ticket has merged, and started again
    wait_until("a first merge", lambda: cluster.merges(), seconds=120)
    first.send_signal(signal.SIGKILL)
    first.wait()
    again = cluster.dispatcher("ralph")
    out = cluster.finish(again)
    cluster.finish(second, seconds=120)

    assert cluster.merges() == Counter(dict.fromkeys(TICKETS, 1))
    calls = Counter(
        (c["ticket"], c["attempt"], c["phase"], c["role"]) for c in cluster.agent_calls()
    )
    assert calls and set(calls.values()) == {1}, calls
    assert {c["ticket"] for c in cluster.agent_calls()} == set(TICKETS)
    hosts = {Path(c["cwd"]).relative_to(cluster.tmp).parts[0] for c in cluster.agent_calls()}
    assert len(hosts) > 1, hosts  # the backlog spread over the hosts
    for tid in TICKETS:  # an attempt's phases stay on the host of its first (its own queue)
        ran = {host_of(cluster, c["cwd"]) for c in cluster.agent_calls() if c["ticket"] == tid}
        assert len(ran) == 1, (tid, ran)
    desk = cluster.clone("desk")
    # the dispatchers' clones hold the merges, and the tk closes with them
    assert git(desk, "rev-parse", "main") == git(cluster.remote, "rev-parse", "main")
    assert "main fast-forwarded" in out
    for tid in TICKETS:
        assert "status: closed" in (desk / ".tickets" / f"{tid}.md").read_text()
        assert runs_of(temporal, desk, tid) == 1
        # the dispatcher's clone ends with the ticket's files, as a local run leaves them
        files = desk / ".tf/knowledge/tickets" / tid
        assert '"status": "closed"' in (files / "retry-state.json").read_text()
        assert (files / "events.jsonl").read_text().count('"TicketClosed"') == 1
    assert "closed" in out
    # what leaves a host is redacted: the histories and the knowledge commits hold no secret
    assert all(SECRET not in history(temporal, desk, tid) for tid in TICKETS)
    knowledge = git(cluster.remote, "log", "-p", "--all", "--format=%H")
    assert "Reviewed with credentials" in knowledge and SECRET not in knowledge
    status = subprocess.run(
        [sys.executable, "-m", "tf_fsm", "status", "--temporal", cluster.address, "--json"],
        cwd=desk,
        env=cluster.env(),
        capture_output=True,
        text=True,
    )
    assert status.returncode == 0, status.stderr
    rows = {row["ticket"]: row for row in map(json.loads, status.stdout.splitlines())}
    ended = {tid: (rows[tid]["workflow"], rows[tid]["last"]) for tid in TICKETS}
    assert ended == dict.fromkeys(TICKETS, ("completed", "closed"))
    # a closed ticket's workflow is not started again; run's --json is its end
    again = cluster.dispatcher("run", "pt-1", "--json", name="desk")
    said = cluster.finish(again, seconds=60).splitlines()
    assert any("already done by its workflow" in line for line in said), said
    assert json.loads(said[-1])["status"] == "closed" and runs_of(temporal, desk, "pt-1") == 1


def pause_in(cluster: Cluster, phase: str) -> Path:
    """Agents of `phase` say where they run in the sync file `reached` (their working
    directory) and wait for the sync file `go`."""
    reached = cluster.seed.sync / "reached"
    rule = {"phase": phase, "touch": str(reached), "until": str(cluster.seed.sync / "go")}
    cluster.seed.plan(
        edits=[{"phase": "implement", "file": "src/{ticket}.txt", "text": "done"}], pause=[rule]
    )
    return reached


def host_of(cluster: Cluster, workdir: str) -> str:
    return Path(workdir.strip()).relative_to(cluster.tmp).parts[0]


def test_a_worker_killed_mid_phase_is_taken_over_and_its_agent_is_gone(
    cluster: Cluster, temporal: DevServer
) -> None:
    cluster.create(["pt-1"])
    reached = pause_in(cluster, "implement")
    for host in ("host-a", "host-b"):
        cluster.worker(host)
    dispatcher = cluster.dispatcher("run", "pt-1")
    first = host_of(
        cluster, wait_until("the agent", lambda: reached.exists() and reached.read_text())
    )
    (agent,) = [c["pid"] for c in cluster.agent_calls() if c["phase"] == "implement"]
    reached.unlink()
    cluster.seed.go()
    cluster.workers[first].send_signal(signal.SIGKILL)
    killed = time.monotonic()
    wait_until("the killed worker's agent to end", lambda: not alive(agent), seconds=5)
    taken = wait_until(
        "another host's agent",
        lambda: [
            c for c in cluster.agent_calls() if c["phase"] == "implement" and c["pid"] != agent
        ],
        seconds=HEARTBEAT_TIMEOUT + 30,
    )
    takeover = time.monotonic() - killed
    cluster.finish(dispatcher, seconds=120)

    assert host_of(cluster, taken[0]["cwd"]) != first
    assert takeover < HEARTBEAT_TIMEOUT + 5, takeover
    assert cluster.merges() == Counter({"pt-1": 1})
    events = (cluster.clone("desk") / ".tf/knowledge/tickets/pt-1/events.jsonl").read_text()
    finished = [json.loads(line) for line in events.splitlines() if "InvocationFinished" in line]
    assert (
        Counter((e["attempt"], e["phase"], e["role"]) for e in finished).most_common(1)[0][1] == 1
    )
    assert events.count('"AttemptStarted"') == 1


def test_a_frozen_worker_s_stale_phase_is_refused_and_pushes_nothing(
    cluster: Cluster, temporal: DevServer
) -> None:
    cluster.create(["pt-1"])
    reached = pause_in(cluster, "implement")
    frozen = cluster.worker("host-a")
    dispatcher = cluster.dispatcher("run", "pt-1")
    wait_until("host-a's agent", lambda: reached.exists() and reached.read_text())
    reached.unlink()
    frozen.send_signal(signal.SIGSTOP)
    try:
        cluster.worker("host-b")
        where = wait_until(
            "host-b's agent", lambda: reached.exists() and reached.read_text(), seconds=60
        )
        assert host_of(cluster, where) == "host-b"
    finally:
        frozen.send_signal(signal.SIGCONT)
    cluster.seed.go()  # both agents finish their implement; only one may publish it
    cluster.finish(dispatcher, seconds=120)

    assert cluster.merges() == Counter({"pt-1": 1})
    assert cluster.checkpoints("pt-1")[("1", "implement")] == 1
    events = (cluster.clone("desk") / ".tf/knowledge/tickets/pt-1/events.jsonl").read_text()
    implemented = [
        json.loads(line)
        for line in events.splitlines()
        if '"PhaseCompleted"' in line and '"implement"' in line
    ]
    assert len(implemented) == 1


def test_the_merge_queue_continues_as_new_and_merges_each_ticket_once(
    cluster: Cluster, temporal: DevServer
) -> None:
    """Three tickets through a merge queue that continues as new every 2 merges."""
    tickets = ["pt-1", "pt-2", "pt-3"]
    cluster.create(tickets)
    cluster.seed.plan(edits=[{"phase": "implement", "file": "src/{ticket}.txt", "text": "done"}])
    cluster.worker("host-a", slots=2)
    desk = cluster.clone("desk")

    async def run_all() -> list[Any]:
        handles = [
            await start_ticket(
                temporal.client,
                desk,
                tid,
                cluster.queue,
                heartbeat_timeout_seconds=HEARTBEAT_TIMEOUT,
                merges_per_run=2,
            )
            for tid in tickets
        ]
        return [await handle.result() for handle in handles]

    ends = temporal.run(run_all())

    assert [end.status for end in ends] == ["closed"] * 3
    assert cluster.merges() == Counter(dict.fromkeys(tickets, 1))
    queue = merge_queue_id(workflow_prefix(repository_identity(desk)), "main")

    async def runs() -> list[str]:
        found = temporal.client.list_workflows(f'WorkflowId = "{queue}"')
        return [w.status.name async for w in found if w.status is not None]

    statuses = temporal.run(runs())
    assert statuses.count("CONTINUED_AS_NEW") == 1, statuses


def test_a_ticket_with_a_history_of_its_own_here_is_not_started_on_the_cluster(
    cluster: Cluster, temporal: DevServer
) -> None:
    cluster.create(["pt-1"])
    desk = cluster.clone("desk")
    here = subprocess.run(
        [sys.executable, "-m", "tf_fsm", "run", "pt-1", "--phases", "1", "--root", str(desk)],
        env=cluster.env(),
        capture_output=True,
        text=True,
    )
    assert here.returncode == 0, here.stderr
    journal = desk / ".tf/knowledge/tickets/pt-1/events.jsonl"
    before = journal.read_text()

    refused = cluster.dispatcher("run", "pt-1")

    assert refused.wait(timeout=60) == 2
    said = cluster.outputs[refused.pid].read_text()
    assert "this clone holds its history" in said and "tf-fsm run pt-1" in said
    assert runs_of(temporal, desk, "pt-1") == 0
    assert journal.read_text() == before


def test_a_refused_phase_ends_the_workflow_in_error_saying_why(
    cluster: Cluster, temporal: DevServer
) -> None:
    """An order naming a branch the remote never had: the worker refuses it (not retried),
    and the workflow ends in error with the refusal, not with a failed run."""
    cluster.create(["pt-1"])
    cluster.worker("host-a")
    desk = cluster.clone("desk")
    stale = TicketFiles(branch="f" * 40)

    async def run() -> Any:
        handle = await start_ticket(temporal.client, desk, "pt-1", cluster.queue, files=stale)
        return await handle.result()

    end = temporal.run(run())

    assert end.status == "error"
    assert "the order is stale" in end.reason and "f" * 40 in end.reason
    assert cluster.agent_calls() == []


def test_a_ticket_newer_than_a_workers_clone_runs_there(cluster: Cluster) -> None:
    """The worker cloned before the ticket was pushed: it brings its base up to the remote's
    before the ticket's first phase, and the ticket closes and merges."""
    cluster.create(["pt-1"])
    cluster.worker("host-a")
    cluster.seed.ticket("pt-9")
    commit_all(cluster.seed.root, "pt-9")
    git(cluster.seed.root, "push", "-q", str(cluster.remote), "main")

    said = cluster.finish(cluster.dispatcher("run", "pt-9"), seconds=120)

    assert cluster.merges() == Counter({"pt-9": 1}), said


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("ralph", "--workers", "2"), "--workers is not honoured"),
        (("ralph", "--dry-run"), "--dry-run is not honoured"),
        (("run", "pt-1", "--plan"), "--plan is not honoured"),
        (("status", "pt-1"), "name none"),
        (("ui", "--allow-actions"), "--allow-actions is not honoured"),
    ],
)
def test_options_a_cluster_does_not_honour_are_refused(
    cluster: Cluster, args: tuple[str, ...], said: str
) -> None:
    cluster.create(["pt-1"])
    refused = cluster.dispatcher(*args)
    assert refused.wait(timeout=60) == 2
    assert said in cluster.outputs[refused.pid].read_text()
