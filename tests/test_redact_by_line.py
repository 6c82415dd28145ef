"""The redactor's line-by-line path (remembered lines, the new ones in one pass) gives exactly
what one pass of the regex over the whole text gives: every secret the one pass redacts, and
nothing else."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.test_redact import _TEXT, AWS, GITHUB, JWT, OPENAI, PEM
from tests.test_redact_formats import FORMATS
from tf_fsm.storage.redact import MARKER, Redactor

LITERALS = ["s3cr3tvalue", 'ab"cd\\ef12', "0123456789abcdef"]
PAD = "# a line long enough that the text is redacted line by line " * 5


def one_pass(literals: list[str]) -> Redactor:
    """The oracle: the same redactor, never line by line."""
    r = Redactor(literals)
    r._by_line = False
    return r


def check(text: str, literals: list[str]) -> None:
    """The line-by-line redactor agrees with one pass: cold, with some of the text's lines
    remembered from other texts (where they were first lines, or not), and with all of them."""
    fast, slow = Redactor(literals), one_pass(literals)
    lines = text.split("\n")
    for warm in ("\n".join(lines[1::2]), "\n".join(["first", *lines[::2]])):
        assert fast(warm) == slow(warm)
        assert fast(text) == slow(text)
    again = "\n".join(["new first line", *reversed(lines)])
    assert fast(again) == slow(again)


_LINES = st.lists(_TEXT, min_size=2, max_size=12)
_ENDINGS = st.sampled_from(["\n", "\r\n"])


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(_LINES, _ENDINGS)
@example(["x", "\\" + FORMATS["npm"], "y"], "\n")  # a backslash starting a line, then a token
@example([f"password={OPENAI}", f'  "apiKey": "{GITHUB["ghp"]}",'], "\n")
@example(["", "", ""], "\n")
def test_line_by_line_equals_one_pass(lines: list[str], ending: str) -> None:
    text = PAD + ending + ending.join(lines)
    for literals in ([], LITERALS):
        check(text, literals)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_TEXT, min_size=1, max_size=8))
def test_pretty_json_views_equal_one_pass(values: list[str]) -> None:
    text = json.dumps({f"k{i}": v for i, v in enumerate(values)} | {"pad": PAD}, indent=2)
    check(text, LITERALS)


def test_every_format_and_assignment_is_redacted_line_by_line() -> None:
    lines = [PAD, *FORMATS.values(), f"token: {AWS}", f"Authorization: Bearer {JWT}"]
    lines += [f'  "password": "{v}",' for v in ("hunter2hunter2", "s3cr3tvalue")]
    text = "\n".join(lines)
    r = Redactor(LITERALS)
    for _ in range(2):  # cold, then every line remembered
        out = r(text)
        assert out == one_pass(LITERALS)(text)
        assert out.count("\n") == text.count("\n")
        for secret in [*FORMATS.values(), AWS, JWT, "hunter2hunter2", "s3cr3tvalue"]:
            assert secret not in out
        assert out.count(MARKER) >= len(FORMATS) + 4


def test_what_spans_lines_is_redacted_in_one_pass() -> None:
    """A PEM block, and a literal value holding a newline, match across lines: even when the
    lines of the block were seen before, apart."""
    r = Redactor()
    base64 = PEM.split("\n")[1:-1]
    r("\n".join([PAD, *base64]))
    out = r(f"{PAD}\nkey:\n{PEM}\nafter")
    assert not any(line in out for line in base64)
    value = "first-part-of-it\nsecond-part-of-it"
    r = Redactor([value])
    r(f"{PAD}\nsee first-part-of-it\nsecond-part-of-it here")
    out = r(f"{PAD}\nsee {value} here\n{PAD}")
    assert "first-part-of-it" not in out and "second-part-of-it" not in out


def test_a_first_line_is_redacted_as_a_text_start() -> None:
    """At a text's start, `\\` then a token is not a JSON escape (nothing comes before the
    backslash); after a newline it is. A first line is never remembered for later lines."""
    line = "\\" + FORMATS["npm"]
    r, slow = Redactor(), one_pass([])
    for text in (f"{line}\n{PAD}", f"{PAD}\n{line}", f"{line}\n{PAD}"):
        assert r(text) == slow(text)
    assert r(f"{line}\n{PAD}") != r(f"{PAD}\n{line}").split("\n")[1] + f"\n{PAD}"


def test_remembered_lines_are_bounded() -> None:
    r = Redactor()
    long_line = "x" * 5000
    for n in range(3):
        lines = [f"line {n}-{i} {OPENAI}" for i in range(3000)]
        out = r("\n".join([PAD, *lines, long_line]))
        assert OPENAI not in out
        assert len(r._lines) <= 4097 + 3000
    assert long_line not in r._lines


def test_remembered_lines_are_shared_only_by_redactors_with_the_same_values() -> None:
    """Each run's store builds its redactor from the environment: the lines one redacted
    serve the next, never a redactor with other literal values."""
    line = "value: a-literal-secret-1 here"
    text = f"{PAD}\n{line}"
    first, again = Redactor(["a-literal-secret-1"]), Redactor(["a-literal-secret-1"])
    assert first(text).endswith("value: [REDACTED] here")
    assert again._lines is first._lines and line in again._lines
    assert again(text) == first(text)
    other = Redactor()
    assert other._lines is not first._lines
    assert other(text).endswith(line)


def test_redactors_with_as_many_literal_values_as_remembered_keep_sharing_their_lines() -> None:
    """However many redactors with other values came before, one made again with the same
    values shares the lines of the first; and at most _MEMO_PATTERNS sets are remembered."""
    from tf_fsm.storage import redact

    for n in range(2 * redact._MEMO_PATTERNS):
        Redactor([f"an-other-literal-{n}"])
        assert len(redact._LINES) <= redact._MEMO_PATTERNS
        first = Redactor(["a-literal-secret-1"])
        assert Redactor(["a-literal-secret-1"])._lines is first._lines, n


def test_a_text_redacted_before_comes_back_whole_and_its_lines_stay_exact() -> None:
    """A prompt is redacted, then its copy: the second time it is one lookup. Remembering
    whole texts never changes what a line is redacted to."""
    line = "\\" + FORMATS["npm"]
    r, slow = Redactor(), one_pass([])
    single = line + " " + PAD  # one line, long: a text's start, never remembered as a line
    assert r(single) == slow(single)
    text = f"{PAD}\n{line}\n{GITHUB['ghp']}"
    assert r(text) == slow(text) and r(text) is r(text)
    assert r(r(text)) == r(text)
    assert r(f"{PAD}\n{single}") == slow(f"{PAD}\n{single}")
