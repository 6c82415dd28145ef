"""The failing tests of a JUnit XML report (docs/gates.md, "The baseline"), as pytest
`--junitxml`, Jest (jest-junit), Go's go-junit-report and Maven surefire write it.

A report is written by the ticket's own code, so it is untrusted input: it is read with the
stdlib's expat directly, and a document type declaration (where entity bombs and external
entities live) is refused outright, as are reports past the size, element or nesting limits.
Anything that is not such a report, garbage included, is None: never an exception.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from xml.parsers import expat

#: the largest report read (a suite of 100k tests with long failure texts stays well below)
MAX_REPORT_BYTES = 50 * 1024 * 1024
#: at most this many elements, and this deep: no real report comes near either
MAX_ELEMENTS = 5_000_000
MAX_DEPTH = 256

_ROOTS = frozenset({"testsuites", "testsuite"})
#: a testcase's child that says it did not pass (a surefire `flakyFailure` passed on a rerun)
_FAILED = frozenset({"failure", "error"})


class _NotAReport(Exception):
    """The text is not a JUnit report tf_fsm reads."""


@dataclass
class _Reading:
    """The state of one pass over a report's elements."""

    stack: list[str] = field(default_factory=list)
    elements: int = 0
    case: str | None = None  # the id of the testcase being read
    case_failed: bool = False
    failing: set[str] = field(default_factory=set)

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        name = tag.rpartition(":")[2]  # a namespace prefix says nothing here
        self.elements += 1
        if self.elements > MAX_ELEMENTS or len(self.stack) >= MAX_DEPTH:
            raise _NotAReport
        if not self.stack and name not in _ROOTS:
            raise _NotAReport
        if name == "testcase":
            self.case, self.case_failed = case_id(attrs), False
        elif name in _FAILED and self.stack[-1] == "testcase":
            self.case_failed = True
        self.stack.append(name)

    def end(self, tag: str) -> None:
        if self.stack.pop() == "testcase" and self.case is not None:
            if self.case_failed:
                self.failing.add(self.case)
            self.case = None


def case_id(attrs: dict[str, str]) -> str:
    """`classname::name`, or `file::name` when the testcase has no classname (pytest's
    collection errors, some Jest reporters), or the bare name."""
    name = attrs.get("name", "")
    owner = attrs.get("classname") or attrs.get("file")
    return f"{owner}::{name}" if owner else name


def _refuse(*_: object) -> int:
    raise _NotAReport  # a DOCTYPE or an entity declaration: no report needs one


def _parse(data: str | bytes) -> frozenset[str] | None:
    reading = _Reading()
    parser = expat.ParserCreate()
    parser.StartDoctypeDeclHandler = _refuse
    parser.EntityDeclHandler = _refuse
    parser.UnparsedEntityDeclHandler = _refuse
    parser.ExternalEntityRefHandler = _refuse
    parser.StartElementHandler = reading.start
    parser.EndElementHandler = reading.end
    try:
        parser.Parse(data, True)
    except (_NotAReport, expat.ExpatError, ValueError, RecursionError):
        return None
    return frozenset(reading.failing) if reading.elements else None


def failing_tests(xml_text: str) -> frozenset[str] | None:
    """The ids of the testcases with a `<failure>` or `<error>` child; None when the text is
    not a JUnit report (not XML, another root element, a DOCTYPE, past the limits)."""
    if len(xml_text) > MAX_REPORT_BYTES:
        return None
    return _parse(xml_text)


#: what identifies one version of a report file: a run that did not write it leaves it equal
Stamp = tuple[int, int, int, int]


def stamp(path: Path) -> Stamp | None:
    """The report file's identity and change time before a run, or None when it is absent."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def read_report(path: Path, before: Stamp | None, within: Path) -> frozenset[str] | None:
    """The failing tests of the report at `path` that the run since `before` wrote; None when
    there is none, the run left it as it was (an earlier run's report says nothing of this
    one), it lies outside `within` (through a symlink too), or it is no JUnit report."""
    after = stamp(path)
    if after is None or after == before or after[2] > MAX_REPORT_BYTES:
        return None
    real, home = os.path.realpath(path), os.path.realpath(within)
    if not real.startswith(home.rstrip(os.sep) + os.sep):
        return None
    try:
        with Path(real).open("rb") as handle:
            data = handle.read(MAX_REPORT_BYTES + 1)
    except OSError:
        return None
    return None if len(data) > MAX_REPORT_BYTES else _parse(data)
