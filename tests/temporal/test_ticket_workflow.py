"""A ticket through its Temporal workflow on the dev server: a worker in this process, each
phase a real `tf-fsm run --once --phases 1` process with the scripted agent, the ticket closed
on its second attempt; a second start of its workflow runs nothing twice."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus

from tests.conftest import tk_ticket
from tests.temporal.conftest import DevServer, clone_of_a_remote, start_ticket
from tf_fsm.core.journal import InvocationFinished
from tf_fsm.settings.load import load_settings
from tf_fsm.storage.backends import open_store
from tf_fsm.temporal.dispatcher import start_ticket as dispatch
from tf_fsm.temporal.identity import repository_identity, workflow_id
from tf_fsm.temporal.orders import TicketOrder
from tf_fsm.temporal.worker import running_worker
from tf_fsm.tk.tickets import read

STRONG = "openai-codex/gpt-5.3-codex"
#: a Major only the escalated fixer clears: attempt 1 blocks, attempt 2 closes
HARD = {"id": "M", "severity": "Major", "text": "`a.py:1` - hard", "fixedBy": [STRONG]}


def setup(project: Path) -> None:
    (project / ".tickets").mkdir(exist_ok=True)
    (project / ".tickets/pt-1.md").write_text(tk_ticket("pt-1"))
    (project / "scenario.json").write_text(json.dumps({"findings": [HARD]}))
    settings = {
        "metaModels": {"strong": {"model": STRONG, "thinking": "high"}},
        "workflow": {
            "failOn": ["Critical", "Major"],
            "escalation": {"enabled": True, "maxRetries": 3, "models": {"fixer": "strong"}},
        },
        "executor": {"kind": "scripted", "scenario": "scenario.json"},
    }
    (project / ".tf/config/settings.json").write_text(json.dumps(settings))


def agent_calls(project: Path) -> Counter[tuple[Any, ...]]:
    store = open_store(project, load_settings(project), "pt-1")
    return Counter(
        (e.attempt, e.phase, e.role)
        for e in store.read_events().events
        if isinstance(e, InvocationFinished)
    )


def test_a_ticket_closes_through_its_workflow_once(project: Path, temporal: DevServer) -> None:
    clone_of_a_remote(project)
    setup(project)
    queue = f"tf-fsm-{project.parent.name}"  # a queue of the test's own

    async def scenario() -> tuple[Any, ...]:
        # Two dispatchers start the ticket before any worker polls: one workflow.
        first = await start_ticket(temporal.client, project, "pt-1", task_queue=queue)
        second = await start_ticket(temporal.client, project, "pt-1", task_queue=queue)
        async with running_worker(temporal.client, project, task_queue=queue):
            result = await first.result()
            progress = await first.query("progress")
        described = await second.describe()
        return first, second, result, progress, described

    first, _second, result, progress, described = temporal.run(scenario())

    assert first.id == workflow_id(repository_identity(project), "pt-1")
    assert described.run_id == first.result_run_id  # the second start attached to it
    assert described.status == WorkflowExecutionStatus.COMPLETED
    assert (result.status, result.attempt) == ("closed", 2)
    assert result.phases == progress["phases"] > 2  # one activity per phase
    assert progress["last"]["status"] == "closed"
    assert read(project, "pt-1").status == "closed"
    calls = agent_calls(project)
    assert {attempt for attempt, _, _ in calls} == {1, 2}
    assert set(calls.values()) == {1}, calls  # each (attempt, phase, role): one agent call


def test_a_closed_tickets_workflow_started_again_runs_nothing(
    project: Path, temporal: DevServer
) -> None:
    clone_of_a_remote(project)
    setup(project)
    queue = f"tf-fsm-{project.parent.name}"
    order = TicketOrder(repository_identity(project), "pt-1", task_queue=queue)

    async def twice() -> tuple[Any, Any, Counter[tuple[Any, ...]]]:
        async with running_worker(temporal.client, project, task_queue=queue):
            first = await start_ticket(temporal.client, project, "pt-1", task_queue=queue)
            closed = await first.result()
            calls = agent_calls(project)
            return closed, await dispatch(temporal.client, order), calls

    closed, again, calls = temporal.run(twice())

    assert closed.status == "closed"
    assert (again.how, again.end.status) == ("done", "closed")  # no new run started
    assert again.handle.id == workflow_id(order.repository, "pt-1")
    assert agent_calls(project) == calls


def test_a_quiet_attempt_longer_than_the_heartbeat_timeout_is_not_taken_away(
    project: Path, temporal: DevServer
) -> None:
    """The agent prints nothing for seconds; the activity heartbeats from its own thread, so a
    1 s heartbeat timeout does not take the attempt away (it would be retried, and fail)."""
    clone_of_a_remote(project)
    setup(project)
    (project / "scenario.json").write_text(json.dumps({"findings": [], "delaySeconds": 0.5}))
    queue = f"tf-fsm-{project.parent.name}"

    async def quiet() -> tuple[Any, float, list[int]]:
        async with running_worker(temporal.client, project, task_queue=queue):
            started = time.monotonic()
            handle = await start_ticket(
                temporal.client, project, "pt-1", task_queue=queue, heartbeat_timeout_seconds=1.0
            )
            result = await handle.result()
            took = time.monotonic() - started
        history = await handle.fetch_history()
        started_events = [
            event.activity_task_started_event_attributes
            for event in history.events
            if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED
        ]
        return result, took, [event.attempt for event in started_events]

    result, took, tries = temporal.run(quiet())

    # Without the heartbeats the first try times out and a second one runs while the first
    # goes on (nothing fences it): the second finds the ticket closed by the first.
    assert (result.status, result.attempt) == ("closed", 1)
    assert took > 3.0  # several agent calls of 0.5 s each: well past the heartbeat timeout
    assert tries and set(tries) == {1}  # each phase on its first try (the history keeps the last)


def test_a_cancelled_workflow_ends_its_running_attempt(project: Path, temporal: DevServer) -> None:
    """Cancelled while its agent is quiet: the activity is cancelled at its next heartbeat,
    and the `tf-fsm run` it started (the ticket lock's holder) ends with its process group."""
    clone_of_a_remote(project)
    setup(project)
    (project / "scenario.json").write_text(json.dumps({"findings": [], "delaySeconds": 30}))
    queue = f"tf-fsm-{project.parent.name}"
    store = open_store(project, load_settings(project), "pt-1")

    async def cancelled() -> tuple[int, float]:
        async with running_worker(temporal.client, project, task_queue=queue):
            handle = await start_ticket(
                temporal.client, project, "pt-1", task_queue=queue, heartbeat_timeout_seconds=1.5
            )
            deadline = time.monotonic() + 30
            # this process holds the lock a moment (the worker rewrites the ticket's files),
            # then the phase's run holds it
            while (holder := store.lock_holder()) in (None, os.getpid()) and (
                time.monotonic() < deadline
            ):
                await asyncio.sleep(0.05)
            assert holder is not None, "the attempt never started"
            await handle.cancel()
            cancelled_at = time.monotonic()
            while store.lock_holder() is not None and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            return holder, time.monotonic() - cancelled_at

    holder, took = temporal.run(cancelled())

    # one heartbeat (0.5 s), then the group's end; the agent sleeps 30 s: half of that is room
    # for a busy machine and still tells the two apart
    assert took < 15.0
    with pytest.raises(ProcessLookupError):
        os.kill(holder, 0)


def test_a_ticket_out_of_retries_ends_its_workflow_exhausted(
    project: Path, temporal: DevServer
) -> None:
    """A finding no model fixes, two attempts allowed: both block, and the workflow ends
    `exhausted` (run's exit 4), not `blocked`."""
    clone_of_a_remote(project)
    setup(project)
    never = {"id": "N", "severity": "Major", "text": "`a.py:1` - never", "fixedBy": []}
    (project / "scenario.json").write_text(json.dumps({"findings": [never]}))
    settings = json.loads((project / ".tf/config/settings.json").read_text())
    settings["workflow"]["escalation"]["maxRetries"] = 2
    (project / ".tf/config/settings.json").write_text(json.dumps(settings))
    queue = f"tf-fsm-{project.parent.name}"

    async def exhausted() -> Any:
        async with running_worker(temporal.client, project, task_queue=queue):
            handle = await start_ticket(temporal.client, project, "pt-1", task_queue=queue)
            return await handle.result()

    end = temporal.run(exhausted())

    assert (end.status, end.attempt) == ("exhausted", 2)
    assert {attempt for attempt, _, _ in agent_calls(project)} == {1, 2}


def test_a_ticket_workflow_continues_as_new_every_few_phases(
    project: Path, temporal: DevServer
) -> None:
    """Two phases per run: the ticket closes over several runs of its workflow, each phase
    run once, the phases counted across runs."""
    clone_of_a_remote(project)
    setup(project)
    (project / "scenario.json").write_text(json.dumps({"findings": []}))
    queue = f"tf-fsm-{project.parent.name}"

    async def chained() -> tuple[Any, list[str]]:
        async with running_worker(temporal.client, project, task_queue=queue):
            handle = await start_ticket(
                temporal.client, project, "pt-1", task_queue=queue, phases_per_run=2
            )
            end = await handle.result()
        wid = workflow_id(repository_identity(project), "pt-1")
        runs = temporal.client.list_workflows(f'WorkflowId = "{wid}"')
        return end, [w.status.name async for w in runs if w.status is not None]

    end, runs = temporal.run(chained())

    assert (end.status, end.attempt) == ("closed", 1)
    assert runs.count("CONTINUED_AS_NEW") >= 1 and runs.count("COMPLETED") == 1, runs
    assert end.phases >= 3
    assert set(agent_calls(project).values()) == {1}
