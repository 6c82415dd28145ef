#!/usr/bin/env python3
"""The crash scenario's agent: blocks attempts 1 and 2 with one Major finding, closes attempt 3.

Deterministic (its output depends only on the phase and the attempt), so a rerun after a crash
writes what the uninterrupted run wrote. Standalone (stdlib only): `tf-fsm run` runs it as the
command executor's agent (TF_PHASE, TF_ATTEMPT, TF_OUTPUT from the environment, the prompt on
stdin); the in-process agent of tests/crash/lifecycle.py calls `write_output` itself. It
writes through os.open/os.write, never fsyncing, as an agent (another process) does.

The git scenario (tests/crash/git_scenario.py) sets more in its environment:

* CRASH_AGENT_BLOCKED: how many attempts it blocks (default 2);
* CRASH_AGENT_EDITS: it edits the working tree as a coding agent does: `implement` writes
  `src/<ticket>.py`, `fix` rewrites it for its attempt (the same bytes on every rerun);
* CRASH_AGENT_PERSON_FILE, CRASH_AGENT_PERSON (a project root) and CRASH_AGENT_GIT (the real
  git): during the review of the attempt that closes (the last one: a retry starts on the
  base's tip, so an earlier commit would need no rebase at the merge) a person commits that
  file (`person.txt`; the
  ticket's own `src/<ticket>.py` makes the merge queue's rebase conflict) on the root's
  branch, once (the same commit, by its fixed identity and dates, whichever rerun makes it),
  so the ticket's branch must be rebased before its merge. This git is run by its full path:
  the harness's git shim does not count it.
* CRASH_AGENT_RESOLVES: in the merge queue's conflict resolution (phase `resolve`) it keeps
  both sides of the conflict over `src/<ticket>.py`: the person's line, then the ticket's
  lines (the same bytes on every rerun); its reviewers (`resolve-review`) find nothing.
"""

from __future__ import annotations

import os
import subprocess
import sys

BLOCKED_ATTEMPTS = 2
REVIEW = "# Review: {ticket}\n\n## Major (should fix)\n{major}\n\n## Summary Statistics\n"
REVIEW += "- Major: {n}\n"
PERSON_ENV = {
    "GIT_AUTHOR_NAME": "A Person", "GIT_AUTHOR_EMAIL": "person@example.com",
    "GIT_COMMITTER_NAME": "A Person", "GIT_COMMITTER_EMAIL": "person@example.com",
    "GIT_AUTHOR_DATE": "2026-02-10T12:00:00Z", "GIT_COMMITTER_DATE": "2026-02-10T12:00:00Z",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull,
}  # fmt: skip


def output_text(ticket: str, phase: str, attempt: int, blocked: int = BLOCKED_ATTEMPTS) -> str:
    if phase not in ("review", "verify", "resolve-review"):
        return f"# {phase}\n\nDone for attempt {attempt}.\n"
    n = 1 if attempt <= blocked and phase != "resolve-review" else 0
    major = "- `a.py:1` - still wrong" if n else "No issues found."
    return REVIEW.format(ticket=ticket, major=major, n=n)


def write_output(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, text.encode("utf-8"))
    finally:
        os.close(fd)


PERSON_TEXT = "a person's change\n"


def ticket_text(ticket: str, phase: str, attempt: int) -> str:
    return f"X = {attempt if phase == 'fix' else 0}\n# {ticket}, {phase} of attempt {attempt}\n"


def edit_tree(ticket: str, phase: str, attempt: int) -> None:
    """The working tree's change a phase makes (cwd: the ticket's worktree)."""
    if phase not in ("implement", "fix"):
        return
    os.makedirs("src", exist_ok=True)
    write_output(os.path.join("src", f"{ticket}.py"), ticket_text(ticket, phase, attempt))


def resolve(ticket: str, attempt: int) -> None:
    """Both sides of the conflict over the ticket's file: the person's line and the ticket's."""
    both = PERSON_TEXT + ticket_text(ticket, "implement", attempt)
    write_output(os.path.join("src", f"{ticket}.py"), both)


def person_commits(root: str, git: str, name: str) -> None:
    """A person's commit of the file `name` on the root's branch, made once."""
    env = {**os.environ, **PERSON_ENV}
    has = subprocess.run(
        [git, "log", "-1", "--format=%H", "--author=A Person"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    if has.stdout.strip():
        return
    os.makedirs(os.path.dirname(os.path.join(root, name)) or root, exist_ok=True)
    write_output(os.path.join(root, name), PERSON_TEXT)
    for args in (["add", "--", name], ["commit", "-q", "-m", "a person's commit", "--", name]):
        subprocess.run([git, *args], cwd=root, env=env, check=True, capture_output=True)


def main() -> None:
    sys.stdin.read()
    env = os.environ
    ticket, phase, attempt = env["TF_TICKET_ID"], env["TF_PHASE"], int(env["TF_ATTEMPT"])
    if env.get("CRASH_AGENT_EDITS"):
        edit_tree(ticket, phase, attempt)
    if env.get("CRASH_AGENT_RESOLVES") and phase == "resolve":
        resolve(ticket, attempt)
    blocked = int(env.get("CRASH_AGENT_BLOCKED", BLOCKED_ATTEMPTS))
    if env.get("CRASH_AGENT_PERSON_FILE") and (phase, attempt) == ("review", blocked + 1):
        person_commits(
            env["CRASH_AGENT_PERSON"], env["CRASH_AGENT_GIT"], env["CRASH_AGENT_PERSON_FILE"]
        )
    write_output(env["TF_OUTPUT"], output_text(ticket, phase, attempt, blocked))


if __name__ == "__main__":
    main()
