"""The timing the benchmarks under tools/ share."""

from __future__ import annotations

import time
from collections.abc import Callable


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
