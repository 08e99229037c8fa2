"""Timing of repeated runs, shared by the benchmarks."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def best_and_median(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The best and the median wall time of ``repeat`` calls, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)
