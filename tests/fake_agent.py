#!/usr/bin/env python3
"""A fake agent CLI for tf_fsm's `command` executor. Standalone: stdlib only, no tf_fsm import.

tf_fsm runs it once per invocation with the TF_* environment of docs/lifecycle.md and the
prompt on stdin. What it does comes from a JSON plan file named by $FAKE_AGENT_PLAN (unset: no
findings, no failures):

    {
      "findings": [{"id": "f1", "severity": "Major", "text": "...",
                    "reviewer": "reviewer-general", "fixedBy": ["provider/model"] or "*"}],
      "crash":    [{"phase": "implement", "attempt": 1, "role": "worker", "exitCode": 3,
                    "stderr": "fake agent crashed", "times": 1}],
      "hang":     [{"phase": "review", "attempt": 1, "role": "...", "seconds": 60}],
      "noOutput": [{"phase": "research", "attempt": 1, "role": "..."}],
      "garbage":  [{"phase": "review", "attempt": 1, "role": "...", "text": "Error: ..."}],
      "edits":    [{"phase": "fix", "file": "work.txt"},
                   {"phase": "implement", "file": "src/{ticket}.py", "text": "X = '{ticket}'",
                    "mode": "write", "ticket": "pt-2", "attempt": 1}],
      "pause":    [{"phase": "implement", "seconds": 0.5},
                   {"phase": "close", "touch": "/tmp/reached-{ticket}", "until": "/tmp/go",
                    "seconds": 30}],
      "killParent": {"call": 7},
      "background": [{"phase": "review", "setsid": true, "keepOutput": false, "seconds": 300}],
                  (no "phase": in every phase)
      "secret":   "sk-ant-api03-..."
    }

`attempt`, `role`, `ticket` and `times` are optional everywhere (absent: any). An `edits` rule
appends one line to `file`, relative to the working directory (the project root, or the
ticket's worktree), as a real agent's edit of the working tree would: `text`, else the model,
attempt and whether the prompt carried quality-gate feedback. `mode` "write" replaces the file
instead (a file several tickets write conflicts line for line), `mode` "delete" removes it,
`mode` "sub" replaces what the regular expression `pattern` matches (multi-line mode) by
`text` (backreferences allowed), leaving the rest of the file as it is.
In the merge queue's conflict resolution the resolver's phase is `resolve` (an `edits` rule
there resolves the conflict; without one the markers stay) and its reviewers' phase is
`resolve-review`, whose findings are the plan's `resolutionFindings` (same shape as
`findings`; `reviewer` optional). `{ticket}`, `{attempt}`,
`{phase}` and `{model}` in `file` and `text` are filled in; missing directories are made. The
agent never runs git: what it edits is committed by tf_fsm's checkpoints alone.
A `pause` rule makes the invocation slow: it creates `touch` (if given; its text is the
working directory), then waits until `until` exists (exit 8 after `seconds`, default 60), or,
without `until`, sleeps `seconds`; `{ticket}` and `{attempt}` are filled in both paths.
`killParent` makes the agent's n-th invocation (counted across runs) SIGKILL tf_fsm and itself,
leaving a half-written temp file behind (crash tests).
The agent's memory (findings its fixes
cleared, crash counters) lives in <TF_ARTIFACT_DIR>/fake-agent-state.json, so the "code" stays
fixed across attempts and runs. Other environment variables:

* FAKE_AGENT_LOG: every invocation appends one JSON line (ticket, phase, role, model, thinking,
  attempt, pid, cwd, start: its start as seconds since the epoch) to this file.
* FAKE_AGENT_SPANS: every invocation that ends by itself (not killed) appends one JSON line
  (ticket, phase, role, attempt, pid, start, end) to this file, so tests can tell which
  invocations overlapped in time.
* FAKE_AGENT_CHILD_PID: a hanging invocation appends its child's pid (one line) to this file.
* FAKE_AGENT_BACKGROUND: a `background` rule starts a process that outlives the agent (in the
  agent's process group, or with `setsid` in a session of its own; holding the agent's stdout
  and stderr open with `keepOutput`) and appends one JSON line to this file: its pid, its start
  time (/proc/<pid>/stat field 22) and the TF_FSM_OWNER mark it inherited.
* FAKE_AGENT_CONTEXT_LOG: every invocation appends the chain-context.json it was given (attempt,
  trigger, tier, escalatedRoles, flags) as one JSON line, so tests can check it per attempt.

Exit codes: 0 done; the plan's exitCode for a crash; 8 when a `pause` waited for its file in
vain; 9 when tf_fsm broke the contract (missing variable, stdin differs from TF_PROMPT_FILE, bad
chain-context.json).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

SEVERITIES = ("Critical", "Major", "Minor", "Warnings", "Suggestions")
HEADINGS = {
    "Critical": "Critical (must fix)",
    "Major": "Major (should fix)",
    "Minor": "Minor (nice to fix)",
    "Warnings": "Warnings (follow-up ticket)",
    "Suggestions": "Suggestions (follow-up ticket)",
}
REQUIRED_ENV = (
    "TF_TICKET_ID", "TF_PHASE", "TF_ROLE", "TF_MODEL", "TF_THINKING", "TF_ATTEMPT",
    "TF_ARTIFACT_DIR", "TF_OUTPUT", "TF_PROMPT_FILE", "TF_CHAIN_CONTEXT",
)  # fmt: skip
CONTRACT_BROKEN = 9
PAUSE_TIMED_OUT = 8
STATE_FILE = "fake-agent-state.json"


def fail(message: str, code: int = CONTRACT_BROKEN) -> NoReturn:
    print(f"fake agent: {message}", file=sys.stderr, flush=True)
    sys.exit(code)


def append_line(path: str, line: str) -> None:
    """One write on an O_APPEND descriptor: concurrent invocations never interleave."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


@contextlib.contextmanager
def agent_state(artifact_dir: Path) -> Iterator[dict[str, Any]]:
    """The agent's memory, read and written under a lock (reviewers may run in parallel)."""
    path = artifact_dir / STATE_FILE
    with (artifact_dir / f"{STATE_FILE}.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            state = {}
        state.setdefault("cleared", [])
        state.setdefault("crashCounts", {})
        yield state
        write_atomic(path, json.dumps(state, indent=2, sort_keys=True) + "\n")


def matches(rule: dict[str, Any], phase: str, role: str, attempt: int, ticket: str) -> bool:
    return (
        rule.get("phase") == phase
        and rule.get("attempt", attempt) == attempt
        and rule.get("role", role) == role
        and rule.get("ticket", ticket) == ticket
    )


def filled(template: str, **values: object) -> str:
    """`template` with `{ticket}`, `{attempt}`, `{phase}`, `{model}` replaced (other braces kept,
    so file contents may hold any text)."""
    for key, value in values.items():
        template = template.replace("{" + key + "}", str(value))
    return template


def edit(rule: dict[str, Any], fields: dict[str, object], default_text: str) -> None:
    """One `edits` rule: a line appended to its file, or the file written whole."""
    path = Path(filled(rule["file"], **fields))
    text = filled(rule["text"], **fields) if "text" in rule else default_text
    text += "" if text.endswith("\n") else "\n"
    if rule.get("mode") == "delete":
        path.unlink(missing_ok=True)
        return
    if rule.get("mode") == "sub":  # one region of the file changed, the rest left alone
        old = path.read_text(encoding="utf-8")
        path.write_text(re.sub(rule["pattern"], text.rstrip("\n"), old, flags=re.M))
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w" if rule.get("mode") == "write" else "a", encoding="utf-8") as edited:
        edited.write(text)


def pause(rule: dict[str, Any], fields: dict[str, object]) -> None:
    """A slow invocation: say it got here (`touch`), then wait for `until`, or sleep."""
    seconds = float(rule.get("seconds", 60 if "until" in rule else 0))
    if "touch" in rule:
        append_line(filled(rule["touch"], **fields), os.getcwd())
    if "until" not in rule:
        time.sleep(seconds)
        return
    until = Path(filled(rule["until"], **fields))
    deadline = time.monotonic() + seconds
    while not until.exists():
        if time.monotonic() > deadline:
            fail(f"waited {seconds} s for {until} in vain", PAUSE_TIMED_OUT)
        time.sleep(0.02)


def fixes(finding: dict[str, Any], model: str) -> bool:
    fixed_by = finding.get("fixedBy", [])
    return fixed_by == "*" or model in fixed_by


def counts_of(findings: list[dict[str, Any]]) -> dict[str, int]:
    return {sev: sum(f["severity"] == sev for f in findings) for sev in SEVERITIES}


def summary_statistics(findings: list[dict[str, Any]]) -> list[str]:
    return ["## Summary Statistics", *(f"- {s}: {n}" for s, n in counts_of(findings).items())]


def render_review(ticket: str, findings: list[dict[str, Any]], secret: str) -> str:
    out = [f"# Review: {ticket}", ""]
    if secret:
        out += [f"Reviewed with credentials {secret}.", ""]
    for sev in SEVERITIES:
        items = [f"- {f['text']}" for f in findings if f["severity"] == sev]
        out += [f"## {HEADINGS[sev]}", *(items or ["No issues found."]), ""]
    return "\n".join([*out, *summary_statistics(findings)]) + "\n"


def render_fixes(ticket: str, cleared: list[dict[str, Any]], secret: str) -> str:
    items = [f"- [{f['severity']}] {f['text']}" for f in cleared] or ["No fixes applied."]
    out = [f"# Fixes: {ticket}", ""]
    if secret:
        out += [f"Fixed with credentials {secret}.", ""]
    out += ["## Fixes Applied", *items, ""]
    return "\n".join([*out, *summary_statistics(cleared)]) + "\n"


def render_simple(phase: str, ticket: str, secret: str) -> str:
    extra = [f"Credentials used: {secret}", ""] if secret else []
    if phase == "research":
        body = [
            f"# Research: {ticket}",
            "",
            "## Findings",
            "- The relevant code lives in the parser module.",
            "- Existing tests cover the happy path only.",
            "",
        ]
    elif phase == "implement":
        body = [
            f"# Implementation: {ticket}",
            "",
            "## Summary",
            "Implemented the change described in the ticket.",
            "",
            "## Files Changed",
            "- `src/parser.py`",
            "- `tests/test_parser.py`",
            "",
        ]
    elif phase == "close":
        body = [f"# Close notes: {ticket}", "", "Work finished; see close-summary.md.", ""]
    else:
        body = [f"# {phase.capitalize()}: {ticket}", "", "Done.", ""]
    return "\n".join(body + extra)


def leave_running(rule: dict[str, Any]) -> None:
    """Start a process this agent does not wait for, as `cmd &` or a daemon would."""
    keep = bool(rule.get("keepOutput"))
    quiet = subprocess.DEVNULL
    child = subprocess.Popen(
        [sys.executable, "-c", f"import time; time.sleep({float(rule.get('seconds', 300))!r})"],
        stdin=subprocess.DEVNULL,
        stdout=None if keep else quiet,
        stderr=None if keep else quiet,
        start_new_session=bool(rule.get("setsid")),
    )
    stat = Path(f"/proc/{child.pid}/stat").read_text()
    started = int(stat.rsplit(")", 1)[1].split()[19])
    record = {"pid": child.pid, "start": started, "mark": os.environ.get("TF_FSM_OWNER")}
    out = os.environ.get("FAKE_AGENT_BACKGROUND")
    if out:
        append_line(out, json.dumps(record))


def record_span(started: float) -> None:
    spans = os.environ.get("FAKE_AGENT_SPANS")
    if spans:
        keys = {"ticket": "TF_TICKET_ID", "phase": "TF_PHASE", "role": "TF_ROLE"}
        span = {k: os.environ.get(v, "") for k, v in keys.items()}
        span |= {"attempt": os.environ.get("TF_ATTEMPT", ""), "pid": os.getpid()}
        append_line(spans, json.dumps({**span, "start": started, "end": time.time()}))


def main() -> int:
    started = time.time()
    try:
        return invoke(started)
    finally:
        record_span(started)


def invoke(started: float) -> int:
    missing = [name for name in REQUIRED_ENV if name not in os.environ]
    env = {name: os.environ.get(name, "") for name in REQUIRED_ENV}
    log = os.environ.get("FAKE_AGENT_LOG")
    if log:
        call = {
            "ticket": env["TF_TICKET_ID"],
            "phase": env["TF_PHASE"],
            "role": env["TF_ROLE"],
            "model": env["TF_MODEL"],
            "thinking": env["TF_THINKING"],
            "attempt": int(env["TF_ATTEMPT"]) if env["TF_ATTEMPT"].isdigit() else env["TF_ATTEMPT"],
            "pid": os.getpid(),
            "cwd": os.getcwd(),
            "start": started,
        }
        append_line(log, json.dumps(call, sort_keys=True))
    if missing:
        fail(f"missing environment variables: {', '.join(missing)}")
    if not env["TF_ATTEMPT"].isdigit():
        fail(f"TF_ATTEMPT is not a number: {env['TF_ATTEMPT']!r}")

    prompt = sys.stdin.buffer.read()
    try:
        prompt_file = Path(env["TF_PROMPT_FILE"]).read_bytes()
    except OSError as exc:
        fail(f"cannot read TF_PROMPT_FILE: {exc}")
    if prompt != prompt_file:
        fail(
            f"stdin ({len(prompt)} bytes) differs from TF_PROMPT_FILE {env['TF_PROMPT_FILE']} "
            f"({len(prompt_file)} bytes)"
        )
    try:
        context = json.loads(Path(env["TF_CHAIN_CONTEXT"]).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        fail(f"TF_CHAIN_CONTEXT {env['TF_CHAIN_CONTEXT']}: not readable JSON: {exc}")
    attempt = int(env["TF_ATTEMPT"])
    if not isinstance(context, dict) or context.get("attempt") != attempt:
        got = context.get("attempt") if isinstance(context, dict) else context
        fail(f"chain-context.json attempt {got!r} != TF_ATTEMPT {attempt}")
    chosen = context.get("models", {}).get(env["TF_ROLE"], {}).get("model")
    if chosen != env["TF_MODEL"]:
        role, model = env["TF_ROLE"], env["TF_MODEL"]
        fail(f"chain-context.json gives {role} model {chosen!r}, TF_MODEL is {model!r}")
    seen = os.environ.get("FAKE_AGENT_CONTEXT_LOG")
    if seen:
        keep = ("attempt", "trigger", "tier", "escalatedRoles", "flags")
        append_line(
            seen, json.dumps({"phase": env["TF_PHASE"], **{k: context.get(k) for k in keep}})
        )

    plan_path = os.environ.get("FAKE_AGENT_PLAN")
    plan: dict[str, Any] = (
        json.loads(Path(plan_path).read_text(encoding="utf-8")) if plan_path else {}
    )
    ticket, phase, role, model = (
        env[k] for k in ("TF_TICKET_ID", "TF_PHASE", "TF_ROLE", "TF_MODEL")
    )
    secret = plan.get("secret") or ""
    artifact_dir = Path(env["TF_ARTIFACT_DIR"])
    output = Path(env["TF_OUTPUT"])
    print(f"fake agent: {phase}/{role} model={model} attempt={attempt}", flush=True)
    if secret:
        print(f"fake agent: using API key {secret}", file=sys.stderr, flush=True)

    fields = {"ticket": ticket, "attempt": attempt, "phase": phase, "model": model}
    for rule in plan.get("background", []):
        if matches({"phase": phase, **rule}, phase, role, attempt, ticket):  # no phase: every
            leave_running(rule)

    for rule in plan.get("pause", []):
        if matches(rule, phase, role, attempt, ticket):
            pause(rule, fields)

    for rule in plan.get("hang", []):
        if matches(rule, phase, role, attempt, ticket):
            seconds = float(rule.get("seconds", 60))
            child = subprocess.Popen(
                [sys.executable, "-c", f"import time; time.sleep({seconds!r})"]
            )
            child_log = os.environ.get("FAKE_AGENT_CHILD_PID")
            if child_log:
                append_line(child_log, str(child.pid))
            time.sleep(seconds)
            child.wait()

    for index, rule in enumerate(plan.get("crash", [])):
        if not matches(rule, phase, role, attempt, ticket):
            continue
        with agent_state(artifact_dir) as state:
            seen = state["crashCounts"].get(str(index), 0)
            state["crashCounts"][str(index)] = seen + 1
        if "times" not in rule or seen < int(rule["times"]):
            print(rule.get("stderr", "fake agent crashed"), file=sys.stderr, flush=True)
            return int(rule.get("exitCode", 3))

    if any(matches(rule, phase, role, attempt, ticket) for rule in plan.get("noOutput", [])):
        print("fake agent: exiting without writing TF_OUTPUT", file=sys.stderr, flush=True)
        return 0

    kill = plan.get("killParent")
    if kill:
        with agent_state(artifact_dir) as state:
            state["calls"] = state.get("calls", 0) + 1
            due = state["calls"] == int(kill["call"])
        if due:  # crash tf_fsm from inside the agent, leaving a half-written temp file behind
            half = output.parent / f".{output.name}.crash.tmp"
            half.write_text("# half written")
            os.kill(int(os.environ["TF_FSM_OWNER"].split(".")[0]), 9)  # the tf-fsm that ran us
            os.kill(os.getpid(), 9)

    for rule in plan.get("edits", []):
        if matches(rule, phase, role, attempt, ticket):
            feedback = "Quality Gate Failures" in prompt.decode("utf-8", errors="replace")
            edit(rule, fields, f"{model} attempt {attempt} feedback={feedback}")

    findings: list[dict[str, Any]] = plan.get("findings", [])
    garbage = [r for r in plan.get("garbage", []) if matches(r, phase, role, attempt, ticket)]
    if garbage:  # what it writes instead of its artifact (an error message, a cut answer)
        text = garbage[0].get("text", "")
    elif phase == "resolve-review":  # a review of a merge conflict's resolution
        mine = [f for f in plan.get("resolutionFindings", []) if f.get("reviewer", role) == role]
        text = render_review(ticket, mine, secret)
    elif phase in ("review", "verify"):
        with agent_state(artifact_dir) as state:
            cleared = set(state["cleared"])
        mine = [f for f in findings if f.get("reviewer") == role and f["id"] not in cleared]
        text = render_review(ticket, mine, secret)
    elif phase == "fix":
        with agent_state(artifact_dir) as state:
            fixed = [f for f in findings if f["id"] not in state["cleared"] and fixes(f, model)]
            state["cleared"] += [f["id"] for f in fixed]
        text = render_fixes(ticket, fixed, secret)
    else:
        text = render_simple(phase, ticket, secret)
    write_atomic(output, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
