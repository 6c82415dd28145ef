"""A cluster on one machine, for the many-hosts tests: a bare repository standing in for the
shared remote, a clone of it per "host", each running a real `tf-fsm worker` process, and a
clone for the dispatcher (`tf-fsm ralph --temporal`). Agents are real processes
(tests/fake_agent.py) whose calls, from every host, go to one log."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.e2e.workspace_project import Project
from tests.gitrepo import GIT_ENV, git

#: a worker that has not heartbeaten for this long is taken for dead (short, for the tests)
HEARTBEAT_TIMEOUT = 2.0


class Cluster:
    def __init__(self, tmp_path: Path, address: str, queue: str) -> None:
        self.tmp, self.address, self.queue = tmp_path, address, queue
        self.seed = Project(tmp_path / "seed", tmp_path)
        self.seed.root.mkdir()
        self.remote = tmp_path / "remote.git"
        self.workers: dict[str, subprocess.Popen[str]] = {}
        self.started: list[subprocess.Popen[str]] = []
        self.outputs: dict[int, Path] = {}

    def create(self, tickets: Sequence[str], settings: dict[str, Any] | None = None) -> None:
        """The project (settings, tickets, one file per ticket) pushed to the bare remote."""
        extra = {
            "temporal": {"heartbeatTimeoutSeconds": HEARTBEAT_TIMEOUT, "taskQueue": self.queue}
        }
        files = {f"src/{tid}.txt": f"{tid}\n" for tid in tickets}
        self.seed.create(tickets, {**extra, **(settings or {})}, files)
        git(self.tmp, "clone", "-q", "--bare", str(self.seed.root), str(self.remote))

    def clone(self, name: str) -> Path:
        place = self.tmp / name
        if not place.exists():
            git(self.tmp, "clone", "-q", str(self.remote), str(place))
        return place

    def env(self) -> dict[str, str]:
        env = {**os.environ, **GIT_ENV, **self.seed.env()}
        env.pop("TF_FSM_ROOT", None)  # each process runs in its own clone
        env.pop("PYTEST_ADDOPTS", None)
        return env

    def worker(self, host: str, slots: int = 1) -> subprocess.Popen[str]:
        """`tf-fsm worker` in the host's clone, once it says it polls."""
        root = self.clone(host)
        argv = [sys.executable, "-m", "tf_fsm", "worker", "--temporal", self.address]
        argv += ["--host", host, "--root", str(root), "--slots", str(slots)]
        proc = subprocess.Popen(
            argv,
            cwd=root,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=(self.tmp / f"{host}.log").open("a"),
            text=True,
        )
        self.started.append(proc)
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, f"the worker of {host} ended before polling: see {self.tmp / host}.log"
        self.workers[host] = proc
        return proc

    def dispatcher(self, *args: str, name: str = "desk") -> subprocess.Popen[str]:
        """`tf-fsm <args> --temporal ...` in the dispatcher's clone (started, not waited for)."""
        root = self.clone(name)
        argv = [sys.executable, "-m", "tf_fsm", *args, "--temporal", self.address]
        argv += ["--root", str(root)]
        out = (self.tmp / f"{name}.out").open("a")
        proc = subprocess.Popen(
            argv, cwd=root, env=self.env(), stdout=out, stderr=subprocess.STDOUT, text=True
        )
        self.started.append(proc)
        self.outputs[proc.pid] = self.tmp / f"{name}.out"
        return proc

    def finish(self, proc: subprocess.Popen[str], seconds: float = 300) -> str:
        """Wait for a dispatcher; what it printed (its exit code checked: 0)."""
        code = proc.wait(timeout=seconds)
        said = self.outputs[proc.pid].read_text()
        assert code == 0, said
        return said

    def end(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()

    # -- what happened, judged from the outside -----------------------------------------

    def merges(self, base: str = "main") -> Counter[str]:
        """How many commits on the remote's base branch name each ticket as merged."""
        log = git(
            self.remote,
            "log",
            base,
            "--format=%(trailers:key=Tf-Merged-Tip,valueonly)"
            "%x00%(trailers:key=Tf-Ticket,valueonly)%x1e",
        )
        found: Counter[str] = Counter()
        for record in log.split("\x1e"):
            tip, _, ticket = record.strip().partition("\x00")
            if tip.strip():
                found[ticket.strip()] += 1
        return found

    def agent_calls(self) -> list[dict[str, Any]]:
        log = self.seed.log
        if not log.exists():
            return []
        return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]

    def checkpoints(self, ticket: str) -> Counter[tuple[str, str]]:
        """The (attempt, phase) checkpoints on the remote's ticket branch, or on its base once
        it merged there."""
        refs = git(self.remote, "for-each-ref", "--format=%(refname)", f"refs/heads/tf/{ticket}")
        where = refs or "main"
        log = git(
            self.remote,
            "log",
            where,
            "--format=%(trailers:key=Tf-Ticket,valueonly)%x00%(trailers:key=Tf-Attempt,valueonly)"
            "%x00%(trailers:key=Tf-Phase,valueonly)%x1e",
        )
        found: Counter[tuple[str, str]] = Counter()
        for record in log.split("\x1e"):
            parts = [p.strip() for p in record.strip().split("\x00")]
            if len(parts) == 3 and parts[0] == ticket and parts[2]:
                found[(parts[1], parts[2])] += 1
        return found


def wait_until(what: str, check: Any, seconds: float = 60.0) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)
