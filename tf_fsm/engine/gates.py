"""Quality-gate commands (docs/gates.md): run them, capture their output, and word the feedback.

A string command runs under `bash -c` (pipes and quotes work: splitting on spaces breaks
them), a list runs as argv, and the feedback carries the tail of the command's real output,
redacted and fenced, not just an error string. With a baseline (tf_fsm.workspace.baseline), a
required gate whose failing tests all fail on the base commit too is pre-existing: reported,
not blocking, and no reason to send the fixer back. That takes a JUnit report of both runs:
the gate's `junitXml`, else one tf_fsm asks pytest for (`_report_of`); a failure without one
blocks.
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from tf_fsm.engine.prompts import fence_untrusted
from tf_fsm.errors import SettingsError, SettingsProblem
from tf_fsm.process.door import find_program, run_process, tail
from tf_fsm.settings.gate_reports import asks_for_report, report_hint
from tf_fsm.settings.load import LoadedSettings, QualityGate

if TYPE_CHECKING:  # imported where used: most gate runs need neither (start-up stays fast)
    from tf_fsm.workspace.baseline import Lookup
    from tf_fsm.workspace.judgement import BaseResult
    from tf_fsm.workspace.junit import Stamp

FEEDBACK_TAIL_LINES = 40
FEEDBACK_TAIL_CHARS = 3000
#: of each output stream of a gate run, only the first and last this many bytes are kept
GATE_OUTPUT_KEEP = 1024 * 1024


@dataclass(frozen=True)
class GateResult:
    name: str
    required: bool
    passed: bool
    exit_code: int | None  # None: killed at its timeout, or it could not start
    duration: float
    output: str  # stdout then stderr, bounded (redact before writing it anywhere)
    timed_out: bool = False
    error: str | None = None  # why it could not start at all
    #: the failing tests of its JUnit report (`junitXml`) when this run wrote a readable one
    failing_tests: frozenset[str] | None = None
    #: judged against the base commit: failing, but no worse than there (it does not block)
    preexisting: bool = False
    new_failures: frozenset[str] = frozenset()  # failing here, not on the base commit
    baseline_note: str = ""  # what the comparison with the base commit found

    @property
    def summary(self) -> str:
        if self.error:
            return f"could not start: {self.error}"
        if self.timed_out:
            return f"timed out after {self.duration:.0f}s (process group killed)"
        if self.passed:
            return "passed"
        if self.new_failures:  # the blocking reason names the tests this tree broke
            from tf_fsm.workspace.judgement import names_of

            return f"exit code {self.exit_code}, failing only here: {names_of(self.new_failures)}"
        return f"exit code {self.exit_code}"

    def output_tail(self, redact: Callable[[str], str]) -> str:
        """The end of the output, redacted before it is cut (a secret the cut would halve is
        still recognised)."""
        return tail(self.output, FEEDBACK_TAIL_LINES, FEEDBACK_TAIL_CHARS, redact=redact)


def argv_of(gate: QualityGate) -> list[str]:
    return ["bash", "-c", gate.command] if isinstance(gate.command, str) else list(gate.command)


def cwd_of(gate: QualityGate, root: Path) -> Path:
    return root / gate.cwd if gate.cwd else root


def max_retries(gate: QualityGate, default: int) -> int:
    """A gate's own maxRetries beats the global workflow.qualityGateMaxRetries."""
    return gate.maxRetries if gate.maxRetries is not None else default


def gate_env(ticket_id: str, attempt: int) -> dict[str, str]:
    """What a gate command gets on top of tf-fsm's environment."""
    return {"TF_TICKET_ID": ticket_id, "TF_ATTEMPT": str(attempt)}


def current_attempt(root: Path, settings: LoadedSettings, ticket_id: str) -> int:
    """The number of the ticket's latest attempt in its retry-state.json, 0 when it has none:
    TF_ATTEMPT for `gate --run`, outside any lifecycle."""
    from tf_fsm.storage.backends import open_store

    state = open_store(root, settings, ticket_id).load_retry_state()
    current = state.current if state else None
    return current.attemptNumber if current else 0


def start_problem(
    gate: QualityGate, root: Path, environ: Mapping[str, str] | None = None
) -> str | None:
    """Why the gate cannot start (its cwd or its program is missing), or None. `environ` is
    the gate's whole environment (default tf-fsm's own). A command line runs under bash: a
    program missing in it is bash's exit code 127, a failing check."""
    cwd = cwd_of(gate, root)
    if not cwd.is_dir():
        return f"its cwd {cwd} {'is not a directory' if cwd.exists() else 'does not exist'}"
    program = argv_of(gate)[0]
    try:
        find_program(program, cwd, os.environ if environ is None else environ)
    except PermissionError:
        return f"its program {program} is not executable"
    except OSError:
        where = f"in its cwd {cwd}" if os.sep in program else "on PATH"
        return f"its program {program} is not found {where}"
    return None


def check_gates(gates: Sequence[QualityGate], root: Path, settings_path: Path | None) -> None:
    """Every gate can start, or a SettingsError (exit 2) naming each one that cannot: a
    configuration error, caught before anything runs rather than sent to the fixer."""
    problems = [
        SettingsProblem(f"workflow.qualityGates[{i}]", f"quality gate {g.name} cannot start: {p}")
        for i, g in enumerate(gates)
        if (p := start_problem(g, root)) is not None
    ]
    if problems:
        raise SettingsError(settings_path, problems)


def run_gate(
    gate: QualityGate, root: Path, env: Mapping[str, str] | None = None, *, judged: bool = False
) -> GateResult:
    """Run one gate with its cwd relative to `root` (the project root, a ticket's worktree,
    or a worktree of the base commit), and read the JUnit report it wrote, if it has one.
    `judged`: a failure is to be judged against the base commit, so a required gate without
    `junitXml` is given a report of tf_fsm's asking (`_report_of`)."""
    cwd = cwd_of(gate, root)
    environ = {**os.environ, **(env or {})}
    problem = start_problem(gate, root, environ)
    if problem is not None:
        return GateResult(gate.name, gate.required, False, None, 0.0, "", error=problem)
    with _report_of(gate, root, environ, judged) as (report, within):
        before = _stamp(report)
        try:
            result = run_process(
                argv_of(gate),
                cwd=cwd,
                env=environ,
                timeout=gate.timeoutSeconds,
                keep=GATE_OUTPUT_KEEP,
            )
        except OSError as exc:  # gone since the check: it cannot start, not a crash
            error = f"{exc.strerror or exc}: {exc.filename}" if exc.filename else str(exc)
            return GateResult(gate.name, gate.required, False, None, 0.0, "", error=error)
        failing = _failing_tests(report, before, within)
    output = result.stdout + (("\n" + result.stderr) if result.stderr else "")
    return GateResult(
        gate.name,
        gate.required,
        passed=result.exit_code == 0,
        exit_code=result.exit_code,
        duration=result.duration,
        output=output,
        timed_out=result.timed_out,
        failing_tests=failing,
    )


@contextmanager
def _report_of(
    gate: QualityGate, root: Path, environ: dict[str, str], judged: bool
) -> Iterator[tuple[Path | None, Path]]:
    """(the gate's JUnit report, the directory it must lie in): its `junitXml`, in the tree;
    else, when it is judged and required, a report asked of pytest in a temporary directory
    outside the tree, removed once read. The request is `--junitxml=<file>` appended to
    PYTEST_ADDOPTS in `environ` (after the user's own options: the last --junitxml wins, and
    one on the command line wins over it, so that run writes no report of tf_fsm's). The
    command is not parsed: pytest started in any way (a pipe, `make test`) sees it; a command
    that does not run pytest writes nothing, and its failure is judged without a report."""
    if gate.junitXml is not None:
        yield cwd_of(gate, root) / gate.junitXml, root
        return
    if not (judged and asks_for_report(gate)):
        yield None, root
        return
    try:
        place = Path(tempfile.mkdtemp(prefix="tf-fsm-report-"))
    except OSError:  # no temporary directory: no report, judged as such
        yield None, root
        return
    report = place / "report.xml"
    option = shlex.quote(f"--junitxml={report}")
    environ["PYTEST_ADDOPTS"] = f"{environ.get('PYTEST_ADDOPTS', '')} {option}".lstrip()
    try:
        yield report, place
    finally:
        shutil.rmtree(place, ignore_errors=True)


def _stamp(report: Path | None) -> Stamp | None:
    if report is None:
        return None
    from tf_fsm.workspace.junit import stamp

    return stamp(report)


def _failing_tests(report: Path | None, before: Stamp | None, root: Path) -> frozenset[str] | None:
    """The failing tests of the JUnit report this run wrote (None without one)."""
    if report is None:
        return None
    from tf_fsm.workspace.junit import read_report

    return read_report(report, before, within=root)


def gate_baseline(
    root: Path, sha: str, gates: Sequence[QualityGate], note: Callable[[str], None]
) -> Lookup:
    """The base result of each required gate on commit `sha` of the project at `root`,
    computed (with `run_gate`, as a ticket's judged gate runs) when first asked for:
    `run_gates`'s `baseline`."""
    from tf_fsm.workspace.baseline import lookup

    return lookup(root, sha, gates, _run_on_base, note)


def _run_on_base(gate: QualityGate, tree: Path) -> GateResult:
    return run_gate(gate, tree, judged=True)


def judged(result: GateResult, base: BaseResult | None, gate: QualityGate) -> GateResult:
    """The result with its judgement against the base commit (docs/gates.md)."""
    from tf_fsm.workspace.judgement import judge

    verdict = judge((result.passed, result.failing_tests), base, hint=report_hint(gate))
    return replace(
        result,
        preexisting=verdict.preexisting,
        new_failures=verdict.new_failures,
        baseline_note=verdict.note,
    )


def run_judged(
    gate: QualityGate, root: Path, env: Mapping[str, str] | None, baseline: Lookup | None
) -> GateResult:
    """Run one gate and, with a `baseline`, judge a required gate's failure against its base
    result: the one way a ticket's gate, the merge queue's re-run and `gate --run` are run."""
    result = run_gate(gate, root, env, judged=baseline is not None)
    return against_base(result, gate, baseline)


def against_base(result: GateResult, gate: QualityGate, baseline: Lookup | None) -> GateResult:
    """A required gate that failed (and ran: one that could not start is a configuration
    error), judged against its base result when there is a baseline; else as it is. The base
    is asked for only then: a gate that passes never costs a run on the base."""
    if baseline is None or not blocks(result) or result.error is not None:
        return result
    return judged(result, baseline(gate), gate)


def blocks(result: GateResult) -> bool:
    """A required gate that failed, and not only as it fails on the base commit."""
    return result.required and not result.passed and not result.preexisting


def feedback_message(
    failed: Sequence[GateResult],
    tries: Mapping[str, tuple[int, int]],
    redact: Callable[[str], str],
) -> str:
    """The feedback message: which gates failed, each with its error, then the instruction.
    `tries` maps a gate to (this retry, its maximum); the header shows the tightest one."""
    now, limit = min((tries[r.name] for r in failed), key=lambda t: t[1] - t[0])
    lines = [
        f"⚠️ Quality Gate Failures (attempt {now}/{limit})",
        "",
        "The following quality gates failed:",
    ]
    for result in failed:
        used, most = tries[result.name]
        lines += ["", f"❌ {result.name} (retry {used}/{most})"]
        if result.baseline_note:  # names the tests that fail here and not on the base
            lines.append(f"Compared with the base commit: {result.baseline_note}")
        lines += [
            f"Error: {result.summary}; the end of its output:",
            fence_untrusted(result.output_tail(redact), redact, label=f"gate_output {result.name}"),
        ]
    lines += [
        "",
        "Please fix these issues and finish only when they are resolved.",
        "Note: do NOT finish (do not write your output file) until all issues are resolved.",
    ]
    return "\n".join(lines)


def sample_feedback(redact: Callable[[str], str]) -> str:
    """A feedback message like a real one, to render the fix template's gate-feedback branch
    before any agent runs."""
    failed = GateResult("lint", True, False, 1, 0.0, "src/parser.py:42:101: E501 Line too long")
    return feedback_message([failed], {"lint": (1, 3)}, redact)


@dataclass(frozen=True)
class GateOutcome:
    """The last round of gate results, and the required gate that blocks (if one does)."""

    results: tuple[GateResult, ...]
    blocking: GateResult | None
    retries: dict[str, int]  # feedback rounds spent per gate
    failure: str | None = None  # the fixer itself failed during a feedback round

    @property
    def warnings(self) -> list[GateResult]:
        return [r for r in self.results if not r.required and not r.passed]


def run_gates(
    gates: Sequence[QualityGate],
    root: Path,
    *,
    default_max: int,
    feedback: bool,
    redact: Callable[[str], str],
    env: Mapping[str, str] | None = None,
    on_result: Callable[[GateResult, int], None],
    send_back: Callable[[str, int, list[GateResult]], str | None],
    can_block: bool = True,
    baseline: Lookup | None = None,
) -> GateOutcome:
    """Run every gate in declared order; while a required gate fails and has retries left,
    send the fixer back with the feedback and run them all again (the inner loop, same
    models). A required gate out of retries blocks; optional gates never do, nor any gate when
    `can_block` is false (workflow.enableQualityGate). A gate that cannot start ends the loop
    with a failure: a configuration error, not something the fixer can fix. With `baseline`
    (`gate_baseline`), a failing required gate is judged against the base commit first: one
    that is no worse there is pre-existing, and neither blocks nor sends the fixer back."""
    used = {g.name: 0 for g in gates}
    by_name = {g.name: g for g in gates}
    round_ = 1
    while True:
        results = []
        for gate in gates:
            result = run_judged(gate, root, env, baseline if can_block else None)
            on_result(result, round_)
            results.append(result)
            if result.error is not None:
                why = f"quality gate {gate.name} cannot start: {result.error} (see docs/gates.md)"
                return GateOutcome(tuple(results), None, used, why)
        failed = [r for r in results if blocks(r)]
        if not failed or not can_block:
            return GateOutcome(tuple(results), None, used)
        spent = [r for r in failed if used[r.name] >= max_retries(by_name[r.name], default_max)]
        if spent or not feedback:
            return GateOutcome(tuple(results), (spent or failed)[0], used)
        for r in failed:
            used[r.name] += 1
        tries = {r.name: (used[r.name], max_retries(by_name[r.name], default_max)) for r in failed}
        failure = send_back(feedback_message(failed, tries, redact), round_, failed)
        if failure is not None:
            return GateOutcome(tuple(results), None, used, failure)
        round_ += 1


def gate_rows(outcome: GateOutcome, redact: Callable[[str], str]) -> list[dict[str, object]]:
    """The gates as post-fix-verification.json and close-summary.md report them."""
    rows: list[dict[str, object]] = []
    for r in outcome.results:
        rows.append(
            {
                "name": r.name,
                "required": r.required,
                "passed": r.passed,
                "exitCode": r.exit_code,
                "summary": r.summary,
                "retries": outcome.retries.get(r.name, 0),
                "blocking": outcome.blocking is not None and outcome.blocking.name == r.name,
                "outputTail": "" if r.passed else r.output_tail(redact),
                "preexisting": r.preexisting,
                "newFailures": sorted(r.new_failures),
                "baselineNote": r.baseline_note,
            }
        )
    return rows
