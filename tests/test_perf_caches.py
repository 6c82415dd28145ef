"""What the per-phase code path remembers between calls gives what computing afresh gives:
review parsing, the models of each escalation tier, and templates found once per process."""

from __future__ import annotations

import os
from pathlib import Path

from tests.test_escalation import ALL_MODELS, make
from tf_fsm.core import escalation
from tf_fsm.core.detection import _parse_review, extract_findings, parse_review
from tf_fsm.engine.prompts import PromptLibrary

REVIEW = (
    "# Review\n\n## Major (should fix)\n- `a.py:1` - wrong\n- `b.py:2` - wrong too\n\n"
    "## Minor\n- `c.py:3` - style\n\n## Summary Statistics\n- Major: 2\n- Minor: 1\n"
)


def test_a_review_parsed_again_is_a_copy_of_the_same_answer() -> None:
    first = parse_review(REVIEW)
    first.counts["Major"] = 99  # a caller changing its copy changes nobody else's
    again = parse_review(REVIEW)
    assert again.counts["Major"] == 2 and again.source == "statistics"
    assert again == _parse_review.__wrapped__(REVIEW)
    findings = extract_findings(REVIEW)
    findings["Major"].append("not in the file")
    assert extract_findings(REVIEW)["Major"] == ["`a.py:1` - wrong", "`b.py:2` - wrong too"]
    assert parse_review(REVIEW.replace("Major: 2", "Major: 3")).counts["Major"] == 3


def test_a_review_too_long_to_keep_is_parsed_each_time() -> None:
    long_review = REVIEW + "\n" + "filler line\n" * 30_000
    before = _parse_review.cache_info().currsize
    assert parse_review(long_review).counts["Major"] == 2
    assert _parse_review.cache_info().currsize == before


def test_tier_models_are_those_of_the_settings_asked_about() -> None:
    escalating, flat = make(True, ALL_MODELS), make(True, {})
    tiers = escalation.tier_models(escalating)
    assert tiers[1] != tiers[3]
    assert escalation.tier_models(flat)[1] == escalation.tier_models(flat)[3]
    tiers[3] = ()  # the caller's copy
    assert escalation.tier_models(escalating)[3] != ()
    assert escalation.tier_models(make(True, ALL_MODELS)) == escalation.tier_models(escalating)


def test_a_template_found_before_is_found_again_after_an_edit(tmp_path: Path) -> None:
    prompts = tmp_path / ".tf/prompts"
    prompts.mkdir(parents=True)
    template = prompts / "tf-fix.md.j2"
    template.write_text("---\nmodel: acme/one\n---\nfix\n")
    assert PromptLibrary(tmp_path).find("tf-fix.md.j2").meta == {"model": "acme/one"}
    template.write_text("---\nmodel: acme/two\n---\nfix\n")  # same size: the mtime differs
    os.utime(template, ns=(1, 1))
    assert PromptLibrary(tmp_path).find("tf-fix.md.j2").meta == {"model": "acme/two"}
    template.unlink()
    assert PromptLibrary(tmp_path).find("tf-fix.md.j2").origin == "packaged"
