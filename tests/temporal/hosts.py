"""Two hosts sharing a remote, for the data plane's tests: a bare repository as the shared
remote, two clones of it (host A, host B), a project whose agent is the fake agent CLI
(tests/fake_agent.py: it edits files, so phases make checkpoints), and the activities run
without a server (temporalio.testing.ActivityEnvironment), as a worker of either host would
run them."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

from temporalio.testing import ActivityEnvironment

from tests.e2e.workspace_project import Project
from tests.gitrepo import git, isolate
from tf_fsm.temporal.activities import TicketActivities
from tf_fsm.temporal.identity import repository_identity
from tf_fsm.temporal.orders import MergeOrder, PhaseOrder, TicketFiles

T = TypeVar("T")
TICKET = "pt-1"


@dataclass(frozen=True)
class Hosts:
    remote: Path
    a: Path
    b: Path
    log: Path  # every agent invocation, one JSON line each (FAKE_AGENT_LOG)

    def activities(self, clone: Path) -> TicketActivities:
        return TicketActivities(clone, host=clone.name)

    def order(self, files: TicketFiles) -> PhaseOrder:
        return PhaseOrder(repository_identity(self.a), TICKET, files)

    def merge_order(self, files: TicketFiles, base: str = "main") -> MergeOrder:
        return MergeOrder(repository_identity(self.a), TICKET, base, files)

    def calls(self) -> Counter[tuple[Any, ...]]:
        """(attempt, phase, role) of each agent invocation, on either host."""
        lines = self.log.read_text().splitlines() if self.log.exists() else []
        return Counter(
            (c["attempt"], c["phase"], c["role"]) for c in (json.loads(line) for line in lines)
        )

    def remote_ref(self, ref: str) -> str | None:
        out = git(self.remote, "for-each-ref", "--format=%(objectname)", ref)
        return out or None


def make_hosts(project: Path, tmp_path: Path, monkeypatch: Any) -> Hosts:
    """The project committed on `main`, pushed to a bare remote, cloned twice."""
    isolate(monkeypatch)
    made = Project(project, tmp_path)
    made.create([TICKET])
    made.plan(edits=[{"phase": "implement", "file": "work.txt"}])
    for key, value in made.env().items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("TF_FSM_ROOT", raising=False)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    git(project, "remote", "add", "origin", str(remote))
    git(project, "push", "-q", "origin", "main")
    a, b = tmp_path / "host-a", tmp_path / "host-b"
    for clone in (a, b):
        git(tmp_path, "clone", "-q", str(remote), str(clone))
    return Hosts(remote, a, b, made.log)


def run_activity(
    fn: Any,
    order: Any,
    activity_id: str = "phase-1",
    attempt: int = 1,
    run_id: str = "run-1",
    heartbeats: list[Any] | None = None,
) -> Any:
    """One try of an activity, as a worker runs it: its own activity id and try number;
    with `heartbeats`, a heartbeat timeout of 0.3 s and its heartbeats' details kept there."""
    env = ActivityEnvironment()
    env.info = dataclasses.replace(
        env.info,
        activity_id=activity_id,
        attempt=attempt,
        workflow_id="tf-fsm-test-pt-1",
        workflow_run_id=run_id,
        heartbeat_timeout=timedelta(seconds=0.3) if heartbeats is not None else None,
    )
    if heartbeats is not None:
        env.on_heartbeat = lambda *details: heartbeats.extend(details)
    return env.run(fn, order)
