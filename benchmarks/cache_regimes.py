"""Programs of the programs benchmark (``benchmarks/programs_vs_xla.py``) against XLA:CPU in two cache regimes:
``cached``, runs back to back with the inputs left in the caches by the run before, and ``evicted``, a buffer
larger than the last-level cache written before each run so that every run reads its inputs from memory. Each
round times a block of runs of each side (xlapy first or XLA first, alternately) and takes the block's lower
quartile; printed are the medians over the rounds of XLA's time over xlapy's, with the smallest and largest.

The programs benchmark runs each side once per round between copies of other buffers, which leaves the caches
in a state between the two; this one separates them, so that a change in a kernel's reads shows in one regime
or both::

    python -m benchmarks.cache_regimes "column reduction" softmax --rounds 12
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import numpy as np

# Larger than the last-level caches of the machines measured (32 MiB): writing a byte per line evicts the inputs.
EVICTION_BYTES = 96 << 20


def lower_quartile_time(fn: Callable[[], object], runs: int, before: Callable[[], None] | None = None) -> float:
    """The lower quartile of ``runs`` timed calls of ``fn`` after one untimed call, ``before`` run untimed ahead
    of each."""
    fn()
    times = []
    for _ in range(runs):
        if before is not None:
            before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[len(times) // 4]


def _regimes(program, rounds: int, runs: int, evict: Callable[[], None]) -> list[str]:
    """One line per regime for ``program`` (a ``programs_vs_xla.Program``)."""
    import jax

    import xlapy
    from benchmarks.programs_vs_xla import from_jax

    arguments = program.make_args(np.random.default_rng(0), 1.0)
    flat = jax.tree.leaves(arguments)
    executable = xlapy.compile(from_jax(program.fn, *arguments), backend="cpu")
    compiled = jax.jit(program.fn).lower(*arguments).compile()
    device_arguments = jax.device_put(arguments)
    ours, theirs = (lambda: executable(*flat)), (lambda: jax.block_until_ready(compiled(*device_arguments)))
    lines = []
    for regime, before in (("cached", None), ("evicted", evict)):
        ratios, our_times = [], []
        for round_number in range(rounds):
            first, second = (ours, theirs) if round_number % 2 == 0 else (theirs, ours)
            times = {first: lower_quartile_time(first, runs, before), second: lower_quartile_time(second, runs, before)}
            our_times.append(times[ours])
            ratios.append(times[theirs] / times[ours])
        lines.append(f"{program.name:28s} {regime:8s} XLA/xlapy {statistics.median(ratios):5.2f} "
                     f"[{min(ratios):.2f}, {max(ratios):.2f}]  xlapy {statistics.median(our_times) * 1e6:8.0f} µs")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("programs", nargs="+", metavar="PROGRAM", help="programs of the programs benchmark")
    parser.add_argument("--rounds", type=int, default=12, help="rounds per regime (default 12)")
    parser.add_argument("--runs", type=int, default=9, help="timed runs of each side per round (default 9)")
    args = parser.parse_args(argv)
    evict = evictor()
    for program in chosen_programs(args.programs):
        for line in _regimes(program, args.rounds, args.runs, evict):
            print(line)
    return 0


def chosen_programs(names: list[str]) -> list:
    """The programs of the programs benchmark called ``names`` (``programs_vs_xla.Program``s), or an exit
    listing the names there are."""
    from benchmarks.programs_vs_xla import _programs

    programs = {p.name: p for p in _programs()}
    unknown = [n for n in names if n not in programs]
    if unknown:
        raise SystemExit(f"unknown programs {unknown}; the programs are: {', '.join(sorted(programs))}")
    return [programs[n] for n in names]


def evictor() -> Callable[[], None]:
    """A function writing a byte per line of ``EVICTION_BYTES``: the caches are then emptied of anything else."""
    eviction = np.ones(EVICTION_BYTES, np.uint8)

    def evict() -> None:
        eviction[::64] += 1

    return evict


if __name__ == "__main__":
    raise SystemExit(main())
