"""Quality-gate detection from pi-ticketflow markdown artifacts (tf_fsm.core.detection)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tf_fsm.core.detection import (
    blocking_counts,
    normalize_severity,
    parse_close_summary,
    parse_post_fix_verification,
    parse_review,
)
from tf_fsm.core.state import SEVERITIES
from tf_fsm.core.verdict import GateVerdict, evaluate

CORPUS = Path(__file__).parent / "data" / "detection"
EXPECTED: dict[str, dict[str, Any]] = json.loads((CORPUS / "expected.json").read_text("utf-8"))
FAIL_ON = ["Critical", "Major"]


def _read(name: str) -> str:
    # Bytes, then decode: read_text would translate CRLF / CR and hide what the parser must handle.
    return (CORPUS / name).read_bytes().decode("utf-8")


def _zeros(**given: int) -> dict[str, int]:
    return {s: given.get(s, 0) for s in SEVERITIES}


def _parse(name: str, text: str) -> dict[str, Any]:
    """The parser's answer for a corpus file, shaped like its expected.json entry."""
    if name.startswith("review"):
        review = parse_review(text)
        return {"counts": review.counts, "source": review.source, "notes": review.notes}
    if name.startswith("close-summary"):
        close = parse_close_summary(text)
        return {"status": close.status, "word": close.word, "counts": close.counts}
    post = parse_post_fix_verification(text)
    return {"counts": post.counts, "passed": post.passed}


# --- corpus -----------------------------------------------------------------------------------


def test_corpus_is_complete() -> None:
    files = {p.name for p in CORPUS.glob("*.md")}
    assert files == set(EXPECTED)
    assert len(files) >= 30
    assert sum(name.startswith("post-fix") for name in files) >= 3
    assert sum(name.startswith("close-summary") for name in files) >= 8


def test_line_ending_fixtures_keep_their_bytes() -> None:
    # If git or an editor normalised these, the CRLF / CR cases would silently test LF.
    assert b"\r\n" in (CORPUS / "review-crlf-bold-stats.md").read_bytes()
    assert b"\r\n" in (CORPUS / "close-summary-crlf-status-table.md").read_bytes()
    assert b"\r\n" in (CORPUS / "post-fix-verification-table-crlf.md").read_bytes()
    cr_only = (CORPUS / "review-cr-only-line-endings.md").read_bytes()
    assert b"\r" in cr_only
    assert b"\n" not in cr_only


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_corpus_file(name: str) -> None:
    expected = EXPECTED[name]
    got = _parse(name, _read(name))
    for key in ("counts", "source", "status", "word", "passed"):
        if key in expected:
            assert got[key] == expected[key], key
    for fragment in expected.get("notes_contain", []):
        assert any(fragment in note for note in got["notes"]), (fragment, got["notes"])
    if expected.get("notes_contain") == []:
        assert got["notes"] == ()


@pytest.mark.parametrize("name", sorted(EXPECTED))
@pytest.mark.parametrize("newline", ["\r\n", "\r"])
def test_corpus_line_endings_do_not_matter(name: str, newline: str) -> None:
    lf = _read(name).replace("\r\n", "\n").replace("\r", "\n")
    assert _parse(name, lf.replace("\n", newline)) == _parse(name, lf)


# --- normalize_severity -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("critical", "Critical"),
        ("MAJOR", "Major"),
        ("minor", "Minor"),
        ("warning", "Warnings"),
        ("Warnings", "Warnings"),
        ("suggestion", "Suggestions"),
        ("SUGGESTIONS", "Suggestions"),
        ("  **Critical:** ", "Critical"),
        ("__major__", "Major"),
        ("`minor`:", "Minor"),
        ("🔴 Critical", "Critical"),
        ("", None),
        ("blocker", None),
        ("Critical Issues", None),
        ("criticality", None),
        ("warn", None),
        ("x" * 500, None),
    ],
)
def test_normalize_severity(name: str, expected: str | None) -> None:
    assert normalize_severity(name) == expected


# --- parse_close_summary ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "status", "word"),
    [
        ("## Status\n**CLOSED**\n", "closed", "CLOSED"),
        ("### status\n\nblocked\n", "blocked", "blocked"),
        ("# STATUS\n- Complete\n", "closed", "Complete"),
        ("Status: BLOCKED\n", "blocked", "BLOCKED"),
        ("- **Status**: CLOSED\n", "closed", "CLOSED"),
        ("**Status:** closed\n", "closed", "closed"),
        ("## Status: BLOCKED\n", "blocked", "BLOCKED"),
        ("🎯 **Status**: Completed\n", "closed", "Completed"),
        ("## Status\n**BLOCKED** (quality gate)\n", "blocked", "BLOCKED"),
        ("## Status\n- ❌ `BLOCKED` - Major findings remain\n", "blocked", "BLOCKED"),
        ("**Status:**\n\n_CLOSED_\n", "closed", "CLOSED"),
        ("## Status\nIN PROGRESS\n", "unknown", "IN"),
        ("## Status\nNot blocked\n", "unknown", "Not"),
        ("Status: CLOSED\n\n## Status\nBLOCKED\n", "closed", "CLOSED"),
        ("## Status\nBLOCKED\n\nStatus: CLOSED\n", "blocked", "BLOCKED"),
        ("#### Status\nCLOSED\n", "unknown", None),
        ("```\nStatus: CLOSED\n```\n", "unknown", None),
        ("The status is closed.\n", "unknown", None),
        ("", "unknown", None),
    ],
)
def test_close_summary_status_forms(text: str, status: str, word: str | None) -> None:
    close = parse_close_summary(text)
    assert (close.status, close.word) == (status, word)


def test_close_summary_counts_prefer_post_fix_and_skip_fixes_applied() -> None:
    text = (
        "## Status\nBLOCKED\n\n## Review Summary\n- Critical: 2\n- Major: 4\n- Minor: 1\n\n"
        "## Fixes Applied\n- Critical: 2\n- Major: 1\n\n## Post-Fix Counts\n- Critical: 0\n"
    )
    assert parse_close_summary(text).counts == _zeros(Critical=0, Major=4, Minor=1)


# --- parse_review -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "stats_line",
    [
        "- Critical: 2",
        "- **Critical**: 2",
        "Critical (must fix): 2",
        "**Critical:** 2",
        "* Critical issues: 2 (one duplicate)",
        "| Critical | 2 |",
        "| **🔴 Critical (must fix)** | 2 findings |",
    ],
)
def test_statistics_line_forms(stats_line: str) -> None:
    review = parse_review(f"## Summary Statistics\n{stats_line}\n")
    assert review.counts == _zeros(Critical=2)
    assert review.source == "statistics"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("- a\n- b\n", 2),
        ("1. a\n2) b\n+ c\n* d\n", 4),
        ("- a\n  - detail\n    - more\n- b\n", 2),
        ("- None\n", 0),
        ("- None.\n", 0),
        ("- N/A\n", 0),
        ("- No issues found\n", 0),
        ("- No critical issues found.\n", 0),
        ("- Nothing to report\n", 0),
        ("No critical issues found.\n", 0),
        ("- None of the inputs are validated\n", 1),
        ("- No timeout on the socket\n", 1),
        ("```\n- fake\n```\n- real\n", 1),
        ("~~~\n- fake\n~~~~\n", 0),
        ("| File | Issue |\n|---|---|\n| a.py | x |\n| b.py | y |\n", 2),
        ("| File | Issue |\n|---|---|\n| - | None |\n", 0),
        ("### src/a.py\n- a\n### src/b.py\n- b\n- c\n", 3),
        ("---\n", 0),
        ("", 0),
    ],
)
def test_findings_in_a_severity_section(body: str, expected: int) -> None:
    review = parse_review(f"## Critical (must fix)\n{body}\n## Positive Notes\n- good\n- fine\n")
    assert review.counts == _zeros(Critical=expected)
    assert review.source == "sections"


def test_sections_end_at_same_level_headings_and_bold_severity_lines() -> None:
    text = (
        "## Major\n- m1\n### detail\n- m2\n**Minor**\n- n1\n## Review Sources\n"
        "- `review-general.md` - 0 Critical, 3 Major\n- Critical: 5\n"
    )
    review = parse_review(text)
    assert review.counts == _zeros(Major=2, Minor=1)


def test_statistics_win_and_disagreement_is_noted() -> None:
    review = parse_review("## Major\n- a\n- b\n\n## Summary Statistics\n- Major: 3\n")
    assert review.counts == _zeros(Major=3)
    assert review.source == "statistics"  # only statistics contributed a count
    assert review.notes == (
        "Summary Statistics says Major: 3 but 2 findings are listed under Major; "
        "the statistics win",
    )


def test_mixed_source_when_statistics_miss_a_listed_severity() -> None:
    review = parse_review("### Statistics\n- Critical: 0\n\n### Minor\n- a\n")
    assert review.counts == _zeros(Minor=1)
    assert review.source == "mixed"
    assert any("Minor" in note for note in review.notes)


def test_review_without_any_structure() -> None:
    review = parse_review("Looks good to me. Critical: 4 in another ticket.\n")
    assert review == parse_review("")
    assert review.counts == _zeros()
    assert review.source == "none"


# --- parse_post_fix_verification --------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "passed"),
    [
        ("- **Status**: PASS\n", True),
        ("- **Result**: FAIL\n", False),
        ("**Result**: BLOCKED\n", False),
        ("Status: passed\n", True),
        ("- **Status**: PASS\n- **Result**: FAIL\n", True),
        ("- **Quality Gate**: PASS\n", None),
        ("- **Status**: unknown\n", None),
        ("", None),
    ],
)
def test_post_fix_passed(text: str, passed: bool | None) -> None:
    assert parse_post_fix_verification(text).passed is passed


def test_post_fix_counts_only_from_the_post_fix_section() -> None:
    text = (
        "# Post-Fix Verification: x\n## Pre-Fix Counts\n- Major: 4\n"
        "## Post-Fix Counts (calculated)\n- Major: 1\n## Quality Gate Decision\n- Critical: 7\n"
    )
    assert parse_post_fix_verification(text).counts == _zeros(Major=1)
    assert parse_post_fix_verification("## Post-Fix Counts\nnothing here\n").counts is None


# --- blocking_counts / evaluate ---------------------------------------------------------------


def test_blocking_counts() -> None:
    counts = _zeros(Critical=0, Major=2, Minor=5)
    assert blocking_counts(counts, FAIL_ON) == {"Major": 2}
    assert blocking_counts(counts, ["minor", "major", "Blocker"]) == {"Major": 2, "Minor": 5}
    assert blocking_counts(counts, []) == {}
    assert blocking_counts({"Major": 2}, FAIL_ON) == {"Major": 2}


CLOSED = _read("close-summary-pi-ticketflow-closed.md")  # Minor: 1
BLOCKED_NO_COUNTS = "# Close Summary\n\n## Status\nBLOCKED\n"
UNKNOWN = _read("close-summary-unknown-status.md")
POST_PASS = _read("post-fix-verification-pass.md")  # Minor 1, Warnings 1, Suggestions 5
POST_FAIL = _read("post-fix-verification-fail-blocked.md")  # Major 2, says FAIL
POST_NO_COUNTS = _read("post-fix-verification-no-post-fix-counts.md")
REVIEW = _read("review-pi-ticketflow-real.md")  # Major 3, Minor 4, Warnings 1, Suggestions 2
REVIEW_DISAGREE = _read("review-stats-disagree.md")


@pytest.mark.parametrize(
    ("fail_on", "artifacts", "blocked", "status", "source", "counts", "reason_has"),
    [
        # close-summary.md decides whenever it says BLOCKED or CLOSED ...
        (
            FAIL_ON,
            {"close_summary": CLOSED, "review": REVIEW},
            False,
            "closed",
            "close-summary.md",
            _zeros(Minor=1),
            ["close-summary.md says CLOSED"],
        ),
        (
            FAIL_ON,
            {
                "close_summary": BLOCKED_NO_COUNTS,
                "post_fix_verification": POST_FAIL,
                "review": REVIEW,
            },
            True,
            "blocked",
            "close-summary.md",
            _zeros(Major=2, Warnings=1, Suggestions=2),
            ["close-summary.md says BLOCKED", "Major: 2", "failOn [Critical, Major]"],
        ),
        (
            FAIL_ON,
            {"close_summary": BLOCKED_NO_COUNTS, "review": REVIEW},
            True,
            "blocked",
            "close-summary.md",
            _zeros(Major=3, Minor=4, Warnings=1, Suggestions=2),
            ["close-summary.md says BLOCKED (Major: 3 with failOn [Critical, Major])"],
        ),
        (
            FAIL_ON,
            {"close_summary": BLOCKED_NO_COUNTS},
            True,
            "blocked",
            "close-summary.md",
            _zeros(),
            ["close-summary.md says BLOCKED", "no failOn severity"],
        ),
        (
            [],
            {"close_summary": BLOCKED_NO_COUNTS, "review": REVIEW},
            True,
            "blocked",
            "close-summary.md",
            _zeros(Major=3, Minor=4, Warnings=1, Suggestions=2),
            ["close-summary.md says BLOCKED", "failOn is empty: nothing blocks on review counts"],
        ),
        # ... otherwise post-fix verification, which knows what the fix left ...
        (
            FAIL_ON,
            {"close_summary": UNKNOWN, "post_fix_verification": POST_FAIL, "review": REVIEW},
            True,
            "unknown",
            "post-fix-verification",
            _zeros(Major=2, Warnings=1, Suggestions=2),
            ["Major: 2", "Critical, Major"],
        ),
        (
            FAIL_ON,
            {"post_fix_verification": POST_PASS, "review": REVIEW},
            False,
            "unknown",
            "post-fix-verification",
            _zeros(Minor=1, Warnings=1, Suggestions=5),
            ["no failOn severity remains after the fix (failOn: Critical, Major)"],
        ),
        (
            ["Minor"],
            {"post_fix_verification": POST_PASS},
            True,
            "unknown",
            "post-fix-verification",
            _zeros(Minor=1, Warnings=1, Suggestions=5),
            ["Minor: 1", "failOn: Minor"],
        ),
        (
            [],
            {"post_fix_verification": POST_FAIL},
            False,
            "unknown",
            "post-fix-verification",
            _zeros(Major=2, Warnings=1, Suggestions=2),
            ["failOn is empty: nothing blocks on review counts"],
        ),
        # ... then review.md ...
        (
            FAIL_ON,
            {"post_fix_verification": POST_NO_COUNTS, "review": REVIEW},
            True,
            "unknown",
            "review.md",
            _zeros(Major=3, Minor=4, Warnings=1, Suggestions=2),
            ["review.md", "Major: 3", "Critical, Major"],
        ),
        (
            ["Critical"],
            {"review": REVIEW},
            False,
            "unknown",
            "review.md",
            _zeros(Major=3, Minor=4, Warnings=1, Suggestions=2),
            ["no failOn", "Critical"],
        ),
        (
            [],
            {"review": REVIEW},
            False,
            "unknown",
            "review.md",
            _zeros(Major=3, Minor=4, Warnings=1, Suggestions=2),
            ["failOn is empty: nothing blocks on review counts"],
        ),
        # ... then nothing at all.
        (
            FAIL_ON,
            {},
            False,
            "unknown",
            "none",
            _zeros(),
            ["no close-summary.md, post-fix-verification or review.md yet"],
        ),
        (
            FAIL_ON,
            {"close_summary": UNKNOWN},
            False,
            "unknown",
            "none",
            _zeros(),
            ["no close-summary.md, post-fix-verification or review.md yet"],
        ),
    ],
)
def test_evaluate(
    fail_on: list[str],
    artifacts: dict[str, str],
    blocked: bool,
    status: str,
    source: str,
    counts: dict[str, int],
    reason_has: list[str],
) -> None:
    verdict = evaluate(fail_on, **artifacts)
    assert (verdict.blocked, verdict.status, verdict.source) == (blocked, status, source)
    assert verdict.counts == counts
    for fragment in reason_has:
        assert fragment in verdict.reason, (fragment, verdict.reason)


def test_evaluate_notes_explain_fallbacks_and_doubts() -> None:
    verdict = evaluate(["critical", "Blocker", "major"], close_summary=UNKNOWN, review=REVIEW)
    assert verdict.fail_on == ("Critical", "Major")
    assert any("'Blocker'" in note for note in verdict.notes)
    assert any("PENDING" in note for note in verdict.notes)

    verdict = evaluate(FAIL_ON, review=REVIEW_DISAGREE)
    assert verdict.counts["Major"] == 3
    assert any("the statistics win" in note for note in verdict.notes)

    verdict = evaluate(FAIL_ON, close_summary=BLOCKED_NO_COUNTS, review=REVIEW)
    assert any("using review.md" in note for note in verdict.notes)

    verdict = evaluate(FAIL_ON, post_fix_verification=POST_NO_COUNTS, review=REVIEW)
    assert any("no Post-Fix Counts" in note for note in verdict.notes)

    # CLOSED wins even if failOn findings remain, but the contradiction is not hidden.
    closed_with_major = "## Status\nCLOSED\n## Review Summary\n- Major: 1\n"
    verdict = evaluate(FAIL_ON, close_summary=closed_with_major)
    assert not verdict.blocked
    assert any("Major: 1" in note for note in verdict.notes)

    # The post-fix file's own PASS/FAIL is checked against the recomputed gate.
    passed_but_major = POST_FAIL.replace("FAIL", "PASS")
    verdict = evaluate(FAIL_ON, post_fix_verification=passed_but_major)
    assert verdict.blocked
    assert any("says PASS" in note for note in verdict.notes)


def test_evaluate_reads_a_bare_string_fail_on_as_a_list() -> None:
    verdict = evaluate("Critical, Major", review=REVIEW)
    assert verdict.fail_on == ("Critical", "Major")
    assert verdict.blocked


def test_evaluate_treats_an_all_unknown_fail_on_as_empty() -> None:
    verdict = evaluate(["Blocker"], review=_read("review-pi-ticketflow-critical-blocker.md"))
    assert verdict.fail_on == ()
    assert not verdict.blocked
    assert "failOn is empty" in verdict.reason


# --- never raise ------------------------------------------------------------------------------

FRAGMENTS = [
    "#", "## ", "### ", "####### ", "## Status", "## Status:", "Status:", " BLOCKED", "CLOSED",
    "COMPLETE", "**", "__", "*", "_", "`", "```", "~~~", "- ", "* ", "+ ", "1. ", "2) ", "  ",
    "\t", "|", "|---|", " | ", ":", "(", ")", "Critical", "major", "Minor", "Warning",
    "Suggestions", "Summary Statistics", "Statistics", "Post-Fix Counts", "Pre-Fix",
    "Fixes Applied", "**Result**:", "**Status**:", "PASS", "FAIL", "None", "N/A",
    "No issues found", "0", "3", "99999999999", "٣", "\n", "\r\n", "\r", "\u2028", "🔴", "⚠️",
    "ẞ", "\x00", "\ufeff",
]  # fmt: skip
markdownish = st.lists(st.sampled_from(FRAGMENTS), max_size=60).map("".join)
any_text = st.one_of(st.text(), markdownish)


def _check_counts(counts: dict[str, int] | None, *, required: bool) -> None:
    if counts is None:
        assert not required
        return
    assert list(counts) == list(SEVERITIES)
    assert all(isinstance(n, int) and n >= 0 for n in counts.values())


@settings(max_examples=300)
@given(any_text)
def test_parsers_never_raise(text: str) -> None:
    review = parse_review(text)
    _check_counts(review.counts, required=True)
    assert review.source in ("statistics", "sections", "mixed", "none")
    assert review.source != "none" or review.counts == _zeros()

    close = parse_close_summary(text)
    assert close.status in ("blocked", "closed", "unknown")
    assert close.status == "unknown" or close.word is not None
    _check_counts(close.counts, required=False)

    post = parse_post_fix_verification(text)
    _check_counts(post.counts, required=False)
    assert post.passed in (True, False, None)


@settings(max_examples=200)
@given(
    st.lists(st.one_of(st.sampled_from([*SEVERITIES, "minor", "Blocker", ""]), st.text())),
    st.one_of(st.none(), any_text),
    st.one_of(st.none(), any_text),
    st.one_of(st.none(), any_text),
)
def test_evaluate_never_raises(
    fail_on: list[str], close: str | None, post: str | None, review: str | None
) -> None:
    verdict = evaluate(fail_on, close_summary=close, post_fix_verification=post, review=review)
    assert isinstance(verdict, GateVerdict)
    _check_counts(verdict.counts, required=True)
    assert set(verdict.fail_on) <= set(SEVERITIES)
    assert verdict.reason
    if verdict.source != "close-summary.md":
        assert verdict.blocked == bool(blocking_counts(verdict.counts, verdict.fail_on))
    if not verdict.fail_on and verdict.source in ("post-fix-verification", "review.md"):
        assert "failOn is empty: nothing blocks on review counts" in verdict.reason
