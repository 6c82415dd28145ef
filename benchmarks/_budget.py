"""Shared by the benchmarks: medians, the PASS/FAIL line each budget prints, the own time of
wrapped functions (`wrapped`), and the installed copy of tf_fsm every benchmark runs.

Importing this module puts a byte-compiled copy of the package first on the path, of this
process and of every process it starts (PYTHONPATH): tf_fsm laid out as a wheel installs it
(prompts/ as tf_fsm/_prompts) and compiled as pip compiles it. Without it a process started
here would compile the source of every module it imports, each time: this checkout is an
editable install, and PYTHONDONTWRITEBYTECODE may keep Python from caching the bytecode.
"""

from __future__ import annotations

import atexit
import compileall
import contextlib
import functools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

CHECKOUT = Path(__file__).resolve().parent.parent


def _install_copy() -> Path:
    site = Path(tempfile.mkdtemp(prefix="tf-fsm-bench-"))
    atexit.register(shutil.rmtree, site, ignore_errors=True)
    package = site / "tf_fsm"
    shutil.copytree(CHECKOUT / "tf_fsm", package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(CHECKOUT / "prompts", package / "_prompts")
    if not compileall.compile_dir(package, quiet=1):
        raise SystemExit(f"cannot byte-compile the copy of tf_fsm in {site}")
    sys.path.insert(0, str(site))
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(site), os.environ.get("PYTHONPATH")])
    )
    return site


INSTALLED = _install_copy()

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


@contextlib.contextmanager
def wrapped(
    parts: tuple[tuple[str, Any, str], ...], seconds: dict[str, float], calls: Counter[str]
) -> Iterator[None]:
    """Time and count the `parts` while the block runs; each call's own time (less the wrapped
    calls inside it) goes to its label."""
    stack: list[list[float]] = []  # per running wrapped call: [time spent in inner ones]

    def wrap(label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            stack.append([0.0])
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                inner = stack.pop()[0]
                seconds[label] = seconds.get(label, 0.0) + spent - inner
                calls[label] += 1
                if stack:
                    stack[-1][0] += spent

        return timed

    present = [(label, owner, name) for label, owner, name in parts if name in vars(owner)]
    saved = [(owner, name, vars(owner)[name]) for _, owner, name in present]
    try:
        for label, owner, name in present:
            setattr(owner, name, wrap(label, vars(owner)[name]))
        yield
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)
