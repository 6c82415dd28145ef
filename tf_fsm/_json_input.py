"""JSON read from the project's files (settings.json, retry-state.json, journal lines, caches),
with the limits every reader needs.

`json.loads` accepts two kinds of input it then cannot hold: nesting deeper than Python's
recursion limit (a RecursionError) and an integer of more than 4300 digits (a bare
ValueError). Both would surface as internal errors. And a value nested a few hundred levels
deep parses, but every later walk over it (copying settings over their defaults, finding
repeated keys) recurses once per level and fails the same way. `load_json` refuses all three
as JsonLimitError, a ValueError that the caller turns into its own error naming the file or
line. No file tf_fsm reads is legitimately nested more than a handful of levels.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from typing import Any

#: the deepest nesting of arrays and objects a project file may have (the top level counts)
MAX_NESTING = 100


class JsonLimitError(ValueError):
    """Valid JSON syntax that tf_fsm will not read: nested too deeply, or an integer too long."""

    def __init__(self, problem: str) -> None:
        self.problem = problem
        super().__init__(problem)


def too_deep() -> JsonLimitError:
    return JsonLimitError(
        f"nested too deeply (more than {MAX_NESTING} levels of arrays and objects)"
    )


class DuplicateKeyError(ValueError):
    """`load_json(..., unique_keys=True)` met a key given twice in one object (json.loads would
    silently keep the last value); the caller finds and names every repeat itself."""


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's `object_pairs_hook` for `unique_keys`: one dict() and one len() per object, so a
    good file parses at full speed."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise DuplicateKeyError
    return obj


def load_json(
    text: str,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
    *,
    unique_keys: bool = False,
) -> Any:
    """`json.loads(text)`, or JsonLimitError (json.JSONDecodeError for invalid JSON, as ever);
    `unique_keys`: DuplicateKeyError at the first key an object repeats."""
    hook = _unique_object if unique_keys else object_pairs_hook
    try:
        value = json.loads(text, object_pairs_hook=hook)
    except RecursionError:
        raise too_deep() from None
    except (json.JSONDecodeError, DuplicateKeyError):
        raise
    except ValueError:  # only an integer past the interpreter's digit limit gets here
        limit = sys.get_int_max_str_digits()
        raise JsonLimitError(f"holds an integer with more than {limit} digits") from None
    # Fewer brackets than the limit cannot nest deeper than it: the usual case costs two counts.
    if text.count("[") + text.count("{") > MAX_NESTING and _deeper_than(value, MAX_NESTING):
        raise too_deep()
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than `limit` levels in `value`, level by level
    (no recursion)."""
    level: list[Any] = [value]
    for _ in range(limit):
        level = [child for node in level for child in _children(node)]
        if not level:
            return False
    return any(isinstance(node, dict | list) for node in level)


def _children(node: Any) -> Iterable[Any]:
    if isinstance(node, dict):
        return node.values()
    if isinstance(node, list):
        # An object_pairs_hook may keep an object as a list of (key, value) pairs: the pair is
        # not a level of its own, its value is.
        return [item[1] if isinstance(item, tuple) else item for item in node]
    return ()
