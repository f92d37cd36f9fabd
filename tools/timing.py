"""The timing the benchmarks under tools/ share."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

# the median step time `presk train` and an exported train.py print
MEDIAN = re.compile(
    r"^(presk train|train\.py): (\d+(?:\.\d+)?(?:e-?\d+)?) ms a step, median of", re.M
)


def best_of(repeat: int, fn: Callable[[], object], warm_up: bool = True) -> float:
    """The best of `repeat` timed calls of `fn`, after one untimed call, in seconds."""
    if warm_up:
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def run_checked(who: str, cmd: list[str], cwd: Path, env: dict | None = None) -> str:
    """The standard output of `cmd` run in `cwd` (`env` added to the environment); the
    benchmark `who` stops with its standard error if it fails."""
    done = subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, check=False, env={**os.environ, **(env or {})}
    )
    if done.returncode != 0:
        raise SystemExit(f"{who}: `{' '.join(cmd)}` failed:\n{done.stderr}")
    return done.stdout


def median_step(who: str, out: str) -> float:
    """The median step time, in ms, a training run printed in `out`."""
    m = MEDIAN.search(out)
    if m is None:
        raise SystemExit(f"{who}: no median step time in:\n{out}")
    return float(m.group(2))
