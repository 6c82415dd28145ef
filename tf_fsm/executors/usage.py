"""What an agent CLI's machine-readable output says: token usage, cost, and a provider error.

Pure parsers, one per CLI (the output formats the presets ask for):

* pi `--mode json`: JSON lines; each assistant `message_end` carries `usage` (tokens and
  `cost.total` in dollars) and, on failure, `stopReason: "error"` with `errorMessage`. pi
  exits 0 even then, so the output, not the exit code, tells a 429 from success.
* Claude Code `--output-format json`: one `result` object with `usage`, `total_cost_usd`
  and `is_error`.
* Codex `exec --json`: JSON lines; `turn.completed` carries `usage` (no cost), `turn.failed`
  and `error` carry the error.

Output that is not in the expected format gives an empty report: no usage, no error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tf_fsm._json_input import load_json


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost_usd + other.cost_usd,
        )

    def to_json(self) -> dict[str, float]:
        # Rounded to a millionth of a dollar: float sums of per-message costs carry noise.
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "costUsd": round(self.cost_usd, 6),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Usage:
        if not data:
            return cls()
        return cls(
            int(data.get("inputTokens", 0) or 0),
            int(data.get("outputTokens", 0) or 0),
            float(data.get("costUsd", 0.0) or 0.0),
        )


@dataclass(frozen=True)
class AgentReport:
    usage: Usage | None = None  # None: the output reported no usage
    error: str | None = None  # the error the CLI reported for its last model call


def _json_lines(text: str) -> Iterator[dict[str, Any]]:
    for line in text.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            data = load_json(line)
        except ValueError:
            continue
        if isinstance(data, dict):
            yield data


def _int(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _float(value: Any) -> float:
    """A number the CLI reported; anything else, or one that is not finite (`1e999` parses as
    infinity, which JSON state files cannot hold), counts as not reported."""
    if not isinstance(value, int | float) or isinstance(value, bool):
        return 0.0
    number = float(value)
    return number if math.isfinite(number) else 0.0


def parse_pi(stdout: str) -> AgentReport:
    total, seen, error = Usage(), False, None
    for event in _json_lines(stdout):
        message = event.get("message")
        if event.get("type") != "message_end" or not isinstance(message, dict):
            continue
        if message.get("role") != "assistant":
            continue
        usage = message.get("usage")
        if isinstance(usage, dict):
            seen = True
            prompt = sum(_int(usage.get(k)) for k in ("input", "cacheRead", "cacheWrite"))
            cost = usage.get("cost")
            total += Usage(
                prompt,
                _int(usage.get("output")),
                _float(cost.get("total")) if isinstance(cost, dict) else 0.0,
            )
        # Only the last model call counts: pi may have retried an error itself and succeeded.
        failed = message.get("stopReason") in ("error", "aborted")
        error = str(message.get("errorMessage") or "model call failed") if failed else None
    return AgentReport(total if seen else None, error)


def parse_claude(stdout: str) -> AgentReport:
    result: dict[str, Any] | None = None
    for event in _json_lines(stdout):
        if event.get("type") == "result":
            result = event
    if result is None:
        return AgentReport()
    usage = result.get("usage")
    report_usage = None
    if isinstance(usage, dict) or "total_cost_usd" in result:
        u = usage if isinstance(usage, dict) else {}
        prompt = sum(
            _int(u.get(k))
            for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        )
        report_usage = Usage(
            prompt, _int(u.get("output_tokens")), _float(result.get("total_cost_usd"))
        )
    error = None
    if result.get("is_error"):
        error = str(result.get("result") or result.get("subtype") or "claude reported an error")
    return AgentReport(report_usage, error)


def parse_codex(stdout: str) -> AgentReport:
    total, seen, error = Usage(), False, None
    for event in _json_lines(stdout):
        kind = event.get("type")
        if kind == "turn.completed" and isinstance(event.get("usage"), dict):
            u = event["usage"]
            seen = True
            # cached_input_tokens is part of input_tokens in Codex's accounting.
            total += Usage(_int(u.get("input_tokens")), _int(u.get("output_tokens")))
            error = None
        elif kind == "turn.failed":
            err = event.get("error")
            error = str(err.get("message") if isinstance(err, dict) else err or "turn failed")
        elif kind == "error":
            error = str(event.get("message") or "codex reported an error")
    return AgentReport(total if seen else None, error)


PARSERS: dict[str, Callable[[str], AgentReport]] = {
    "pi": parse_pi,
    "claude": parse_claude,
    "codex": parse_codex,
}

# Provider errors worth a restart: rate limits, overload, 5xx, timeouts, the network. Codex
# 0.169 reports an HTTP 500 only as "We're currently experiencing high demand, which may cause
# temporary errors." (no status code in it).
_TRANSIENT_ERROR = re.compile(
    r"\b(?:429|5\d\d)\b|rate.?limit|too many requests|overloaded|capacity|unavailable|high demand|"
    r"timed? ?out|timeout|connection|network|socket|ECONN\w*|ETIMEDOUT|EAI_AGAIN|ENOTFOUND|"
    r"fetch failed|terminated|aborted|stream (?:ended|closed)|internal server error|bad gateway",
    re.IGNORECASE,
)


def is_transient_error(message: str) -> bool:
    """A provider error a later try may not meet (429, 5xx, network), as opposed to one it
    will (401, an unknown model, a bad request)."""
    return bool(_TRANSIENT_ERROR.search(message))
