"""Shared by the benchmarks: medians, and the PASS/FAIL line each budget prints."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

RESULTS: list[tuple[str, bool]] = []


def median_seconds(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def budget(name: str, value: float, limit: float, detail: str) -> bool:
    """One budget line: PASS when value <= limit. Figures from the same run, so ratios hold."""
    ok = value <= limit
    RESULTS.append((name, ok))
    print(f"{'PASS' if ok else 'FAIL'}  {name}: {detail}")
    return ok


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"
