"""One agent invocation of an attempt: its prompt and log copies, the executor's tries, a
transient failure restarted after a backoff, and the journal's record of each try.

A phase (tf_fsm.engine.phases) calls `invoke`; it answers None (the agent wrote its artifact),
WAITING (a hand-off artifact has not arrived) or the phase's one-line failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tf_fsm.core import journal as ev
from tf_fsm.core.artifacts import REVIEW_PHASES
from tf_fsm.core.detection import uncountable_review
from tf_fsm.executors import Invocation, InvocationResult, OutputMark
from tf_fsm.executors.failures import CRASH, NO_OUTPUT, TRANSIENT, UNCOUNTABLE, backoff_delay
from tf_fsm.storage.layout import CHAIN_CONTEXT

if TYPE_CHECKING:
    from tf_fsm.engine.api import RunContext
    from tf_fsm.engine.context import AttemptContext

#: what a phase returns instead of a failure when a hand-off artifact has not arrived yet
WAITING = "waiting"


@dataclass(frozen=True)
class _Try:
    """One try of an invocation, judged."""

    result: InvocationResult
    failure: str | None = None
    failure_class: str | None = None
    log_path: Path | None = None
    restart: bool = False  # transient, and restarts are left
    waiting: str | None = None  # the hand-off artifact it waits for, with its prompt


def invoke(
    run: RunContext,
    attempt: AttemptContext,
    invocation: Invocation,
    on_waiting: Callable[[str], None],
) -> str | None:
    """Run `invocation`, restarting it after a transient failure while restarts are left.
    `on_waiting` is told what a hand-off waits for."""
    restarts = 0
    max_restarts = run.settings.settings.executor.maxRestarts
    while True:
        tried = _try(run, invocation, restarts, restarts < max_restarts)
        if tried.waiting is not None:
            on_waiting(tried.waiting)
            return WAITING
        if tried.failure is None:
            return None
        if not tried.restart:
            return _failed(run, attempt, invocation, tried, restarts)
        restarts += 1
        _pause_before_restart(run, invocation, tried, restarts)


def prepared(
    run: RunContext,
    attempt: AttemptContext,
    phase: str,
    role: str,
    artifact: str,
    prompt: str,
    label: str,
) -> Invocation:
    """The invocation of `role` in `phase`, its prompt (redacted) kept beside its artifacts.
    An unchanged prompt is not rewritten: a hand-off artifact must stay newer than it."""
    store, n = run.store, attempt.number
    chosen = attempt.resolution.roles[role]
    prompt = store.redactor(prompt)
    prompt_name = f"prompts/attempt-{n}/{label}.md"
    store.write_artifact(prompt_name, prompt, only_if_changed=True)
    files = store.files  # where the agent's process finds the ticket's artifacts
    seen = run.tree.agent_path  # where the agent, in its tree, finds the ticket's files
    # Checked against symlinks here: the output the agent writes and tf_fsm then reads, and
    # the log, before the agent runs. The prompt and the chain context were checked by the
    # writes that made them, the live log is checked by its own writer.
    return Invocation(
        ticket_id=run.ticket_id,
        phase=phase,
        role=role,
        model=chosen.model,
        thinking=chosen.thinking,
        attempt=n,
        root=run.root,
        artifact_dir=seen(files.dir),
        output=seen(files.path(artifact)),
        prompt=prompt,
        prompt_file=seen(files.unchecked(prompt_name)),
        chain_context=seen(files.unchecked(CHAIN_CONTEXT)),
        log_file=files.path(f"logs/attempt-{n}/{label}.log"),
        live_log=files.unchecked(f"logs/attempt-{n}/{label}.live.log"),
        live_log_within=files.dir,
        timeout=run.settings.settings.executor.timeoutSeconds,
        cwd=run.tree.path,
    )


def _log_name(run: RunContext, invocation: Invocation) -> str:
    return invocation.log_file.relative_to(run.store.files.dir).as_posix()


def _try(run: RunContext, invocation: Invocation, restarts: int, may_restart: bool) -> _Try:
    inv, output = invocation, invocation.output
    run.tree.before_invocation(run, inv)
    mark = OutputMark.of(output)
    run.observer.phase_started(run.ticket_id, inv.attempt, inv.phase, inv.role, inv.model)
    result = run.executor.invoke(inv)
    run.tree.after_invocation(run, inv)
    if result.waiting:
        return _Try(result, waiting=_wait(run, inv, result))
    failure, failure_class, sha = _judge(run, inv, result, mark)
    restart = failure_class in TRANSIENT and may_restart
    # A try that is restarted keeps its log apart, as the evidence for the restart.
    log_name = _log_name(run, inv)
    if restart:
        log_name = log_name.replace(".log", f".try-{restarts + 1}.log")
    run.store.write_artifact(log_name, result.log)  # for people
    log_path = run.store.files.unchecked(log_name)  # checked by the write just made
    run.observer.phase_finished(run.ticket_id, inv.attempt, inv.phase, inv.role, failure is None)
    run.event(
        ev.InvocationFinished,
        inv.attempt,
        flush=False,
        phase=inv.phase,
        role=inv.role,
        model=inv.model,
        artifact=output.name,
        sha256=sha,
        ok=failure is None,
        durationMs=round(result.duration * 1000),
        usage=result.usage.to_json() if result.usage else None,
        failureClass=failure_class,
    )
    return _Try(result, failure, failure_class, log_path, restart)


def _wait(run: RunContext, inv: Invocation, result: InvocationResult) -> str:
    """A hand-off executor waits for its artifact: not a failure; the attempt stays open."""
    run.store.write_artifact(_log_name(run, inv), result.log)
    run.event(
        ev.PhaseWaiting,
        inv.attempt,
        phase=inv.phase,
        role=inv.role,
        output=str(inv.output),
        promptFile=str(inv.prompt_file),
    )
    note = f"attempt {inv.attempt} {inv.phase}: waiting for {inv.output.name}"
    run.observer.note(run.ticket_id, note)
    return f"{inv.phase} ({inv.role}) waits for {inv.output} (prompt: {inv.prompt_file})"


def _judge(
    run: RunContext, inv: Invocation, result: InvocationResult, mark: OutputMark
) -> tuple[str | None, str | None, str | None]:
    """(failure, its class, the sha256 of the agent's file) of one try."""
    failure, failure_class = result.failure, result.failure_class
    if result.ok and not result.accepted_existing and not mark.written_since(inv.output):
        failure = f"the agent exited 0 but did not write its output {inv.output.name}"
        failure_class = NO_OUTPUT
    # read once, after the written check (a redaction rewrite would look like a write)
    written = run.store.files.take(inv.output.name)  # holds no secret
    if failure is None and inv.phase in REVIEW_PHASES:
        failure = uncountable_review(written[1] if written else "", inv.output.name)
        failure_class = UNCOUNTABLE if failure else None
    if failure is not None and failure_class is None:
        failure_class = CRASH  # an executor that does not classify: a failed process
    return failure, failure_class, written[0] if written else None


def _pause_before_restart(run: RunContext, inv: Invocation, tried: _Try, restarts: int) -> None:
    conf = run.settings.settings.executor
    delay = backoff_delay(restarts, conf.restartBackoffSeconds)
    run.event(
        ev.InvocationRestarted,
        inv.attempt,
        phase=inv.phase,
        role=inv.role,
        failureClass=tried.failure_class,
        attemptNo=restarts,
        delay=round(delay, 3),
        failure=str(tried.failure),
    )
    run.observer.note(
        run.ticket_id,
        f"attempt {inv.attempt} {inv.phase} ({inv.role}): {tried.failure_class}: "
        f"{tried.failure}; restart {restarts}/{conf.maxRestarts} in {delay:.1f}s",
    )
    run.sleep(delay)


def _failed(
    run: RunContext, attempt: AttemptContext, inv: Invocation, tried: _Try, restarts: int
) -> str:
    """The phase fails with this invocation: journaled, and its one-line message."""
    tries = f" ({restarts} restarts)" if restarts else ""
    message = (
        f"{inv.phase} ({inv.role}, {inv.model}) failed{tries} [{tried.failure_class}]: "
        f"{tried.failure}; log: {tried.log_path}"
    )
    run.event(
        ev.PhaseFailed,
        attempt.number,
        phase=inv.phase,
        role=inv.role,
        failure=tried.failure,
        exitCode=tried.result.exit_code,
        stderrTail=tried.result.stderr_tail,
        log=str(tried.log_path),
        failureClass=tried.failure_class,
    )
    return message
