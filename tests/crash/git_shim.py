"""A `git` put first on PATH for the `tf-fsm` process under test: it counts every git command
tf_fsm runs and, at one chosen command, SIGKILLs tf-fsm's process group (docs/crash-testing.md,
"Crash points in git").

tf_fsm runs git through its one door (tf_fsm/process/door.py): each git is started by
tf_fsm's launcher, leads a process group of its own, and is ended with that group when
tf_fsm dies (the shim `exec`s git in it). The `TF_FSM_OWNER` mark in its environment names
the tf-fsm process that asked for it. The shim is a POSIX shell script (dash starts in about
a millisecond; a Python shim would make each of a lifecycle's git commands tens of
milliseconds slower). What it does:

* always: adds one to `<dir>/count`, appends `<n>\\t<argv>` to `<dir>/calls` (and, with
  CRASH_GIT_JOURNAL set, the journal's size in bytes: where in the journal the command fell);
* at the crash point (the CRASH_GIT_AT-th command, or the first whose arguments match the
  shell pattern CRASH_GIT_MATCH), CRASH_GIT_WHEN says when tf-fsm dies:
  - `before`: before the real git runs (tf-fsm died as it was about to start it);
  - `after`: once the real git has exited, before tf-fsm reads its result;
  - `during`: CRASH_GIT_DELAY seconds after the real git started, or after the file
    CRASH_GIT_UNTIL appeared (git's own state: a rebase's `rebase-merge`, a worktree's
    registry entry), the real git then dying with tf-fsm, half done, as a real one would;
    `<dir>/during` says whether it was still running at the kill.
  `<dir>/killed` then holds `<n>\\t<when>\\t<argv>`.

The counter is a plain file: one `tf-fsm run` runs one git command at a time.
"""

from __future__ import annotations

import shutil
import stat
from dataclasses import dataclass
from pathlib import Path

SHIM = r"""#!/bin/sh
# tf_fsm's crash harness (tests/crash/git_shim.py): count git, kill tf-fsm at one command
d=$CRASH_GIT_DIR
if [ "$1" = "--crash-harness-kill" ]; then  # the killer of a `during` crash point: $2 $3
    : > "$d/killer"  # out of git's process group (setsid): git may start
    git=$2
    if [ -n "$CRASH_GIT_UNTIL" ]; then  # until git made that file, while it runs
        i=0
        while [ ! -e "$CRASH_GIT_UNTIL" ] && [ "$i" -lt 3000 ] && kill -0 "$git"; do
            sleep 0.001
            i=$((i + 1))
        done 2>/dev/null
    fi
    sleep "$CRASH_GIT_DELAY"
    if kill -0 "$git" 2>/dev/null; then echo running; else echo ended; fi > "$d/during"
    kill -KILL "-$3"
    exit 0
fi
n=0
read n < "$d/count" 2>/dev/null
n=$((n + 1))
echo "$n" > "$d/count"
size=
if [ -n "$CRASH_GIT_JOURNAL" ]; then
    size=$(stat -c %s "$CRASH_GIT_JOURNAL" 2>/dev/null || echo 0)
fi
printf '%s\t%s\t%s\n' "$n" "$size" "$*" >> "$d/calls"
hit=
if [ "$n" = "${CRASH_GIT_AT:-0}" ]; then
    hit=1
elif [ -n "$CRASH_GIT_MATCH" ] && [ ! -e "$d/killed" ]; then
    case "$*" in $CRASH_GIT_MATCH) hit=1 ;; esac
fi
[ -n "$hit" ] || exec "$CRASH_GIT_REAL" "$@"
group() {  # the process group of the tf-fsm that ran us (its mark's pid; field 5 of its stat)
    read -r line < "/proc/${TF_FSM_OWNER%%.*}/stat"
    set -- ${line##*) }
    echo "$3"
}
pgid=$(group)
printf '%s\t%s\t%s\n' "$n" "$CRASH_GIT_WHEN" "$*" > "$d/killed"
case "$CRASH_GIT_WHEN" in
    before)
        kill -KILL "-$pgid"
        exit 137 ;;
    after)
        "$CRASH_GIT_REAL" "$@"
        kill -KILL "-$pgid"
        exit 137 ;;
    during)  # the killer leaves git's process group first: tf-fsm ends it with git
        setsid "$0" --crash-harness-kill "$$" "$pgid" </dev/null >/dev/null 2>&1 &
        until [ -e "$d/killer" ]; do sleep 0.001; done
        exec "$CRASH_GIT_REAL" "$@" ;;
esac
exec "$CRASH_GIT_REAL" "$@"
"""

WHEN = ("before", "after", "during")


@dataclass(frozen=True)
class CrashPoint:
    """Where the shim kills tf-fsm: at git command number `at` (1 is the run's first), or at
    the first command whose arguments match the shell pattern `match`."""

    when: str
    at: int = 0
    match: str = ""
    delay: float = 0.005  # `during`: seconds after the real git started (or `until` appeared)
    until: str = ""  # `during`: a path relative to the project root

    def __post_init__(self) -> None:
        if self.when not in WHEN or (self.at > 0) == bool(self.match):
            raise ValueError(f"not a crash point: {self}")

    def __str__(self) -> str:
        where = f"git command {self.at}" if self.at else f"the first `git {self.match}`"
        extra = ""
        if self.when == "during":
            after = f" once {self.until} exists" if self.until else ""
            extra = f" ({self.delay * 1000:.0f} ms{after})"
        return f"{self.when} {where}{extra}"

    def env(self, root: Path) -> dict[str, str]:
        return {
            "CRASH_GIT_WHEN": self.when,
            "CRASH_GIT_AT": str(self.at),
            "CRASH_GIT_MATCH": self.match,
            "CRASH_GIT_DELAY": f"{self.delay:.3f}",
            "CRASH_GIT_UNTIL": str(root / self.until) if self.until else "",
        }


@dataclass(frozen=True)
class Call:
    """One git command a run made: its number, the journal's size then (-1: not measured)
    and its arguments."""

    number: int
    journal_bytes: int
    argv: str

    @property
    def words(self) -> str:
        """The subcommand and its first option, the same in every run (no sha, no path)."""
        return " ".join(self.argv.split(" ")[:2])


class Shim:
    """The shim installed in `dir / "bin"`, its counter and logs in `dir`."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.bin = directory / "bin"
        self.bin.mkdir(parents=True, exist_ok=True)
        path = self.bin / "git"
        path.write_text(SHIM, encoding="utf-8")
        path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        real = shutil.which("git")
        if real is None:
            raise RuntimeError("git is not installed: the git crash scenario needs it")
        self.real = real

    def env(
        self, root: Path, path: str, crash: CrashPoint | None, journal: Path | None = None
    ) -> dict[str, str]:
        """The environment of one run in the project `root`: the counter reset, the crash
        point (None: none), the journal whose size each command notes (None: not noted)."""
        for name in ("count", "calls", "killed", "during", "killer"):
            (self.dir / name).unlink(missing_ok=True)
        env = {
            "PATH": f"{self.bin}:{path}",
            "CRASH_GIT_DIR": str(self.dir),
            "CRASH_GIT_REAL": self.real,
            "CRASH_GIT_JOURNAL": str(journal or ""),
        }
        none = {"CRASH_GIT_WHEN": "", "CRASH_GIT_AT": "0", "CRASH_GIT_MATCH": ""}
        return {**env, **(crash.env(root) if crash else none)}

    def calls(self) -> list[Call]:
        path = self.dir / "calls"
        lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
        found = []
        for line in lines:
            number, size, argv = [*line.split("\t", 2), "", ""][:3]
            if number.isdigit():  # else the rest of an argument that held a newline
                found.append(Call(int(number), int(size) if size.isdigit() else -1, argv))
        return found

    def killed(self) -> str | None:
        """`<n>\\t<when>\\t<argv>` of the command the run was killed at, None when it was not."""
        path = self.dir / "killed"
        return path.read_text(encoding="utf-8").strip() if path.exists() else None

    def during(self) -> str | None:
        """`running` or `ended`: the real git at a `during` kill."""
        path = self.dir / "during"
        return path.read_text(encoding="utf-8").strip() if path.exists() else None
