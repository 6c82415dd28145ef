"""Many hosts on Temporal (docs/many-hosts.md): what the cluster costs against a local run.

Each part starts from a bare repository standing in for the shared remote, with clones of it as
hosts, each running a real `tf-fsm worker` against a Temporal dev server this benchmark starts
(`tf-fsm temporal dev --port 0`), and real agent processes (sleepy_agent.sh behind a script that
logs when it starts; implement edits a file of the ticket's own, so every ticket checkpoints
and merges). The settings: the default lifecycle, `temporal.heartbeatTimeoutSeconds` 2.

1. Dispatch overhead per phase: one ticket's lifecycle through its workflow (`tf-fsm run ID
   --temporal`, one worker, the agent sleeping 0 s) against the same lifecycle run locally
   (`tf-fsm run ID --worktree` in an equivalent clone: same settings, same phases, the same
   merge), in turns over several tickets; (cluster - local) / phases. Also per phase: the
   agent-start-to-agent-start gaps (free of the dispatcher's start and its 0.5 s poll), and
   what it can attribute: a `tf-fsm run` child's start (`run ID --plan --json`), the git
   processes of each side (a logging `git` first on the PATH, one extra run each), and
   Temporal's round trip for an empty activity (an in-process worker). Budget <= 50 ms.
2. Takeover: two workers; a worker is SIGKILLed while its agent sleeps in implement; the time
   until the other worker's agent starts implement again. Budget <= heartbeat timeout + 5 s.
3. Throughput: an untagged backlog, agents sleeping 1 s per invocation, `tf-fsm ralph
   --temporal` until every ticket is merged on the remote, 3 workers (3 clones) against 1.
   Budget: ratio <= 0.40. Printed: CPU per ticket (dispatcher, workers, their runs, agents,
   git: every process this benchmark starts but the dev server) and the best ratio the cores
   allow for it.

    python benchmarks/bench_temporal.py [--trials 3] [--takeovers 3] [--tickets 6] [--sleep 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _budget import budget

from tf_fsm.temporal.binary import TemporalMissing, require_sdk, temporal_binary

try:
    require_sdk()
    temporal_binary()
    import temporalio.client  # noqa: F401 - the SDK itself, not only its being found
except (ImportError, TemporalMissing) as exc:  # pragma: no cover - depends on the install
    print(
        f"SKIP  bench_temporal: the temporal extra is not installed ({exc}); "
        "pip install -e '.[dev,temporal]'"
    )
    raise SystemExit(0) from None

from _temporal_cluster import (
    HEARTBEAT_TIMEOUT,
    Cluster,
    DevServer,
    cpu_seconds,
    empty_round_trip,
    git_calls,
    git_shim,
    machine_busy,
    tree_cpu_seconds,
)

Start = tuple[float, int, str, str, str]
GitCalls = tuple[int, float, Counter[str]]

PHASE_BUDGET = 0.050
TAKEOVER_BUDGET = HEARTBEAT_TIMEOUT + 5.0
RATIO_BUDGET = 0.40


def phases_of(clone: Path, ticket: str) -> int:
    events = clone / ".tf" / "knowledge" / "tickets" / ticket / "events.jsonl"
    return events.read_text().count('"PhaseStarted"')


def agent_span(log: Path, ticket: str) -> float:
    """Seconds from the ticket's first agent start to its last, from an agent log."""
    times = [
        float(line.split()[0]) for line in log.read_text().splitlines() if line.split()[3] == ticket
    ]
    return max(times) - min(times)


# -- 1. dispatch overhead per phase ------------------------------------------------------------


def overhead(tmp: Path, address: str, trials: int) -> None:
    tickets = [f"bt-{n}" for n in range(1, trials + 2)]  # one more for the git count
    cluster = Cluster(tmp / "overhead", address, "bench-overhead")
    cluster.create([*tickets, "bt-plan"], {})
    zero = {"SLEEPY_AGENT_SECONDS": "0"}
    cluster.extra_env = zero
    local_log, cluster_log = tmp / "local-agent.log", cluster.agent_log
    try:
        cluster.worker("host-a")
        cluster.clone("local")
        local, remote, local_gaps, remote_gaps = [], [], [], []
        for tid in tickets[:trials]:
            local.append(
                cluster.tf_fsm("local", "run", tid, "--worktree", BENCH_AGENT_LOG=str(local_log))
            )
            remote.append(cluster.tf_fsm("desk", "run", tid, "--temporal", address))
            local_gaps.append(agent_span(local_log, tid))
            remote_gaps.append(agent_span(cluster_log, tid))
        phases = phases_of(cluster.clone("local"), tickets[0])
        assert phases_of(cluster.clone("desk"), tickets[0]) == phases, "not the same phases"
        assert cluster.merged() == trials, f"{cluster.merged()} merges on the remote"
        child = child_start(cluster, "host-a")
        cluster.end()
        cluster.workers.clear()
        git_local, git_remote = count_git(cluster, tickets[-1], tmp)
    finally:
        cluster.end()
    per_activity, empty_workflow = asyncio.run(empty_round_trip(address))
    report_overhead(local, remote, local_gaps, remote_gaps, phases)
    print("  what a phase costs on a worker, measured alone:")
    print(
        f"    a `tf-fsm run` child's start (`run ID --plan --json`, median of 5): "
        f"{child * 1e3:.0f} ms"
    )
    for side, (count, seconds, _) in (("local", git_local), ("cluster", git_remote)):
        print(
            f"    git processes, {side} lifecycle: {count} taking {seconds:.2f} s "
            f"({count / phases:.1f} and {seconds / phases * 1e3:.0f} ms per phase; "
            "with the logging shim's own ~2 ms each)"
        )
    more = git_remote[2] - git_local[2]
    print(
        "    the cluster's extra git processes by subcommand: "
        + ", ".join(f"{kind} {n}" for kind, n in more.most_common(8))
    )
    print(
        f"    Temporal, an empty activity's round trip (workflow task + activity task, "
        f"in-process worker): {per_activity * 1e3:.1f} ms; an empty workflow start to "
        f"result {empty_workflow * 1e3:.1f} ms"
    )
    extra_git = (git_remote[1] - git_local[1]) / phases
    print(
        f"    sum of the attributable ones per phase: child {child * 1e3:.0f} + extra git "
        f"{extra_git * 1e3:.0f} + activity {per_activity * 1e3:.1f} = "
        f"{(child + extra_git + per_activity) * 1e3:.0f} ms"
    )
    per_phase = (statistics.median(remote) - statistics.median(local)) / phases
    budget(
        "dispatch overhead per phase",
        per_phase,
        PHASE_BUDGET,
        f"{per_phase * 1e3:.0f} ms (budget <= {PHASE_BUDGET * 1e3:.0f} ms)",
    )


def child_start(cluster: Cluster, host: str) -> float:
    times = [cluster.tf_fsm(host, "run", "bt-plan", "--plan", "--json") for _ in range(5)]
    return statistics.median(times)


def count_git(cluster: Cluster, ticket: str, tmp: Path) -> tuple[GitCalls, ...]:
    """One more lifecycle each side with the logging git: its calls on each (git_calls)."""
    counted = []
    for side in ("local", "cluster"):
        shim = git_shim(tmp / f"git-{side}")
        if side == "local":
            cluster.tf_fsm("local", "run", ticket, "--worktree", **shim)
        else:
            cluster.extra_env = {**cluster.extra_env, **shim}
            cluster.worker("host-g")
            cluster.tf_fsm("desk", "run", ticket, "--temporal", cluster.address)
        counted.append(git_calls(Path(shim["BENCH_GIT_LOG"])))
    return tuple(counted)


def report_overhead(
    local: list[float],
    remote: list[float],
    local_gaps: list[float],
    remote_gaps: list[float],
    phases: int,
) -> None:
    print(
        f"dispatch overhead: one ticket's lifecycle ({phases} phases, then the merge), "
        f"agent sleeping 0 s, {len(local)} tickets in turns"
    )
    ml, mr = statistics.median(local), statistics.median(remote)
    print(
        f"  local `tf-fsm run --worktree`: {ml:.2f} s (runs: "
        + ", ".join(f"{t:.2f}" for t in local)
        + ")"
    )
    print(
        f"  cluster `tf-fsm run --temporal`, one worker: {mr:.2f} s (runs: "
        + ", ".join(f"{t:.2f}" for t in remote)
        + ")"
    )
    print(f"  per phase: ({mr:.2f} - {ml:.2f}) / {phases} = {(mr - ml) / phases * 1e3:.0f} ms")
    gl, gr = statistics.median(local_gaps), statistics.median(remote_gaps)
    print(
        f"  first agent start to last, local {gl:.2f} s, cluster {gr:.2f} s: "
        f"{(gr - gl) / (phases - 1) * 1e3:.0f} ms per phase boundary (without the "
        "dispatcher's start, its first pickup and its 0.5 s poll)"
    )


# -- 2. takeover after a worker dies ------------------------------------------------------------


def takeover(tmp: Path, address: str, trial: int) -> float:
    """One trial: seconds from the SIGKILL of the worker whose agent sleeps in implement to
    the other worker's agent starting implement; the ticket then merges (checked)."""
    cluster = Cluster(tmp / f"takeover-{trial}", address, f"bench-takeover-{trial}")
    cluster.create(["bk-1"], {})
    once = cluster.tmp / "implement-slept"
    cluster.extra_env = {
        "SLEEPY_AGENT_SECONDS": "0",
        "BENCH_IMPLEMENT_SLEEP": "60",
        "BENCH_IMPLEMENT_ONCE": str(once),
    }
    try:
        for host in ("host-a", "host-b"):
            cluster.worker(host)
        dispatcher = cluster.start("desk", "run", "bk-1", "--temporal", address)
        first = wait_for(cluster, lambda starts: starts[:1], dispatcher)[0]
        time.sleep(0.5)  # mid-phase: the agent sleeps, the worker heartbeats
        cluster.workers[first[2]].send_signal(signal.SIGKILL)
        killed = time.time()
        again = wait_for(cluster, lambda starts: starts[1:], dispatcher)[0]
        took = again[0] - killed
        assert again[2] != first[2], f"implement started again on {again[2]}, the killed host"
        assert dispatcher.wait(120) == 0, (cluster.tmp / "desk.out").read_text()
        assert cluster.merged() == 1, "the ticket did not merge after the takeover"
        return took
    finally:
        cluster.end()


def wait_for(
    cluster: Cluster,
    pick: Callable[[list[Start]], list[Start]],
    dispatcher: subprocess.Popen[str],
    seconds: float = 60,
) -> list[Start]:
    """The implement starts `pick` finds in the agent log, once it finds some."""
    deadline = time.monotonic() + seconds
    while not (found := pick([s for s in cluster.agent_starts() if s[4] == "implement"])):
        if dispatcher.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"no agent in implement: {(cluster.tmp / 'desk.out').read_text()}")
        time.sleep(0.01)
    return found


def takeovers(tmp: Path, address: str, trials: int) -> None:
    times = [takeover(tmp, address, n) for n in range(trials)]
    print(
        f"takeover: a worker SIGKILLed mid-implement, to the other worker's agent starting it "
        f"(heartbeat timeout {HEARTBEAT_TIMEOUT:.0f} s), {trials} trials: min "
        f"{min(times):.2f} s, median {statistics.median(times):.2f} s, max {max(times):.2f} s"
    )
    budget(
        "takeover after a worker dies (max)",
        max(times),
        TAKEOVER_BUDGET,
        f"{max(times):.2f} s (budget <= heartbeat timeout + 5 s = {TAKEOVER_BUDGET:.0f} s)",
    )


# -- 3. three workers against one ---------------------------------------------------------------


def backlog(tmp: Path, server: DevServer, count: int, sleep: float, workers: int) -> Run:
    """`tf-fsm ralph --temporal` on an untagged backlog until every ticket merged."""
    cluster = Cluster(tmp / f"backlog-{workers}", server.address, f"bench-backlog-{workers}")
    cluster.create([f"bb-{n:02d}" for n in range(count)], {})
    cluster.extra_env = {"SLEEPY_AGENT_SECONDS": str(sleep)}
    try:
        for n in range(workers):
            cluster.worker(f"host-{n + 1}")
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        server_before, busy_before = tree_cpu_seconds(server.proc.pid), machine_busy()
        wall = cluster.tf_fsm("desk", "ralph", "--temporal", server.address)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        server_cpu = tree_cpu_seconds(server.proc.pid) - server_before
        busy_after = machine_busy()
        cpu = sum(cpu_seconds(p.pid) for p in cluster.workers.values())
        cpu += (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
        assert cluster.merged() == count, f"{cluster.merged()} of {count} tickets merged"
        busy = (busy_after[0] - busy_before[0]) / max(1, busy_after[1] - busy_before[1])
        return Run(wall, cpu, server_cpu, busy, os.getloadavg()[0])
    finally:
        cluster.end()


@dataclass(frozen=True)
class Run:
    """A backlog run: wall seconds; CPU seconds of the dispatcher and the workers (their runs,
    agents and git included) and of the dev server; the machine's busy share meanwhile
    (every process on it); the load average at its end."""

    wall: float
    cpu: float
    server_cpu: float
    busy: float
    load: float


def throughput(tmp: Path, server: DevServer, count: int, sleep: float) -> None:
    runs = {w: backlog(tmp, server, count, sleep, w) for w in (1, 3)}
    print(
        f"throughput: {count} untagged tickets, agents sleeping {sleep:.1f} s per invocation, "
        "`tf-fsm ralph --temporal` until every ticket merged on the remote"
    )
    for workers, run in runs.items():
        print(
            f"  {workers} worker{'s' if workers > 1 else ''}: {run.wall:.1f} s "
            f"({run.wall / count:.2f} s/ticket), CPU {run.cpu / count:.2f} s/ticket "
            f"(+ the dev server's {run.server_cpu / count:.2f} s/ticket); the machine "
            f"{run.busy:.0%} busy meanwhile (every process), load {run.load:.1f} at the end"
        )
    one, three = runs[1], runs[3]
    cores = os.cpu_count() or 1
    floor = max(one.wall / 3, (three.cpu + three.server_cpu) / cores) / one.wall
    print(
        f"  best ratio {cores} idle cores allow for that CPU (dev server included): "
        f"{floor:.2f} (max(t1 / 3, CPU / {cores}) / t1); the cores were "
        f"{three.busy:.0%} busy during the 3-worker run: "
        + (
            "bound by the cores"
            if floor > RATIO_BUDGET or three.busy > 0.9
            else "not bound by the cores"
        )
    )
    ratio = three.wall / one.wall
    budget(
        "3 workers / 1 worker, untagged, sleeping agents",
        ratio,
        RATIO_BUDGET,
        f"{ratio:.3f} (budget <= {RATIO_BUDGET})",
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3, help="lifecycles per side (part 1)")
    parser.add_argument("--takeovers", type=int, default=3, help="workers killed (part 2)")
    parser.add_argument("--tickets", type=int, default=6, help="backlog's size (part 3)")
    parser.add_argument("--sleep", type=float, default=1.0, help="agent sleep (s), part 3")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f} on {os.cpu_count() or 1} cores")
    with tempfile.TemporaryDirectory(prefix="tf-fsm-bench-temporal-") as name:
        tmp = Path(name)
        server = DevServer.start(tmp)
        try:
            if args.trials:
                overhead(tmp, server.address, args.trials)
            if args.takeovers:
                takeovers(tmp, server.address, args.takeovers)
            if args.tickets:
                throughput(tmp, server, args.tickets, args.sleep)
        finally:
            server.stop()


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"(benchmark took {time.perf_counter() - started:.0f} s)")
