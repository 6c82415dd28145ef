"""The dev server restarted mid-run (`tf-fsm temporal dev --db FILE`, its history in SQLite):
the workers and the dispatcher wait for it, and the run completes, each ticket merged once."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("temporalio", reason="the temporal extra is not installed")

from tests.temporal.cluster import Cluster, wait_until
from tests.temporal.conftest import free_port
from tests.temporal.test_many_hosts import pause_in


def dev_server(db: Path, port: int, log: Path) -> subprocess.Popen[str]:
    """`tf-fsm temporal dev`, once it has printed its address."""
    argv = [sys.executable, "-m", "tf_fsm", "temporal", "dev", "--db", str(db), "--port", str(port)]
    server = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=log.open("a"), text=True, cwd=db.parent
    )
    assert server.stdout is not None
    line = server.stdout.readline()
    assert f"127.0.0.1:{port}" in line, (line, log.read_text())
    return server


def test_a_run_completes_across_a_restart_of_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port, db, log = free_port(), tmp_path / "dev.db", tmp_path / "server.log"
    server = dev_server(db, port, log)
    cluster = Cluster(tmp_path, f"127.0.0.1:{port}", "tf-fsm")
    monkeypatch.setenv("TF_FSM_ROOT", str(cluster.seed.root))
    try:
        cluster.create(["pt-1", "pt-2"])
        reached = pause_in(cluster, "review")
        for host in ("host-a", "host-b"):
            cluster.worker(host)
        dispatcher = cluster.dispatcher("ralph")
        wait_until("a reviewer", reached.exists, seconds=120)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
        server = dev_server(db, port, log)
        cluster.seed.go()
        out = cluster.finish(dispatcher)
        assert cluster.merges() == Counter({"pt-1": 1, "pt-2": 1}), out
    finally:
        cluster.end()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
