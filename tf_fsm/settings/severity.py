"""The five severities findings are counted in, and how a heading or label maps onto one.

Kept apart from tf_fsm.core.state (pydantic models) so that loading settings, which checks
`workflow.failOn` against these names, does not build the retry-state models: `tf-fsm status`
on an empty project needs only the settings (benchmarks/bench_startup.py).
"""

from __future__ import annotations

import re

SEVERITIES: tuple[str, ...] = ("Critical", "Major", "Minor", "Warnings", "Suggestions")

# "critical", "major", "minor", "warning(s)", "suggestion(s)" -> the canonical name.
_SEVERITY_WORDS = {w: s for s in SEVERITIES for w in (s.lower(), s.lower().removesuffix("s"))}
_EDGE_JUNK = re.compile(r"^[\W_]+|[\W_]+$")


def normalize_severity(name: str) -> str | None:
    """Canonical severity for `name` ("**critical:**" -> "Critical"), or None if it is none."""
    if len(name) > 200:  # no severity name is this long; keeps the edge regex cheap
        return None
    return _SEVERITY_WORDS.get(_EDGE_JUNK.sub("", name).lower())
