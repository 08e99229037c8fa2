"""Sharding propagation on a large program: a JAX model of N layers (matmul,
bias, tanh, residual, and every few layers a reshape/transpose round trip),
lowered with shardings over a mesh of 8 virtual CPU devices, is imported by
xlapy and propagated with every strategy. Printed: the op count, xlapy's
parse, propagate (per strategy) and print times (medians), and for context
Shardy itself (C++, from jaxlib, in this process) running the same strategy
on the same text (its times include MLIR's parsing and printing), and XLA:CPU's
whole compile of the same program (Shardy's propagation, SPMD partitioning and
code generation together).

    python -m benchmarks.sharding_propagation                 # about 10,000 ops
    python -m benchmarks.sharding_propagation --layers 200 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

os.environ["XLA_FLAGS"] = os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8"

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P
from rich.console import Console
from rich.table import Table

from tools.shardy import run_shardy
from xlapy.frontends.stablehlo import parse_module, print_module
from xlapy.sharding import STRATEGIES, propagate


def model(layers: int):
    def forward(x, w, v):
        for layer in range(layers):
            y = jnp.tanh(x @ w) * 0.5 + x
            if layer % 4 == 3:
                y = jnp.transpose(y.reshape(8, 16, 64), (1, 0, 2)).reshape(128, 64) @ v
                y = jnp.transpose(y.reshape(32, 4, 64), (1, 0, 2)).reshape(128, 64)
            x = y
        return x
    return forward


def lowered(layers: int):
    mesh = Mesh(np.array(jax.devices()).reshape(2, 4), ("x", "y"))
    fn = jax.jit(model(layers), in_shardings=(NamedSharding(mesh, P("x", None)), NamedSharding(mesh, P(None, "y")),
                                              None))
    args = (jnp.ones((128, 64)), jnp.ones((64, 64)), jnp.ones((64, 64)))
    return fn.lower(*args)


def median_time(fn, rounds: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(rounds):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=1290, help="model layers (about 7.7 ops each)")
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()

    lowering = lowered(options.layers)
    text = lowering.as_text()
    ops = sum(1 for line in text.splitlines() if " = " in line and line.strip().startswith("%"))
    console = Console()
    console.print(f"program: {options.layers} layers, {ops} ops, {len(text) / 1e6:.1f} MB of MLIR")

    table = Table("step", "xlapy", "ops/s", "Shardy (parse+run+print)", "ratio Shardy/xlapy")
    parse_s, _ = median_time(lambda: parse_module(text), options.rounds)
    table.add_row("parse", f"{parse_s * 1e3:.0f} ms", f"{ops / parse_s:,.0f}")
    for strategy in STRATEGIES:
        seconds, result = median_time(lambda s=strategy: propagate(parse_module(text), strategy=s), options.rounds)
        seconds -= parse_s
        shardy_s, _ = median_time(lambda s=strategy: run_shardy(text, s), options.rounds)
        table.add_row(f"propagate --strategy {strategy}", f"{seconds * 1e3:.0f} ms", f"{ops / seconds:,.0f}",
                      f"{shardy_s * 1e3:.0f} ms", f"{shardy_s / seconds:.2f}")
    print_s, _ = median_time(lambda: print_module(result), options.rounds)
    table.add_row("print", f"{print_s * 1e3:.0f} ms", f"{ops / print_s:,.0f}")
    xla_s, _ = median_time(lambda: lowering.compile(), 1)
    table.add_row("XLA:CPU compile (Shardy + SPMD + codegen)", "", "", f"{xla_s * 1e3:.0f} ms")
    console.print(table)


if __name__ == "__main__":
    main()
