"""The one rule that judges a ticket's failing quality gate against the same gate's result on
the base commit (docs/gates.md, "The baseline: what a ticket makes worse"): only what the ticket
makes worse blocks, told test by test from a JUnit report of each side. The base results are
computed and cached by tf_fsm.workspace.baseline. Pure: results in, a judgement and its note out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: how many test names a note lists before it says how many more there are
NAMES_SHOWN = 10
_CONTROL = re.compile(r"[\x00-\x1f\x7f]+")


@dataclass(frozen=True)
class BaseResult:
    """One required gate's result on a base commit."""

    gate: str
    passed: bool
    exit_code: int | None
    failing_tests: frozenset[str] | None  # from its JUnit report; None without a readable one
    summary: str  # one line: "passed", "exit code 1", "timed out after ..."
    sha: str  # the base commit
    started: bool = True  # False: it could not start there, so it says nothing of the base


@dataclass(frozen=True)
class Judged:
    blocks: bool
    preexisting: bool = False  # failing, but no worse than on the base: it does not block
    new_failures: frozenset[str] = frozenset()  # tests failing here that did not on the base
    note: str = ""


def judge(
    ticket: tuple[bool, frozenset[str] | None], base: BaseResult | None, hint: str = ""
) -> Judged:
    """Does a ticket's gate result block, given the gate's result on the base commit? Only
    what the ticket makes worse does (docs/gates.md), and that is told test by test: with a
    JUnit report on both sides, a test failing here that did not fail on the base. A failure
    no report on both sides explains blocks, even when the gate fails on the base too: the
    old failure may hide a new one. `hint`: how to give the gate a report, for that note."""
    passed, failing = ticket
    if passed:
        return Judged(False)
    if base is None:
        return Judged(True)
    short = base.sha[:12]
    if not base.started:
        return Judged(True, note=f"it could not start on the base commit {short} ({base.summary})")
    if failing and base.failing_tests is not None:
        new = failing - base.failing_tests
        if new:
            said = f"did not fail on the base commit {short}: {names_of(new)}"
            return Judged(True, new_failures=new, note=f"{_tests(len(new))} failing that {said}")
        said = f"failed on the base commit {short} too: {names_of(failing)}"
        return Judged(False, preexisting=True, note=f"all {_tests(len(failing))} {said}")
    if base.passed:
        return Judged(True, note=f"it passes on the base commit {short}")
    if failing == frozenset() and base.failing_tests:
        return Judged(True, note=f"it fails with no failing test, unlike the base commit {short}")
    return Judged(True, note=_unexplained(failing, base, hint))


def _unexplained(failing: frozenset[str] | None, base: BaseResult, hint: str) -> str:
    """The note of a gate failing on the base too, without the reports that would tell its
    failures apart."""
    if failing == frozenset():  # the failure is not a failing test: a crash, a threshold
        why = "its report names no failing test, so its failure cannot be compared test by test"
    elif failing is None and base.failing_tests is None:
        why = "neither run wrote a JUnit report, so tf_fsm cannot tell which tests fail anew"
    elif failing is None:
        why = "this run wrote no JUnit report, so tf_fsm cannot tell which tests fail anew"
    else:
        why = "the base run wrote no JUnit report, so tf_fsm cannot tell which tests fail anew"
    said = f"it fails on the base commit {base.sha[:12]} too ({base.summary}), but {why}"
    rule = "a failure is never pre-existing without a report on both sides"
    return f"{said}: {rule}" + (f"; {hint}" if hint else "")


def _tests(n: int) -> str:
    return f"{n} test{'s' if n != 1 else ''}"


def names_of(tests: frozenset[str]) -> str:
    """Test names for a one-line note: sorted, the first few, control characters (a name from
    an untrusted report may hold a newline) shown as spaces."""
    shown = [_CONTROL.sub(" ", t)[:200] for t in sorted(tests)[:NAMES_SHOWN]]
    more = len(tests) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")
