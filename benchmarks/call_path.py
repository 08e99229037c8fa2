"""What a call of an executable costs around its kernels: checking and binding the arguments, the result's
memory, handing or copying the results over. For programs of the programs benchmark
(``benchmarks/programs_vs_xla.py``), with the caches warm (calls back to back) and evicted (a buffer larger
than the last-level cache written before each call, as in ``benchmarks/cache_regimes.py``), where each
interpreter and numpy path a call runs comes back from memory.

Inside each call, the entry's thunk sequence is timed (this module wraps ``ExecutionContext.prepared`` for the
measurement); printed are the medians and quartiles over the calls of the call's time minus its thunks'::

    python -m benchmarks.call_path "column reduction" scatter-add --calls 60
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import statistics
import time
from collections.abc import Callable, Iterator

import numpy as np

from benchmarks.cache_regimes import chosen_programs, evictor


@contextlib.contextmanager
def timed_entries(entries: set[int], times: list[float]) -> Iterator[None]:
    """While active, every run of a thunk sequence whose id is in ``entries`` appends its time to ``times``."""
    from xlapy.runtime.thunks.base import ExecutionContext

    original = ExecutionContext.prepared

    def prepared(self, thunk):
        run = original(self, thunk)
        if id(thunk) not in entries:
            return run

        def timed() -> None:
            start = time.perf_counter()
            run()
            times.append(time.perf_counter() - start)
        return timed

    ExecutionContext.prepared = prepared
    try:
        yield
    finally:
        ExecutionContext.prepared = original


def around_kernels(call: Callable[[], object], kernel_times: list[float], calls: int,
                   before: Callable[[], None] | None) -> list[float]:
    """Per call of ``call`` (``before`` run untimed ahead of each), its time minus the kernel time it added to
    ``kernel_times``."""
    call()
    around = []
    for _ in range(calls):
        if before is not None:
            before()
        kernel_times.clear()
        start = time.perf_counter()
        call()
        around.append(time.perf_counter() - start - sum(kernel_times))
    return around


def main(argv: list[str] | None = None) -> int:
    import jax

    import xlapy
    from benchmarks.programs_vs_xla import from_jax

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("programs", nargs="+", metavar="PROGRAM", help="programs of the programs benchmark")
    parser.add_argument("--calls", type=int, default=60, help="timed calls per regime (default 60)")
    args = parser.parse_args(argv)
    programs = chosen_programs(args.programs)
    evict = evictor()
    kernel_times: list[float] = []
    for program in programs:
        made = program.make_args(np.random.default_rng(0), 1.0)
        arguments = jax.tree.leaves(made)
        executable = xlapy.compile(from_jax(program.fn, *made))
        with timed_entries({id(executable.thunks)}, kernel_times):
            for regime, before in (("cached", None), ("evicted", evict)):
                around = around_kernels(functools.partial(executable, *arguments), kernel_times, args.calls, before)
                low, median, high = statistics.quantiles(around, n=4)
                print(f"{program.name:28s} {regime:8s} around the kernels: median {median * 1e6:5.0f} µs, "
                      f"quartiles {low * 1e6:.0f}-{high * 1e6:.0f} µs", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
