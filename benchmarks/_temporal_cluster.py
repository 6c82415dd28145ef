"""The cluster of bench_temporal.py on one machine: a Temporal dev server (`tf-fsm temporal
dev`), a bare repository standing in for the shared remote, clones of it as hosts running real
`tf-fsm worker` processes, a clone for the dispatcher, and an agent that logs when it starts
(time, pid, working directory, ticket, phase) then does what sleepy_agent.sh does.

Imported after _budget (the byte-compiled copy of tf_fsm is on PYTHONPATH for every process
started here), and only once the temporal extra is known to be installed."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from _budget import CHECKOUT
from temporalio import activity, workflow
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker

sys.path.append(str(CHECKOUT))  # tests.gitrepo: the fixed git identity the tests use too
from tests.gitrepo import GIT_ENV
from tf_fsm.settings.project import STATE_IGNORE, STATE_IGNORE_RELPATH
from tf_fsm.tk.tickets import new_ticket

SLEEPY = Path(__file__).resolve().parent / "sleepy_agent.sh"
#: a worker that has not heartbeaten for this long is taken for dead
HEARTBEAT_TIMEOUT = 2.0
#: empty activities per workflow, for Temporal's round trip alone
EMPTY_ACTIVITIES = 20
#: the agent: its start logged, implement edits a file of the ticket's own (so each ticket has
#: a checkpoint and a real merge), the first implement (none yet made the file
#: BENCH_IMPLEMENT_ONCE) sleeps BENCH_IMPLEMENT_SLEEP more; then sleepy_agent.sh
AGENT = f"""#!/bin/sh
if [ -n "$BENCH_AGENT_LOG" ]; then
  echo "$(date +%s.%N) $$ $PWD $TF_TICKET_ID $TF_PHASE" >>"$BENCH_AGENT_LOG"
fi
if [ "$TF_PHASE" = implement ]; then
  mkdir -p work && echo "$TF_TICKET_ID" >"work/$TF_TICKET_ID.txt"
  if [ -n "$BENCH_IMPLEMENT_ONCE" ] && [ ! -e "$BENCH_IMPLEMENT_ONCE" ]; then
    : >"$BENCH_IMPLEMENT_ONCE" && sleep "$BENCH_IMPLEMENT_SLEEP"
  fi
fi
exec {SLEEPY}
"""
#: a `git` first on the PATH that logs each call's nanoseconds and arguments (BENCH_GIT_LOG)
GIT_SHIM = """#!/bin/sh
s=$(date +%s%N)
{git} "$@"
rc=$?
echo "$(( $(date +%s%N) - s )) $*" >>"$BENCH_GIT_LOG"
exit $rc
"""


def git_env() -> dict[str, str]:
    return {**os.environ, **GIT_ENV}


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=git_env(), capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@dataclass
class DevServer:
    """`tf-fsm temporal dev --port 0` in the background: its address, once it listens."""

    proc: subprocess.Popen[str]
    address: str

    @classmethod
    def start(cls, tmp: Path, tries: int = 3) -> DevServer:
        """Started again, on another port, when the port it was given was taken meanwhile
        (other programs on the machine pick free ports too) and it died or another answered."""
        for n in range(tries):
            argv = [sys.executable, "-m", "tf_fsm", "temporal", "dev", "--port", "0"]
            argv += ["--db", str(tmp / f"dev-{n}.db")]
            log = (tmp / "dev-server.log").open("w")
            proc = subprocess.Popen(argv, cwd=tmp, stdout=subprocess.PIPE, stderr=log, text=True)
            assert proc.stdout is not None
            line = proc.stdout.readline()  # "temporal dev server: 127.0.0.1:PORT (history ...)"
            if line:
                server = cls(proc, line.split()[3])
                time.sleep(1.0)
                if proc.poll() is None and asyncio.run(answers(server.address)):
                    return server
                server.stop()
            else:
                proc.wait()
        said = (tmp / "dev-server.log").read_text()
        raise SystemExit(f"the dev server did not start: {said}")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


async def answers(address: str) -> bool:
    try:
        await Client.connect(address)
    except RuntimeError:
        return False
    return True


@dataclass
class Cluster:
    """One project: the remote, its clones, their workers, the agent's start log."""

    tmp: Path
    address: str
    queue: str
    agent_log: Path = field(init=False)
    remote: Path = field(init=False)
    workers: dict[str, subprocess.Popen[str]] = field(default_factory=dict)
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.tmp.mkdir(parents=True)
        self.agent_log = self.tmp / "agent.log"
        self.remote = self.tmp / "remote.git"

    def create(self, tickets: list[str], settings: dict[str, Any]) -> None:
        """The project (settings, tickets) committed on `main` and pushed to a bare remote."""
        seed = self.tmp / "seed"
        (seed / ".tickets").mkdir(parents=True)
        (seed / ".tf" / "config").mkdir(parents=True)
        agent = self.tmp / "agent.sh"
        agent.write_text(AGENT, encoding="utf-8")
        agent.chmod(0o755)
        full = {
            "executor": {"kind": "command", "command": [str(agent)]},
            "temporal": {"heartbeatTimeoutSeconds": HEARTBEAT_TIMEOUT, "taskQueue": self.queue},
            **settings,
        }
        (seed / ".tf" / "config" / "settings.json").write_text(json.dumps(full, indent=2))
        for i, tid in enumerate(tickets):
            text = new_ticket(tid, f"Ticket {i}", created="2026-02-10T12:00:00Z")
            (seed / ".tickets" / f"{tid}.md").write_text(text, encoding="utf-8")
        (seed / STATE_IGNORE_RELPATH).write_text(STATE_IGNORE, encoding="utf-8")
        git(seed, "init", "-q", "-b", "main")
        git(seed, "add", "-A")
        git(seed, "commit", "-q", "-m", "backlog")
        git(self.tmp, "clone", "-q", "--bare", str(seed), str(self.remote))
        shutil.rmtree(seed)

    def clone(self, name: str) -> Path:
        place = self.tmp / name
        if not place.exists():
            git(self.tmp, "clone", "-q", str(self.remote), str(place))
        return place

    def env(self, **more: str) -> dict[str, str]:
        env = {**git_env(), "BENCH_AGENT_LOG": str(self.agent_log), **self.extra_env, **more}
        env.pop("TF_FSM_ROOT", None)
        return env

    def worker(self, host: str) -> subprocess.Popen[str]:
        """`tf-fsm worker` in the host's clone, once it says it polls."""
        root = self.clone(host)
        argv = [sys.executable, "-m", "tf_fsm", "worker", "--temporal", self.address]
        argv += ["--host", host, "--root", str(root), "--grace", "0"]
        proc = subprocess.Popen(
            argv,
            cwd=root,
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=(self.tmp / f"{host}.log").open("a"),
            text=True,
        )
        assert proc.stdout is not None
        if not proc.stdout.readline():
            said = (self.tmp / f"{host}.log").read_text()
            raise SystemExit(f"the worker of {host} ended: {said}")
        self.workers[host] = proc
        return proc

    def tf_fsm(self, clone: str, *args: str, **env: str) -> float:
        """`tf-fsm <args> --root <clone>` run to its end (exit 0 checked): its wall seconds."""
        root = self.clone(clone)
        argv = [sys.executable, "-m", "tf_fsm", *args, "--root", str(root)]
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=root, env=self.env(**env), capture_output=True, text=True)
        wall = time.perf_counter() - start
        if done.returncode != 0:
            raise SystemExit(f"tf-fsm {' '.join(args)} exited {done.returncode}: {done.stderr}")
        return wall

    def start(self, clone: str, *args: str) -> subprocess.Popen[str]:
        """`tf-fsm <args> --root <clone>` started, not waited for (its output to a log)."""
        root = self.clone(clone)
        argv = [sys.executable, "-m", "tf_fsm", *args, "--root", str(root)]
        out = (self.tmp / f"{clone}.out").open("a")
        return subprocess.Popen(
            argv, cwd=root, env=self.env(), stdout=out, stderr=subprocess.STDOUT, text=True
        )

    def end(self) -> None:
        for proc in self.workers.values():
            if proc.poll() is None:
                proc.kill()
            proc.wait()

    def agent_starts(self) -> list[tuple[float, int, str, str, str]]:
        """(time, pid, host, ticket, phase) of each agent start, in order."""
        if not self.agent_log.exists():
            return []
        found = []
        for line in self.agent_log.read_text().splitlines():
            at, pid, cwd, ticket, phase = line.split()
            host = Path(cwd).relative_to(self.tmp).parts[0]
            found.append((float(at), int(pid), host, ticket, phase))
        return found

    def merged(self, base: str = "main") -> int:
        """How many merge commits the remote's base has."""
        return int(git(self.remote, "rev-list", "--count", "--merges", base))


def cpu_seconds(pid: int) -> float:
    """CPU seconds of a live process and of its children it has reaped (theirs included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(fields[i]) for i in (11, 12, 13, 14)) / os.sysconf("SC_CLK_TCK")


def machine_busy() -> tuple[int, int]:
    """(busy, total) jiffies of every core since boot, /proc/stat's first line: the share of
    the machine in use over a span, whoever used it."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]  # idle, iowait
    return sum(values) - idle, sum(values)


def tree_cpu_seconds(pid: int) -> float:
    """`cpu_seconds` of a live process and of its live descendants (the dev server's binary
    runs as a child of `tf-fsm temporal dev`)."""
    total = cpu_seconds(pid)
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            total += tree_cpu_seconds(int(child))
    return total


def git_shim(tmp: Path) -> dict[str, str]:
    """The environment that puts the logging `git` first on the PATH (its log: BENCH_GIT_LOG)."""
    where = tmp / "shim"
    where.mkdir(parents=True)
    shim = where / "git"
    shim.write_text(GIT_SHIM.format(git=shutil.which("git")), encoding="utf-8")
    shim.chmod(0o755)
    path = f"{where}{os.pathsep}{os.environ['PATH']}"
    return {"PATH": path, "BENCH_GIT_LOG": str(tmp / "git.log")}


def subcommand(args: list[str]) -> str:
    """git's subcommand among its arguments (past `-C DIR`, `-c KEY=VALUE` and the like)."""
    rest = iter(args)
    for arg in rest:
        if arg in ("-C", "-c", "--git-dir", "--work-tree"):
            next(rest, None)
        elif not arg.startswith("-"):
            return arg
    return "?"


def git_calls(log: Path) -> tuple[int, float, Counter[str]]:
    """How many git processes the shim saw, their seconds in all, and how many of each
    subcommand."""
    if not log.exists():
        return 0, 0.0, Counter()
    lines = [line.split() for line in log.read_text().splitlines() if line.strip()]
    kinds = Counter(subcommand(rest) for _, *rest in lines)
    return len(lines), sum(int(ns) for ns, *_ in lines) / 1e9, kinds


# -- Temporal alone: an empty activity's round trip -------------------------------------------


@activity.defn(name="bench_empty")
def empty_activity(n: int) -> int:
    return n


@workflow.defn(name="BenchEmpty", sandboxed=False)
class EmptyActivities:
    @workflow.run
    async def run(self, count: int) -> int:
        for n in range(count):
            await workflow.execute_activity(
                "bench_empty", n, start_to_close_timeout=timedelta(seconds=30)
            )
        return count


async def empty_round_trip(address: str) -> tuple[float, float]:
    """Seconds per empty activity (a workflow running EMPTY_ACTIVITIES one after the other),
    and a workflow with none, start to result; an in-process worker with a thread pool, as
    `tf-fsm worker` runs activities."""
    from concurrent.futures import ThreadPoolExecutor

    client = await Client.connect(address)
    with ThreadPoolExecutor(max_workers=1) as pool:
        async with Worker(
            client,
            task_queue="bench-empty",
            workflows=[EmptyActivities],
            activities=[empty_activity],
            activity_executor=pool,
            workflow_runner=UnsandboxedWorkflowRunner(),
        ):
            times = {}
            for count in (0, EMPTY_ACTIVITIES, 0, EMPTY_ACTIVITIES):
                start = time.perf_counter()
                await client.execute_workflow(
                    EmptyActivities.run,
                    count,
                    id=f"bench-{count}-{time.time_ns()}",
                    task_queue="bench-empty",
                )
                times[count] = time.perf_counter() - start  # the second of each: warm
    return (times[EMPTY_ACTIVITIES] - times[0]) / EMPTY_ACTIVITIES, times[0]
