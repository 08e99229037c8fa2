"""Indexing analysis speed: how many maps the simplifier handles per second,
and how long the maps of a whole fusion take to compute.

XLA's indexing analysis has no Python entry point in jaxlib, so these are
xlapy's own figures, not ratios.

    python -m benchmarks.indexing_throughput [--maps 2000] [--instructions 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random

from benchmarks.timing import best_and_median
from xlapy import parse_hlo
from xlapy.indexing import IndexingMap, input_to_output_indexing, output_to_input_indexing
from xlapy.indexing import affine as A
from xlapy.indexing.hlo_indexing import grouped_output_to_input


def random_maps(count: int, seed: int = 0) -> list[IndexingMap]:
    """Maps like the ones fusions produce: reshape linearisations and
    delinearisations, strided and shifted accesses, nested floordiv/mod."""
    rng = random.Random(seed)
    maps = []
    for _ in range(count):
        rank = rng.randint(2, 4)
        sizes = [rng.choice([2, 3, 4, 8, 16, 32, 64, 128]) for _ in range(rank)]
        linear = A.const(0)
        stride = 1
        for i in reversed(range(rank)):
            linear = A.add(A.mul(A.dim(i), stride), linear) if i < rank - 1 else A.dim(i)
            stride *= sizes[i]
        results = []
        remaining = stride
        for _ in range(rng.randint(1, 3)):
            divisor = rng.choice([d for d in (2, 4, 8, 16, 32, 64, 128, 256) if d <= remaining] or [1])
            results.append(A.floordiv(linear, divisor))
            results.append(A.mod(linear, divisor))
            remaining = max(1, remaining // divisor)
        if rng.random() < 0.5:
            results.append(A.add(A.mul(A.dim(0), rng.randint(1, 5)), rng.randint(-3, 3)))
        maps.append(IndexingMap.from_tensor_sizes(results, sizes))
    return maps


def fusion_module(instructions: int) -> str:
    """A fusion of about ``instructions`` instructions on f32[32,64,128]:
    transposes and back, reshapes and back, reduce-then-broadcast, and adds
    that join earlier values (so parameters are read along many paths)."""
    body = ["  p0 = f32[32,64,128] parameter(0)", "  c0 = f32[] constant(0)"]
    values = ["p0"]
    count = 2
    block = 0
    while count < instructions - 1:
        x = values[-1]
        n = f"b{block}"
        kind = block % 4
        if kind == 0:
            body += [
                f"  {n}_t = f32[32,128,64] transpose({x}), dimensions={{0,2,1}}",
                f"  {n}_e = f32[32,128,64] exponential({n}_t)",
                f"  {n} = f32[32,64,128] transpose({n}_e), dimensions={{0,2,1}}",
            ]
        elif kind == 1:
            body += [
                f"  {n}_r = f32[2048,128] reshape({x})",
                f"  {n}_n = f32[2048,128] negate({n}_r)",
                f"  {n} = f32[32,64,128] reshape({n}_n)",
            ]
        elif kind == 2:
            body += [
                f"  {n}_m = f32[32,64] reduce({x}, c0), dimensions={{2}}, to_apply=add",
                f"  {n}_b = f32[32,64,128] broadcast({n}_m), dimensions={{0,1}}",
                f"  {n} = f32[32,64,128] subtract({x}, {n}_b)",
            ]
        else:
            body += [f"  {n} = f32[32,64,128] add({x}, {values[len(values) // 2]})"]
        count += 1 if kind == 3 else 3
        values.append(n)
        block += 1
    body.append(f"  ROOT out = f32[32,64,128] negate({values[-1]})")
    return "\n".join(
        [
            "HloModule bench",
            "add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }",
            "fused {",
            *body,
            "}",
            "ENTRY e {",
            "  p = f32[32,64,128] parameter(0)",
            "  ROOT f = f32[32,64,128] fusion(p), kind=kLoop, calls=fused",
            "}",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--maps", type=int, default=2000)
    parser.add_argument("--instructions", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    maps = random_maps(args.maps)
    best, median = best_and_median(lambda: [m.simplify() for m in maps], args.repeat)
    print(f"simplifier: {len(maps)} maps in {best:.3f} s (median {median:.3f} s): {len(maps) / best:,.0f} maps/s")

    module = parse_hlo(fusion_module(args.instructions))
    fusion = module.entry.root
    computation = fusion.fused_computation
    size = len(computation.instructions)
    grouped = grouped_output_to_input(computation, computation.root)
    distinct = sum(len(s) for s in grouped.values())
    best, median = best_and_median(lambda: grouped_output_to_input(computation, computation.root), args.repeat)
    print(
        f"fusion of {size} instructions: output-to-input maps of every instruction "
        f"({distinct} distinct maps) in {best * 1000:.1f} ms (median {median * 1000:.1f} ms)"
    )
    best, median = best_and_median(lambda: output_to_input_indexing(fusion), args.repeat)
    print(f"  the fusion's operand maps: {best * 1000:.1f} ms (median {median * 1000:.1f} ms)")
    best, median = best_and_median(lambda: input_to_output_indexing(fusion, 0), args.repeat)
    print(f"  input-to-output maps of its parameter: {best * 1000:.1f} ms (median {median * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
