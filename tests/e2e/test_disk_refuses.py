"""A disk that refuses a write (full, read-only) is a bad environment: exit 74 naming the file
and the operation, never "internal error", and the saved state stays as it was.

The disks are real: a 2 MB tmpfs filled to the last byte, and the project bind-mounted
read-only, each in a mount namespace of its own (`unshare`, a user namespace where the kernel
allows one), so nothing outside the test sees them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import AGENT, Harness, finding


def _namespaces() -> list[str] | None:
    """The `unshare` argv that gives a private mount namespace here, None if none works."""
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return None
    for argv in (["unshare", "-m"], ["unshare", "-rm"]):
        probe = subprocess.run([*argv, "true"], capture_output=True)
        if probe.returncode == 0:
            return argv
    return None


UNSHARE = _namespaces()
pytestmark = pytest.mark.skipif(UNSHARE is None, reason="no mount namespace on this machine")


def in_namespace(script: str, **env: str) -> subprocess.CompletedProcess[str]:
    assert UNSHARE is not None
    return subprocess.run(
        [*UNSHARE, "bash", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PY": sys.executable, **env},
    )


def blocked_once(e2e: Harness) -> None:
    """Attempt 1 ran and was blocked: there is state to keep."""
    e2e.plan(findings=[finding("f1", fixed_by=[])])
    assert e2e.run("--once").returncode == 3


# Runs tf-fsm on the project copied onto a full 2 MB tmpfs, then frees the space and runs it
# again; the state after each run is copied out for the test to read.
FULL_DISK = r"""
set -u
mount -t tmpfs -o size=2m tmpfs "$MNT"
cp -a "$SRC" "$MNT/project"
dd if=/dev/zero of="$MNT/filler" bs=4k status=none 2>/dev/null
cd "$MNT/project"
"$PY" -m tf_fsm --root "$MNT/project" run pt-1 2>"$OUT/stderr-1"; echo $? > "$OUT/rc-1"
cp -a "$MNT/project" "$OUT/after-1"
rm "$MNT/filler"
"$PY" -m tf_fsm --root "$MNT/project" run pt-1 2>"$OUT/stderr-2"; echo $? > "$OUT/rc-2"
"""


def test_a_full_disk_is_exit_74_and_the_state_is_kept(e2e: Harness, tmp_path: Path) -> None:
    blocked_once(e2e)
    e2e.plan()  # the next attempt closes
    state = (e2e.dir / "retry-state.json").read_bytes()
    out, mnt = tmp_path / "out", tmp_path / "mnt"
    out.mkdir()
    mnt.mkdir()
    ran = in_namespace(
        FULL_DISK,
        MNT=str(mnt),
        SRC=str(e2e.project),
        OUT=str(out),
        FAKE_AGENT_PLAN=str(e2e.plan_file),
        TF_FSM_ROOT="",
    )
    assert ran.returncode == 0, ran.stderr
    stderr = (out / "stderr-1").read_text()
    assert (out / "rc-1").read_text().strip() == "74", stderr
    assert "No space left on device" in stderr and "internal error" not in stderr
    assert f"{mnt}/project/.tf/" in stderr  # names the file
    assert stderr.startswith("tf-fsm: error: cannot write ")  # and the operation
    after = out / "after-1" / ".tf" / "knowledge" / "tickets" / "pt-1"
    assert (after / "retry-state.json").read_bytes() == state
    # Once there is room again, the next run goes on from the kept state.
    assert (out / "rc-2").read_text().strip() == "0", (out / "stderr-2").read_text()


# The disk fills while an agent runs (the review phase's agent fills it, as a build or a log
# might): tf_fsm's next write is refused, and a run with room again resumes the attempt.
FILLS_MID_RUN = r"""
set -u
mount -t tmpfs -o size=2m tmpfs "$MNT"
cp -a "$SRC" "$MNT/project"
cd "$MNT/project"
"$PY" -m tf_fsm --root "$MNT/project" run pt-1 2>"$OUT/stderr-1"; echo $? > "$OUT/rc-1"
cp -a "$MNT/project/.tf/knowledge/tickets/pt-1/retry-state.json" "$OUT/state-1"
rm -f "$MNT/filler"
"$PY" -m tf_fsm --root "$MNT/project" run pt-1 2>"$OUT/stderr-2"; echo $? > "$OUT/rc-2"
cp -a "$MNT/project/.tf/knowledge/tickets/pt-1/retry-state.json" "$OUT/state-2"
"""
FILLER = (
    'if [ "$TF_PHASE" = review ] && [ ! -e "$FILL.done" ]; then touch "$FILL.done"; '
    'dd if=/dev/zero of="$FILL" bs=4k status=none 2>/dev/null; fi; exec "$PY" "$AGENT"'
)


def test_a_disk_that_fills_mid_run_stops_it_resumably(e2e: Harness, tmp_path: Path) -> None:
    out, mnt = tmp_path / "out", tmp_path / "mnt"
    out.mkdir()
    mnt.mkdir()
    settings = json.loads((e2e.project / ".tf" / "config" / "settings.json").read_text())
    settings["executor"]["command"] = ["bash", "-c", FILLER]
    (e2e.project / ".tf" / "config" / "settings.json").write_text(json.dumps(settings))
    ran = in_namespace(
        FILLS_MID_RUN,
        MNT=str(mnt),
        SRC=str(e2e.project),
        OUT=str(out),
        FILL=str(mnt / "filler"),
        AGENT=str(AGENT),
        FAKE_AGENT_PLAN=str(e2e.plan_file),
    )
    assert ran.returncode == 0, ran.stderr
    stderr = (out / "stderr-1").read_text()
    assert (out / "rc-1").read_text().strip() == "74", stderr
    assert "No space left on device" in stderr and "internal error" not in stderr
    first = json.loads((out / "state-1").read_text())
    assert [a["status"] for a in first["attempts"]] == ["in_progress"]  # resumable
    assert (out / "rc-2").read_text().strip() == "0", (out / "stderr-2").read_text()
    second = json.loads((out / "state-2").read_text())
    assert [a["status"] for a in second["attempts"]] == ["closed"]  # the same attempt


READ_ONLY = r"""
set -u
mount --bind "$SRC" "$SRC"
mount -o remount,bind,ro "$SRC"
"$PY" -m tf_fsm --root "$SRC" run pt-1 2>"$OUT/stderr"; echo $? > "$OUT/rc"
"""


def test_a_read_only_project_is_exit_74_and_left_as_it_was(e2e: Harness, tmp_path: Path) -> None:
    blocked_once(e2e)
    before = {p: p.read_bytes() for p in e2e.project.rglob("*") if p.is_file()}
    out = tmp_path / "out"
    out.mkdir()
    ran = in_namespace(READ_ONLY, SRC=str(e2e.project), OUT=str(out), TF_FSM_ROOT="")
    assert ran.returncode == 0, ran.stderr
    stderr = (out / "stderr").read_text()
    assert (out / "rc").read_text().strip() == "74", stderr
    assert "Read-only file system" in stderr and "internal error" not in stderr
    assert f"{e2e.project}/" in stderr
    after = {p: p.read_bytes() for p in e2e.project.rglob("*") if p.is_file()}
    assert after == before
