"""Timing helpers shared by the benchmarks: repeated runs, two sides timed
alternately, and xlapy's compile time cold and from the disk cache."""

from __future__ import annotations

import contextlib
import itertools
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
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


def balanced_orders(sides: int) -> list[list[int]]:
    """Orders of ``sides`` runs in which each side comes right after each other side equally often (a Williams
    design: ``sides`` rows when even, twice as many when odd). Rotating one order keeps every side's predecessor
    the same, and with it the state of the cache the side starts from (a copy of tens of MB before one side every
    round, the other side's inputs before the other)."""
    first, low, high = [0], 1, sides - 1
    while low <= high:
        first.append(low)
        low += 1
        if low <= high:
            first.append(high)
            high -= 1
    orders = [[(k + shift) % sides for k in first] for shift in range(sides)]
    return orders if sides % 2 == 0 else orders + [order[::-1] for order in orders]


def time_in_turns(sides: Sequence[Callable[[], object]], rounds: int, warm_up: int = 2) -> list[list[float]]:
    """The wall times of each of ``sides`` over ``rounds`` rounds of one run each, after ``warm_up`` untimed
    runs of each (thread pools, page faults of fresh outputs). The rounds take their orders in turn from
    ``balanced_orders``, so that no side always runs on a cache another just warmed or emptied, and all see the
    machine's load alike."""
    for _ in range(warm_up):
        for run in sides:
            run()
    times: list[list[float]] = [[] for _ in sides]
    orders = balanced_orders(len(sides))
    for i in range(rounds):
        for k in orders[i % len(orders)]:
            start = time.perf_counter()
            sides[k]()
            times[k].append(time.perf_counter() - start)
    return times


def time_alternately(first: Callable[[], object], second: Callable[[], object], rounds: int,
                     warm_up: int = 2) -> tuple[list[float], list[float]]:
    """``time_in_turns`` of two sides: which goes first alternates."""
    first_times, second_times = time_in_turns([first, second], rounds, warm_up)
    return first_times, second_times


def _cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextlib.contextmanager
def reference_copies(nbytes: int) -> Iterator[list[Callable[[], None]]]:
    """Two ways to copy ``nbytes`` between two arrays: whole on one thread, and split in one part per core on
    threads (numpy copies without holding the GIL); the faster is the machine's copy speed at that size."""
    import numpy as np

    source = np.ones(nbytes, np.uint8)
    target = np.zeros_like(source)
    cores = _cores()
    bounds = [nbytes * i // cores for i in range(cores + 1)]
    parts = [(target[a:b], source[a:b]) for a, b in itertools.pairwise(bounds)]
    with ThreadPoolExecutor(cores) as pool:
        def split_copy() -> None:
            for future in [pool.submit(np.copyto, *part) for part in parts]:
                future.result()

        yield [lambda: np.copyto(target, source), split_copy]


def copy_bandwidth(nbytes: int = 64 << 20, rounds: int = 10) -> float:
    """The machine's copy bandwidth in bytes per second (bytes read plus bytes written): the best of ``rounds``
    copies of ``nbytes`` between two arrays far larger than the caches (``reference_copies``)."""
    with reference_copies(nbytes) as copies:
        best = min(best_and_median(copy, rounds)[0] for _ in range(2) for copy in copies)
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
