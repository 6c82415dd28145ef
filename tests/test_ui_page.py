"""The parts of a ticket's page that need no browser: the findings that decided a blocked
gate (the reports the gate read, with their reviewers), the page's heading levels, the
neighbouring tickets and the colour of the state a ticket stands in."""

from __future__ import annotations

import json
import re

from tf_fsm.core import machine as fsm
from tf_fsm.core.detection import remaining_findings
from tf_fsm.core.reports import Finding, merge_reviews, split_reviewers
from tf_fsm.ui.diagram import fallback_svg
from tf_fsm.ui.markdown import to_html
from tf_fsm.ui.page import neighbours
from tf_fsm.views.history import History

REVIEW = "## Major\n- the depth limit is never read\n\n## Minor\n- a typo\n"
RE_REVIEW = "## Major\n- still unread after the fix\n"


def test_the_remaining_findings_are_the_re_review_s_in_rereview_mode_else_the_review_s() -> None:
    merged = merge_reviews("t-1", {"reviewer-general": REVIEW}).text
    files = {"review.md": merged, "post-fix-review.md": RE_REVIEW}
    found = remaining_findings(files.get)
    assert found["Major"] == ["the depth limit is never read *(reviewer-general)*"]
    assert found["Minor"] == ["a typo *(reviewer-general)*"]
    files["post-fix-verification.json"] = json.dumps({"mode": "rereview"})
    found = remaining_findings(files.get)
    assert found["Major"] == ["still unread after the fix"] and not found.get("Minor")
    files["post-fix-verification.json"] = "[1, 2]"  # not an object: as if absent
    assert remaining_findings(files.get)["Minor"] == ["a typo *(reviewer-general)*"]


def test_a_merged_finding_names_its_reviewers_and_keeps_a_text_that_only_looks_tagged() -> None:
    assert split_reviewers("x is wrong *(reviewer-general, reviewer-spec-audit)*") == (
        "x is wrong",
        ("reviewer-general", "reviewer-spec-audit"),
    )
    assert split_reviewers("see *(the docs)*") == ("see *(the docs)*", ())
    assert split_reviewers("plain") == ("plain", ())
    assert Finding("Major", "x *(reviewer-general)*", "reviewer-general").line() == (
        "- x *(reviewer-general)*"
    )


def test_markdown_under_a_page_heading_starts_below_it() -> None:
    text = "# Title\n\n## Part\n\n###### deepest\n"
    assert re.findall(r"<h\d>", to_html(text, str)) == ["<h1>", "<h2>", "<h6>"]
    assert re.findall(r"</?h\d>", to_html(text, str, top=4)) == [
        "<h4>", "</h4>", "<h5>", "</h5>", "<h6>", "</h6>",
    ]  # fmt: skip


def test_the_neighbours_of_a_ticket_in_the_board_s_order() -> None:
    order = ["a-1", "a-2", "a-3"]
    assert neighbours(order, "a-2") == ("a-1", "a-3")
    assert neighbours(order, "a-1") == (None, "a-2")
    assert neighbours(order, "a-3") == ("a-2", None)
    assert neighbours(order, "b-9") == (None, None)


def test_the_current_state_is_blue_while_it_runs_and_red_in_error() -> None:
    running = fallback_svg(History("t-1", current=fsm.phase_state("implement"))).decode()
    assert 'stroke="#1f5fbf" stroke-width="3"' in running and "#b03a2e" not in running
    failed = fallback_svg(History("t-1", current=fsm.ERROR)).decode()
    assert 'stroke="#b03a2e" stroke-width="3"' in failed
