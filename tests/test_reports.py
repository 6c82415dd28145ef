"""The markdown tf_fsm writes itself (tf_fsm.core.reports), read back by tf_fsm.core.detection.

Every writer here has a reader in detection.py; the tests render, parse back and compare, over
tables of real-looking inputs and over random ones (hypothesis).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tf_fsm.core.artifacts import REVIEW_FILES
from tf_fsm.core.detection import (
    extract_findings,
    parse_close_summary,
    parse_post_fix_verification,
    parse_review,
)
from tf_fsm.core.reports import (
    SEVERITY_HEADINGS,
    Finding,
    merge_reviews,
    render_close_summary,
    render_post_fix_verification,
    render_review,
    zero_counts,
)
from tf_fsm.core.state import SEVERITIES
from tf_fsm.core.verdict import evaluate

REVIEWERS = ("reviewer-general", "reviewer-spec-audit", "reviewer-second-opinion")

# Printable text on one line: no control characters and no Unicode line/paragraph separators.
_LINE = st.text(
    alphabet=st.characters(blacklist_categories=("Cc", "Cs", "Zl", "Zp")),
    min_size=0,
    max_size=60,
)
_FINDING = st.builds(
    Finding,
    severity=st.sampled_from(SEVERITIES),
    text=_LINE,
    reviewer=st.one_of(st.none(), st.sampled_from(REVIEWERS)),
)
_COUNTS = st.fixed_dictionaries({s: st.integers(0, 999) for s in SEVERITIES})
_FAIL_ON = st.lists(st.sampled_from(SEVERITIES), unique=True).map(
    lambda xs: [s for s in SEVERITIES if s in xs]
)


def counts(**nonzero: int) -> dict[str, int]:
    return {s: nonzero.get(s, 0) for s in SEVERITIES}


def _count(findings: list[Finding]) -> dict[str, int]:
    return {s: sum(f.severity == s for f in findings) for s in SEVERITIES}


# A reviewer file as an agent writes it (pi-ticketflow's review format).
GENERAL = """\
# Review: pt-1

## Critical (must fix)
No issues found.

## Major (should fix)
- `src/parser.py:42` - unbounded recursion on nested input

## Minor (nice to fix)
- `src/parser.py:17` - error message omits the line number
- `src/lexer.py:3` - unused import

## Warnings (follow-up ticket)
None.

## Suggestions (follow-up ticket)
- add a property test *(reviewer-general)*

## Summary Statistics
- Critical: 0
- Major: 1
- Minor: 2
- Warnings: 0
- Suggestions: 1
"""

# Its statistics say Major: 2 while it lists one Major finding: the statistics win.
SECOND = """\
# Second Opinion: pt-1

## Major
- `src/parser.py:88` - quadratic string building

## Summary Statistics
- Critical: 0
- Major: 2
- Minor: 0
- Warnings: 0
- Suggestions: 0
"""

# No statistics at all: the listed findings are the counts.
SPEC = """\
# Spec audit

## Critical
- `docs/spec.md` - the depth limit is not configurable as the ticket requires

## Minor
- `README.md` - the new option is not documented
"""


# --- render_review --------------------------------------------------------------------------


@settings(max_examples=300)
@given(findings=st.lists(_FINDING, max_size=25))
def test_render_review_round_trips_counts(findings: list[Finding]) -> None:
    text = render_review("pt-1", findings)
    parsed = parse_review(text)
    assert parsed.counts == _count(findings)
    assert parsed.source == "statistics"


@settings(max_examples=200)
@given(findings=st.lists(_FINDING, max_size=15), given_counts=_COUNTS)
def test_render_review_with_explicit_counts_round_trips(
    findings: list[Finding], given_counts: dict[str, int]
) -> None:
    assert parse_review(render_review("pt-1", findings, given_counts)).counts == given_counts


@settings(max_examples=200)
@given(
    findings=st.lists(
        st.builds(
            Finding,
            severity=st.sampled_from(SEVERITIES),
            text=st.from_regex(
                r"`[a-z]{1,8}\.py:[1-9][0-9]{0,2}` - [a-z][a-z ]{0,30}[a-z]", fullmatch=True
            ),
            reviewer=st.sampled_from(REVIEWERS),
        ),
        max_size=12,
    )
)
def test_render_review_findings_read_back_in_order(findings: list[Finding]) -> None:
    text = render_review("pt-1", findings)
    extracted = extract_findings(text)
    for severity in SEVERITIES:
        want = [f"{f.text} *({f.reviewer})*" for f in findings if f.severity == severity]
        assert extracted.get(severity, []) == want
    # With the statistics section cut off, the listed findings alone give the same counts.
    listed_only = text.split("## Summary Statistics")[0]
    assert parse_review(listed_only).counts == _count(findings)
    assert parse_review(text).notes == ()  # nothing contradicts the statistics tf_fsm wrote


def test_render_review_layout() -> None:
    text = render_review(
        "pt-1",
        [Finding("Major", "`a.py:1` - bad", "reviewer-general"), Finding("Minor", "meh")],
        sources=["- `review-general.md` (reviewer-general)"],
    )
    lines = text.split("\n")
    assert lines[0] == "# Review: pt-1"
    headings = [line for line in lines if line.startswith("## ")]
    assert headings == [
        *(f"## {SEVERITY_HEADINGS[s]}" for s in SEVERITIES),
        "## Review Sources",
        "## Summary Statistics",
    ]
    assert "- `a.py:1` - bad *(reviewer-general)*" in lines
    assert "- meh" in lines  # no reviewer, no tag
    assert lines.count("No issues found.") == 3
    assert text.endswith("- Critical: 0\n- Major: 1\n- Minor: 1\n- Warnings: 0\n- Suggestions: 0\n")


# --- merge_reviews --------------------------------------------------------------------------


def test_merge_reviews_sums_counts_statistics_win() -> None:
    merged = merge_reviews(
        "pt-1",
        {
            "reviewer-general": GENERAL,
            "reviewer-second-opinion": SECOND,
            "reviewer-spec-audit": SPEC,
        },
    )
    assert merged.counts == counts(Critical=1, Major=3, Minor=3, Suggestions=1)
    assert parse_review(merged.text).counts == merged.counts
    assert merged.notes == (
        "reviewer-second-opinion: Summary Statistics says Major: 2 but 1 finding is listed "
        "under Major; the statistics win",
    )


def test_merge_reviews_tags_each_finding_once_in_reviewer_order() -> None:
    merged = merge_reviews(
        "pt-1",
        {
            "reviewer-spec-audit": SPEC,
            "reviewer-general": GENERAL,
            "reviewer-second-opinion": SECOND,
        },
    )
    found = extract_findings(merged.text)
    assert found["Major"] == [
        "`src/parser.py:42` - unbounded recursion on nested input *(reviewer-general)*",
        "`src/parser.py:88` - quadratic string building *(reviewer-second-opinion)*",
    ]
    assert found["Minor"] == [
        "`README.md` - the new option is not documented *(reviewer-spec-audit)*",
        "`src/parser.py:17` - error message omits the line number *(reviewer-general)*",
        "`src/lexer.py:3` - unused import *(reviewer-general)*",
    ]
    # Already tagged in the reviewer's own file: not tagged a second time.
    assert found["Suggestions"] == ["add a property test *(reviewer-general)*"]
    assert merged.text.count("*(reviewer-general)*") == 4
    for item in [i for items in found.values() for i in items]:
        assert item.count("*(reviewer-") == 1
    assert [f.reviewer for f in merged.findings] == [
        "reviewer-spec-audit",
        "reviewer-spec-audit",
        "reviewer-general",
        "reviewer-general",
        "reviewer-general",
        "reviewer-general",
        "reviewer-second-opinion",
    ]


def test_merge_reviews_lists_review_sources_in_order() -> None:
    merged = merge_reviews("pt-1", {"reviewer-second-opinion": SECOND, "reviewer-general": GENERAL})
    lines = merged.text.split("\n")
    start = lines.index("## Review Sources")
    assert lines[start + 1 : start + 4] == [
        "- `review-second.md` (reviewer-second-opinion) - 0 Critical, 2 Major, 0 Minor, "
        "0 Warnings, 0 Suggestions",
        "- `review-general.md` (reviewer-general) - 0 Critical, 1 Major, 2 Minor, "
        "0 Warnings, 1 Suggestions",
        "",
    ]
    assert set(REVIEW_FILES) == set(REVIEWERS)


def test_merge_reviews_is_deterministic() -> None:
    reviews = {"reviewer-general": GENERAL, "reviewer-spec-audit": SPEC}
    first = merge_reviews("pt-1", reviews)
    again = merge_reviews("pt-1", dict(reviews))
    assert first.text.encode() == again.text.encode()
    assert first == again
    swapped = merge_reviews("pt-1", {"reviewer-spec-audit": SPEC, "reviewer-general": GENERAL})
    assert swapped.counts == first.counts
    assert swapped.text != first.text  # the reviewer order is the order of the text


def test_merging_a_merged_review_does_not_tag_twice() -> None:
    once = merge_reviews("pt-1", {"reviewer-general": GENERAL, "reviewer-spec-audit": SPEC})
    twice = merge_reviews("pt-1", {"reviewer-general": once.text})
    assert extract_findings(twice.text) == extract_findings(once.text)
    assert twice.counts == once.counts


def test_merge_reviews_empty_and_clean() -> None:
    clean = render_review("pt-1", [])
    merged = merge_reviews("pt-1", {"reviewer-general": clean})
    assert merged.counts == zero_counts()
    assert merged.findings == ()
    assert merge_reviews("pt-1", {}).counts == zero_counts()
    assert "## Review Sources" not in merge_reviews("pt-1", {}).text


@settings(max_examples=150)
@given(
    per_reviewer=st.lists(
        st.tuples(st.lists(_FINDING, max_size=6), st.one_of(st.none(), _COUNTS)),
        min_size=1,
        max_size=3,
    )
)
def test_merge_reviews_counts_are_the_sum_of_each_reviewers(
    per_reviewer: list[tuple[list[Finding], dict[str, int] | None]],
) -> None:
    reviews = {
        REVIEWERS[i]: render_review("pt-1", findings, stats)
        for i, (findings, stats) in enumerate(per_reviewer)
    }
    merged = merge_reviews("pt-1", reviews)
    want = {s: sum(parse_review(t).counts[s] for t in reviews.values()) for s in SEVERITIES}
    assert merged.counts == want
    assert parse_review(merged.text).counts == want
    assert merge_reviews("pt-1", reviews).text == merged.text


def test_merge_reviews_is_fast_on_hostile_tag_text() -> None:
    """Regression: at 8ccc9d9 the tag regex backtracked exponentially on this text."""
    code = (
        "from tf_fsm.core.reports import merge_reviews\n"
        "text = '## Major\\n- x *(' + 'reviewer-' * 40 + '!\\n'\n"
        "merge_reviews('pt-1', {'reviewer-general': text})\n"
    )
    try:
        done = subprocess.run([sys.executable, "-c", code], timeout=60, capture_output=True)
    except subprocess.TimeoutExpired:
        pytest.fail("merge_reviews took over a minute on a 370-character finding")
    assert done.returncode == 0, done.stderr


# --- post-fix verification ------------------------------------------------------------------


@settings(max_examples=200)
@given(
    pre=_COUNTS,
    post=_COUNTS,
    fail_on=_FAIL_ON,
    passed=st.booleans(),
    mode=st.sampled_from(["rereview", "fixes"]),
    reason=_LINE,
)
def test_post_fix_verification_round_trips(
    pre: dict[str, int],
    post: dict[str, int],
    fail_on: list[str],
    passed: bool,
    mode: str,
    reason: str,
) -> None:
    md, data = render_post_fix_verification(
        "pt-1", mode=mode, pre=pre, post=post, fail_on=fail_on, passed=passed, reason=reason
    )
    parsed = parse_post_fix_verification(md)
    assert parsed.counts == post
    assert parsed.passed is passed
    assert {
        "ticket_id",
        "pre_fix_counts",
        "post_fix_counts",
        "verification_passed",
        "fail_on",
    } <= set(data)
    assert data["ticket_id"] == "pt-1"
    assert data["pre_fix_counts"] == pre
    assert data["post_fix_counts"] == post
    assert data["verification_passed"] is passed
    assert data["fail_on"] == fail_on
    assert json.loads(json.dumps(data)) == data  # plain JSON, as pi-ticketflow writes it


def test_post_fix_verification_fills_missing_severities() -> None:
    md, data = render_post_fix_verification(
        "pt-1",
        mode="fixes",
        pre={"Major": 2},
        post={"Minor": 1},
        fail_on=["Critical", "Major"],
        passed=True,
        reason="no failOn severity remains after the fix",
    )
    assert data["pre_fix_counts"] == counts(Major=2)
    assert data["post_fix_counts"] == counts(Minor=1)
    assert list(data["post_fix_counts"]) == list(SEVERITIES)
    assert "- **Status**: PASS" in md
    assert "- **Mode**: fixes (review.md minus fixes.md)" in md
    verdict = evaluate(["Critical", "Major"], post_fix_verification=md)
    assert verdict.source == "post-fix-verification"
    assert verdict.blocked is False
    assert verdict.counts == counts(Minor=1)
    assert verdict.notes == ()


# --- close summary --------------------------------------------------------------------------


@settings(max_examples=200)
@given(
    closed=st.booleans(),
    attempt=st.integers(1, 12),
    trigger=st.sampled_from(["initial", "quality_gate", "manual_retry", "ralph_retry"]),
    post=_COUNTS,
    fail_on=_FAIL_ON,
    escalated=st.dictionaries(
        st.sampled_from(["fixer", "reviewer-second-opinion", "worker"]),
        st.sampled_from(["openai-codex/gpt-5.3-codex", "zai/glm-5"]),
    ),
    reason=_LINE,
    retry_count=st.integers(0, 5),
    notes=st.lists(_LINE, max_size=3),
)
def test_close_summary_round_trips_and_evaluate_agrees(
    closed: bool,
    attempt: int,
    trigger: str,
    post: dict[str, int],
    fail_on: list[str],
    escalated: dict[str, str],
    reason: str,
    retry_count: int,
    notes: list[str],
) -> None:
    text = render_close_summary(
        "pt-1",
        closed=closed,
        attempt=attempt,
        trigger=trigger,
        counts=post,
        fail_on=fail_on,
        escalated=escalated,
        reason=reason,
        retry_count=retry_count,
        max_retries=5,
        notes=notes,
    )
    parsed = parse_close_summary(text)
    assert parsed.status == ("closed" if closed else "blocked")
    assert parsed.word == ("CLOSED" if closed else "BLOCKED")
    assert parsed.counts == post
    verdict = evaluate(fail_on, close_summary=text)
    assert verdict.source == "close-summary.md"
    assert verdict.blocked is (not closed)
    assert verdict.status == parsed.status
    assert verdict.counts == post
    assert verdict.fail_on == tuple(fail_on)


def test_close_summary_layout() -> None:
    text = render_close_summary(
        "pt-1",
        closed=False,
        attempt=2,
        trigger="quality_gate",
        counts=counts(Major=1),
        fail_on=["Critical", "Major"],
        escalated={"fixer": "openai-codex/gpt-5.3-codex"},
        reason="post-fix counts Major: 1 (failOn: Critical, Major)",
        retry_count=2,
        max_retries=3,
    )
    lines = text.split("\n")
    assert lines[:4] == ["# Close Summary: pt-1", "", "## Status", "**BLOCKED**"]
    assert "- Quality Gate: BLOCKED (failOn: [Critical, Major])" in lines
    assert "- Escalated roles: fixer=openai-codex/gpt-5.3-codex" in lines
    assert "- Retries: 2/3" in lines
    assert "## Notes" not in lines
    verdict = evaluate(["Critical", "Major"], close_summary=text)
    assert verdict.blocked is True
    assert verdict.reason == (
        "close-summary.md says BLOCKED (Major: 1 with failOn [Critical, Major])"
    )
    base = render_close_summary(
        "pt-1",
        closed=True,
        attempt=1,
        trigger="initial",
        counts={},
        fail_on=[],
        escalated={},
        reason="ok",
        retry_count=0,
        max_retries=3,
        notes=["kept"],
    )
    assert "- Escalated roles: none (base models)" in base
    assert base.endswith("\n## Notes\n- kept\n")
    assert parse_close_summary(base).counts == zero_counts()
