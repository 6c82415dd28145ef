"""Text tf_fsm did not write, made safe to show on a terminal.

Ticket titles come from `.tickets/<id>.md` and failure reasons, stderr tails and version lines
from agent CLIs: any of them may hold an escape sequence that retitles or clears the terminal,
or a bidi override that makes a line read other than it is. Each such character is shown as
an escape (`\\x1b`, `\\u202e`) instead, so the text stays readable and nothing acts on the
terminal. Newlines and tabs too: a line or a table row is one line. `--json` output needs none
of this (json.dumps escapes every control character already).
"""

from __future__ import annotations

import re

#: C0 controls (tab and newline too), DEL, C1 controls, the bidi embeddings, overrides and
#: isolates, and lone surrogates (bytes of a file that is not UTF-8, kept by surrogateescape)
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
#: surrogateescape keeps a byte B that is not UTF-8 as U+DC00 + B: it is shown as that byte
_ESCAPED_BYTES = range(0xDC80, 0xDD00)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code in _ESCAPED_BYTES:
        return f"\\x{code - 0xDC00:02x}"
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """`text` with every character a terminal would act on shown as its escape."""
    return text if text.isprintable() else _UNSAFE.sub(_escape, text)
