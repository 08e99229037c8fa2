"""Timing helpers shared by the benchmarks: repeated runs, two sides timed
alternately, and xlapy's compile time cold and from the disk cache."""

from __future__ import annotations

import itertools
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple


def best_and_median(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    """The best and the median wall time of ``repeat`` calls, in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """The wall time of one call of ``fn``, in seconds, and its value."""
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def time_alternately(first: Callable[[], object], second: Callable[[], object], rounds: int,
                     warm_up: int = 2) -> tuple[list[float], list[float]]:
    """The wall times of ``first`` and of ``second`` over ``rounds`` rounds of
    one run each, after ``warm_up`` untimed runs of each (thread pools, page
    faults of fresh outputs). Which side goes first alternates, so that neither
    always runs on a cache the other just warmed."""
    for _ in range(warm_up):
        first()
        second()
    first_times: list[float] = []
    second_times: list[float] = []
    sides = [(first, first_times), (second, second_times)]
    for i in range(rounds):
        for run, times in (sides if i % 2 == 0 else sides[::-1]):
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
    return first_times, second_times


def copy_bandwidth(nbytes: int = 64 << 20, rounds: int = 10) -> float:
    """The machine's copy bandwidth in bytes per second (bytes read plus bytes written): the best of ``rounds``
    copies of ``nbytes`` between two arrays far larger than the caches, each copy either whole on one thread or
    split in one part per core on threads (numpy copies without holding the GIL), whichever is faster."""
    import numpy as np

    source = np.ones(nbytes, np.uint8)
    target = np.zeros_like(source)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    bounds = [nbytes * i // cores for i in range(cores + 1)]
    parts = [(target[a:b], source[a:b]) for a, b in itertools.pairwise(bounds)]
    with ThreadPoolExecutor(cores) as pool:
        def split_copy() -> None:
            for future in [pool.submit(np.copyto, *part) for part in parts]:
                future.result()

        best = min(min(best_and_median(lambda: np.copyto(target, source), rounds)[0],
                       best_and_median(split_copy, rounds)[0]) for _ in range(2))
    return 2 * nbytes / best


def format_seconds(value: float | None) -> str:
    """``value`` seconds in µs, ms or s; "-" for None."""
    if value is None:
        return "-"
    if value < 1e-3:
        return f"{value * 1e6:.0f} µs"
    return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"


def import_compiler() -> float:
    """Imports the modules ``xlapy.compile`` imports on its first call (code generator, passes, LLVM backend);
    returns the time taken, so that cold compile times exclude it."""
    start = time.perf_counter()
    import xlapy.codegen.backends.cpu
    import xlapy.codegen.pipeline  # noqa: F401

    return time.perf_counter() - start


class CompileTimes(NamedTuple):
    cold: float
    cached: float
    executable: Any
    # Files the cold compile wrote into the kernel cache (0 hints that the disk cache is not used).
    files_written: int


def compile_cold_and_cached(module_of: Callable[[], Any], directory: Path) -> CompileTimes:
    """xlapy's compile time of the module ``module_of()`` makes into the empty kernel cache ``directory``, then
    with the kernels on disk only (the in-memory cache cleared)."""
    # Imported here so that the benchmarks that only time parsing or indexing do not load the runtime.
    import xlapy
    from xlapy.runtime.kernel_cache import clear_memory_cache

    directory.mkdir(parents=True)
    # The kernel cache reads the variable at every compile, so a fresh directory is a cold disk cache.
    os.environ["XLAPY_CACHE_DIR"] = str(directory)
    clear_memory_cache()
    cold, executable = timed(lambda: xlapy.compile(module_of(), backend="cpu"))
    files_written = sum(1 for p in directory.rglob("*") if p.is_file())
    clear_memory_cache()
    cached, _ = timed(lambda: xlapy.compile(module_of(), backend="cpu"))
    return CompileTimes(cold, cached, executable, files_written)
