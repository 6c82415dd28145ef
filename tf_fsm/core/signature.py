"""The failure signature of a blocked attempt (pure): what blocked it, with the noise removed.

Two attempts that fail "the same way" must get the same signature even though an agent
rewrote the review in between: line numbers drift as code moves, whitespace and case change,
and a reviewer rewords its sentence. So a finding is reduced to its severity and its location
(`src/parser.py:42` -> `src/parser.py:#`), or, when it names no location, to its normalized
text; the failing quality-gate commands are added by name. The signature is the sorted
multiset of those entries and a short digest of it.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tf_fsm.core.state import SEVERITIES

_BACKTICKED = re.compile(r"`([^`\n]{1,300})`")
# A path with a file extension, optionally `:line[:col]`; or any token holding a `/` and
# followed by `:line`. An extension must start with a letter, so "1.2" or "v3.10" is no path.
_PATH = re.compile(
    r"(?<![\w/.-])((?:[\w.-]+/)*[\w-][\w.-]*\.[A-Za-z][A-Za-z0-9]{0,9}(?::\d+){0,2}"
    r"|(?:[\w.-]+/)+[\w.-]+:\d+(?::\d+)?)(?![\w/])"
)
_DIGITS = re.compile(r"\d+")
_SPACE = re.compile(r"\s+")
_MAX_TEXT = 120  # a finding without a location is keyed by this much of its text


def normalize(text: str) -> str:
    """Case, runs of digits and whitespace normalized: `Foo.py:42  bar` -> `foo.py:# bar`."""
    return _SPACE.sub(" ", _DIGITS.sub("#", text.lower())).strip()


def _paths(text: str) -> Iterable[str]:
    for m in _PATH.finditer(text):
        path = m.group(1)
        ext = path.split(":")[0].rsplit(".", 1)[-1]
        # "e.g" is no file: a one-letter extension needs a directory or a line number.
        if "/" in path or ":" in path or len(ext) > 1:
            yield path


def location(text: str) -> str | None:
    """The first file location a finding names (backticked spans first), or None."""
    for span in _BACKTICKED.findall(text):
        for path in _paths(span.strip()):
            return path
    return next(iter(_paths(text)), None)


def finding_key(severity: str, text: str) -> str:
    where = location(text)
    what = normalize(where) if where else normalize(text)[:_MAX_TEXT]
    return f"{severity.lower()} {what}"


@dataclass(frozen=True)
class FailureSignature:
    entries: tuple[str, ...]  # sorted; a finding repeated at one location appears twice

    @property
    def digest(self) -> str:
        return hashlib.sha256("\n".join(self.entries).encode("utf-8")).hexdigest()[:16]


def failure_signature(
    fail_on: Sequence[str],
    findings: Mapping[str, Sequence[str]],
    counts: Mapping[str, int],
    failing_gates: Iterable[str] = (),
) -> FailureSignature | None:
    """The signature of a blocked attempt from its remaining findings (per severity, as
    `detection.extract_findings` lists them), its post-fix counts and the names of the
    quality-gate commands that blocked it. Only failOn severities count: a Minor finding
    that comes and goes does not make two identical failures different. None when nothing
    blocks (the attempt was not blocked by findings or gates)."""
    entries: list[str] = []
    for severity in SEVERITIES:
        if severity not in fail_on:
            continue
        listed = list(findings.get(severity, ()))
        entries += [finding_key(severity, text) for text in listed]
        # Counts without listed findings (a statistics-only review) still tell failures apart.
        unlisted = max(0, int(counts.get(severity, 0)) - len(listed))
        entries += [f"{severity.lower()} (unlisted)"] * unlisted
    entries += [f"gate {normalize(name)}" for name in failing_gates]
    return FailureSignature(tuple(sorted(entries))) if entries else None
