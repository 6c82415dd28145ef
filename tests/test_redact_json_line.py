"""The redactor's path for journal lines (`Redactor.json_line`: a line of compact JSON cut at
its structural `,"`, the parts found clean remembered) gives exactly what one pass of the regex
over the whole line gives: every secret the one pass redacts, and nothing else."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.test_redact import _TEXT, GITHUB, OPENAI, PEM
from tests.test_redact_formats import FORMATS
from tf_fsm.core.journal import PhaseStarted
from tf_fsm.storage import redact
from tf_fsm.storage.redact import MARKER, Redactor
from tf_fsm.storage.redacted_json import redacted_lines

LITERALS = ["s3cr3tvalue", 'ab"cd\\ef12', "0123456789abcdef"]
KEYS = st.sampled_from(["event", "ts", "apiKey", "token", "password", "x-api-key", "auth", "k"])


def compact(value: Any) -> str:
    """As the journal writes a line: no spaces, non-ASCII kept, one line."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def one_pass(redactor: Redactor, line: str) -> str:
    """The oracle: the whole line through the regex at once."""
    return redactor._regex.sub(redactor._replace, line)


_LEAVES = st.one_of(_TEXT, st.integers(), st.none(), st.booleans())
_VALUES = st.recursive(
    _LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(KEYS, inner, max_size=4),
        st.dictionaries(KEYS, inner, max_size=3).map(compact),  # JSON inside a string
    ),
    max_leaves=12,
)
_OBJECTS = st.dictionaries(KEYS, _VALUES, min_size=1, max_size=6)


def check(line: str, literals: list[str]) -> None:
    """Cold, then with parts of it remembered from other lines, then with all of them."""
    fast = Redactor(literals)
    assert fast.json_line(line) == one_pass(fast, line)
    parts = line.split(',"')
    for warm in (parts[1::2], parts[::2], parts):
        fast.json_line(',"'.join(warm))
        assert fast.json_line(line) == one_pass(fast, line)


@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
@given(_OBJECTS)
@example({"apiKey": OPENAI, "k": [GITHUB["ghp"], "x"]})
@example({"k": compact({"token": "hunter2hunter2", "x": 1})})
@example({"k": PEM, "event": "x"})
@example({"k": "s3cr3tvalue", "password": 'ab"cd\\ef12'})
@example({"token": {"event": "secret:"}, "auth": 1})  # a string ending in `key:` before a cut
@example({"a": "token='abc", "b": "def'"})  # a single-quoted value across a cut
def test_a_journal_line_is_redacted_as_one_pass_would(value: dict[str, Any]) -> None:
    line = compact(value)
    for literals in ([], LITERALS):
        check(line, literals)


def test_every_format_and_assignment_in_a_line_is_redacted_though_its_neighbours_were_clean() -> (
    None
):
    r = Redactor(LITERALS)
    clean = {"event": "InvocationFinished", "ticket": "t-1", "note": "nothing secret here"}
    assert r.json_line(compact(clean)) == compact(clean)
    for secret in [*FORMATS.values(), "s3cr3tvalue"]:
        for place in ({**clean, "output": secret}, {**clean, "nested": {"token": secret}}):
            out = r.json_line(compact(place))
            assert secret not in out and MARKER in out, secret
            assert json.loads(out)["ticket"] == "t-1"
    out = r.json_line(compact({**clean, "password": "hunter2hunter2"}))
    assert "hunter2hunter2" not in out


def test_a_literal_value_holding_the_cut_is_redacted_in_one_pass() -> None:
    """A secret value with `,"` in it could match across two parts: such a redactor never cuts."""
    value = 'abcd","efgh'
    r = Redactor([value])
    assert not r._by_part
    line = compact({"k": "abcd", "efgh": 1})
    assert r.json_line(line) == one_pass(r, line)
    assert "abcd" not in r.json_line(line)


def test_remembered_parts_are_bounded_and_long_parts_not_remembered() -> None:
    r = Redactor()
    long_value = "x" * 5000
    for n in range(3 * redact._MEMO_PARTS // 1000):
        for i in range(1000):
            r.json_line(compact({"ts": f"{n}-{i}", "event": "PhaseStarted"}))
        assert len(r._clean_parts) <= redact._MEMO_PARTS + 2
    r.json_line(compact({"k": long_value}))
    assert not any(long_value in part for part in r._clean_parts)


def test_the_journal_writes_its_lines_through_the_remembered_parts() -> None:
    """What the store appends: clean events come back as they were encoded (and the cache may
    keep them); an event with a secret comes back redacted."""
    r = Redactor()
    events = [
        PhaseStarted(
            ts="2026-01-01T00:00:00.000Z", ticket="t-1", attempt=1, phase="implement", roles=[]
        )
    ]
    line, changed = redacted_lines(events, r)
    assert not changed and json.loads(line)["phase"] == "implement"
    assert any('ticket":"t-1' in part for part in r._clean_parts)
    secret = PhaseStarted(
        ts="2026-01-01T00:00:00.000Z", ticket="t-1", attempt=1, phase=OPENAI, roles=[]
    )
    line, changed = redacted_lines([secret], r)
    assert changed and OPENAI not in line.decode() and MARKER in line.decode()
