"""What running a compiled program costs beyond its kernels: the per-thunk and per-iteration overhead of
xlapy's thunk runtime, on programs whose arrays are tiny so that the work itself is negligible.

Programs (JAX functions lowered and compiled by ``xlapy.compile``; XLA:CPU runs the same function):

- ``while N, K steps``: a ``fori_loop`` of N iterations over a small vector whose body takes K steps, each
  but the last a reduction feeding an elementwise step (so more kernels per iteration as K grows);
- ``scatter-add U``: ``x.at[indices].add(updates)`` with U updates, which the scatter expander turns into
  a while loop of U iterations;
- ``straight 20``: 20 kernels one after another (reductions between elementwise steps keep them apart).

Printed per program: the kernels xlapy runs per loop iteration (condition and body; for the straight
program, in all), xlapy's median time per call and per loop iteration (or per kernel for the straight
program), XLA:CPU's median per call, and the largest difference from XLA's result.

    python -m benchmarks.thunk_overhead                     # every program
    python -m benchmarks.thunk_overhead --rounds 20 while   # programs whose name contains "while"
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from rich.console import Console
from rich.table import Table

import xlapy
from xlapy.frontends.jax import from_jax
from xlapy.runtime.thunks.control_flow import WhileThunk
from xlapy.runtime.thunks.kernel import KernelThunk


def _while_loop(iterations: int, steps: int) -> Callable:
    def fn(x):
        def body(_, v):
            for _ in range(steps - 1):
                v = jnp.sin(v + v.sum() * 0.01)  # the reduction is a kernel of its own
            return v * 0.5 + 1.0
        return lax.fori_loop(0, iterations, body, x)
    return fn


def _scatter_add(x, indices, updates):
    return x.at[indices].add(updates)


def _straight(x):
    # A reduction between elementwise steps stops fusion from merging them: one kernel per step.
    for step in range(10):
        x = jnp.tanh(x * 1.5 + float(step))
        x = x - x.sum(axis=-1, keepdims=True) * 0.01
    return x


@dataclass
class Program:
    name: str
    fn: Callable
    args: tuple
    iterations: int  # loop iterations (or kernels of a straight-line program): what the time is divided by
    per: str


def programs() -> list[Program]:
    rng = np.random.default_rng(0)
    vector = rng.standard_normal(16).astype(np.float32)
    found = []
    for steps in (1, 2, 3):
        found.append(Program(f"while 1000, {steps} step{'s' * (steps > 1)}", _while_loop(1000, steps), (vector,),
                             1000, "iteration"))
    for count in (1000, 10000):
        operand = np.zeros(256, np.float32)
        indices = rng.integers(0, 256, count).astype(np.int32)
        updates = rng.standard_normal(count).astype(np.float32)
        found.append(Program(f"scatter-add {count}", _scatter_add, (operand, indices, updates), count, "update"))
    matrix = rng.standard_normal((4, 16)).astype(np.float32)
    found.append(Program("straight 20", _straight, (matrix,), 20, "kernel"))
    return found


def _median_seconds(fn: Callable[[], object], rounds: int, budget: float = 5.0) -> float:
    times = []
    started = time.perf_counter()
    for _ in range(rounds):
        begin = time.perf_counter()
        fn()
        times.append(time.perf_counter() - begin)
        if time.perf_counter() - started > budget:
            break
    return statistics.median(times)


def _leaves(value) -> list[np.ndarray]:
    return [np.asarray(v) for v in (value if isinstance(value, tuple) else (value,))]


def measure(program: Program, rounds: int) -> dict:
    module = from_jax(program.fn, *program.args)
    executable = xlapy.compile(module)
    ours = _leaves(executable(*program.args))
    ours_seconds = _median_seconds(lambda: executable(*program.args), rounds)
    compiled = jax.jit(program.fn).lower(*program.args).compile()
    device_args = [jax.device_put(a) for a in program.args]
    theirs = _leaves(jax.tree.map(np.asarray, compiled(*device_args)))
    xla_seconds = _median_seconds(lambda: jax.block_until_ready(compiled(*device_args)), rounds)
    difference = max(float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0.0))
                     for a, b in zip(ours, theirs))
    return {"program": program.name, "xlapy": ours_seconds, "per": ours_seconds / program.iterations,
            "unit": program.per, "xla": xla_seconds, "kernels": _kernels_per_unit(executable),
            "difference": difference}


def _kernels_per_unit(executable: xlapy.Executable) -> int:
    """Kernel thunks run by each iteration of the (outermost) while loop, or in all without one."""
    loops = [t for t in executable.thunks if isinstance(t, WhileThunk)]
    thunks = [t for loop in loops for sequence in loop.nested for t in sequence.walk()] if loops else \
        list(executable.thunks.walk())
    return sum(isinstance(t, KernelThunk) for t in thunks)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="run only programs whose name contains one of these")
    parser.add_argument("--rounds", type=int, default=10, help="calls timed per program (median)")
    options = parser.parse_args(argv)
    jax.config.update("jax_platforms", "cpu")
    console = Console(width=max(Console().width, 120))
    table = Table("program", "kernels / unit", "xlapy / call", "xlapy / unit", "XLA:CPU / call", "max |xlapy - XLA|")
    for program in programs():
        if options.names and not any(name in program.name for name in options.names):
            continue
        row = measure(program, options.rounds)
        table.add_row(row["program"], str(row["kernels"]), f"{row['xlapy'] * 1e3:.2f} ms",
                      f"{row['per'] * 1e6:.1f} µs / {row['unit']}", f"{row['xla'] * 1e3:.3f} ms",
                      f"{row['difference']:.3g}")
    console.print(table)


if __name__ == "__main__":
    main()
