"""Whole JAX programs compiled by xlapy side by side with XLA:CPU (through jax, in this process).

Each program is lowered by jax and compiled twice: by ``xlapy.compile`` (the lowered, unfused module,
through xlapy's HLO passes, fusion, buffer assignment and thunks) and by ``jax.jit(...).compile()``
(XLA:CPU). Printed for each: xlapy's compile time cold (an empty kernel cache: ``$XLAPY_CACHE_DIR``
set to a fresh directory, the compiler's modules imported beforehand) and cached (the in-memory cache
cleared, so kernels come from disk), XLA's compile time, then the medians of N rounds alternating one
xlapy run (``executable(*arrays)`` on numpy arrays: large ones are read in place and large results handed
over, small ones copied in and out) and one
XLA:CPU run (on device buffers placed once, until ready), the ratio XLA time / xlapy time (above 1:
xlapy is faster), and their geometric mean over the programs that compiled. A program xlapy cannot
compile yet prints ``not compiled: <reason>``. Results are compared with XLA's and, at a small size of
the same program, with the reference interpreter (the largest difference in machine epsilons of the
largest result, a bound sums in any order keep). A program whose first run takes over two seconds is
timed once.

Cases marked * are the hero emitters' (transpose, reduction, concatenate, dynamic-update-slice, scatter):
their target is ``HERO_TARGET`` x XLA:CPU; the memory-bound ones among them also print their speed as a share
of the machine's copy speed, against ``COPY_SHARE``: a copy of as many bytes as the program reads and writes
(``benchmarks.timing.reference_copies``) is timed in the same rounds, and the share is its median time over the
program's. The copy bandwidth of large arrays (``benchmarks.timing.copy_bandwidth``) is printed for reference.

The sizes are memory-bound (a few MB to tens of MB per array), like benchmarks/loop_fusion_vs_xla.py.

    python -m benchmarks.programs_vs_xla                    # every program
    python -m benchmarks.programs_vs_xla softmax sort       # these programs
    python -m benchmarks.programs_vs_xla --rounds 50 --scale 0.25
    python -m benchmarks.programs_vs_xla --corpus           # the JAX corpus: kernels, fusions and bytes
    python -m benchmarks.programs_vs_xla --compile-only     # the 100-instruction compile-time case
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax
from rich.console import Console
from rich.table import Table

import xlapy
from benchmarks.timing import (
    compile_cold_and_cached,
    copy_bandwidth,
    format_seconds,
    import_compiler,
    reference_copies,
    time_alternately,
    time_in_turns,
    timed,
)
from tools.compare import leaves
from tools.xla_program_stats import describe_fusions, program_table_rows
from xlapy.frontends.jax import from_jax
from xlapy.runtime.ulps import error_in_epsilons

bf16 = ml_dtypes.bfloat16

# -- the programs ---------------------------------------------------------------------------------


def gelu(x):
    return jax.nn.gelu(x, approximate=True)


def softmax(x):
    return jax.nn.softmax(x, axis=-1)


def layernorm(x, gamma, beta):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + 1e-5) * gamma + beta


def rmsnorm(x, gamma):
    wide = x.astype(jnp.float32)
    scale = lax.rsqrt((wide * wide).mean(-1, keepdims=True) + 1e-6)
    return (wide * scale).astype(x.dtype) * gamma


def broadcast_chain(x, row, column):
    return jnp.maximum((x + row[None, :]) * column[:, None] - 0.5, 0.0) * 2.0 + row[None, :]


def transpose_021(x):
    return x.transpose(0, 2, 1)


def transpose_102(x):
    return x.transpose(1, 0, 2)


def transpose_210(x):
    return x.transpose(2, 1, 0)


def row_sums(x):
    return x.sum(axis=1)


def column_sums(x):
    return x.sum(axis=0)


def argmax(x):
    return jnp.argmax(x, axis=1)


def concatenation(a, b, c):
    return jnp.concatenate([a, b * 2.0, c], axis=1)


def scan_update_slice(rows):
    # Each step writes one transformed row into the carried buffer at the step's index.
    def step(i, buffer):
        return lax.dynamic_update_slice(buffer, jnp.tanh(rows[i])[None, :] * 2.0, (i, 0))

    return lax.fori_loop(0, rows.shape[0], step, jnp.zeros_like(rows))


def scatter_add(table, indices, updates):
    return table.at[indices].add(updates)


def mlp_block(x, w1, b1, w2, b2):
    return jax.nn.relu(x @ w1 + b1) @ w2 + b2


def attention(q, k, v):
    scores = (q @ k.T) / np.float32(np.sqrt(q.shape[-1]))
    return jax.nn.softmax(scores, axis=-1) @ v


def conv2d(x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


def sort(x):
    return jnp.sort(x, axis=-1)


def hundred_instructions(x, w):
    """About 100 HLO instructions: dots, reductions and elementwise chains, for the compile-time case."""
    h = x
    for step in range(3):
        h = jnp.tanh(h @ w) * (0.5 + step) + h.mean(-1, keepdims=True)
        h = jnp.where(h > 0, h, jnp.exp(h) - 1.0) - h.max(0, keepdims=True) * 0.1
    return h, h.sum()


@dataclass
class Program:
    name: str
    fn: Callable[..., Any]
    # Arguments at a scale (1: the benchmark's size); small scales give the interpreter check's size.
    make_args: Callable[[np.random.Generator, float], tuple[Any, ...]]
    # A case of the hero emitters' targets (at least HERO_TARGET x XLA:CPU) ...
    hero: bool = False
    # ... and one that only moves memory, which should run at COPY_SHARE of the speed of a copy of its bytes.
    memory_bound: bool = False


def _n(size: int, scale: float, minimum: int = 2) -> int:
    return max(minimum, int(size * scale))


def _normal(rng: np.random.Generator, *shape: int, dtype: Any = np.float32, scale: float = 1.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale).astype(dtype)


def _programs() -> list[Program]:
    f32 = _normal
    hero = {"hero": True}
    copying_hero = {"hero": True, "memory_bound": True}
    return [
        Program("gelu f32", gelu, lambda r, s: (f32(r, 6, _n(512, s), 4096),)),
        Program("gelu bf16", gelu, lambda r, s: (f32(r, 6, _n(512, s), 4096, dtype=bf16),)),
        Program("softmax", softmax, lambda r, s: (f32(r, _n(4096, s), 1024),), **hero),
        Program("layernorm", layernorm, lambda r, s: (f32(r, _n(4096, s), 1024), f32(r, 1024), f32(r, 1024)),
                **hero),
        Program("rmsnorm bf16", rmsnorm,
                lambda r, s: (f32(r, _n(4096, s), 1024, dtype=bf16), f32(r, 1024, dtype=bf16)), **hero),
        Program("broadcast chain", broadcast_chain,
                lambda r, s: (f32(r, _n(4096, s), 1024), f32(r, 1024), f32(r, _n(4096, s)))),
        Program("transpose 021", transpose_021, lambda r, s: (f32(r, _n(64, s), 256, 256),), **copying_hero),
        Program("transpose 102", transpose_102, lambda r, s: (f32(r, _n(64, s), 256, 256),), **copying_hero),
        Program("transpose 210", transpose_210, lambda r, s: (f32(r, _n(64, s), 256, 256),), **copying_hero),
        Program("row reduction", row_sums, lambda r, s: (f32(r, _n(4096, s), 1024),), **copying_hero),
        Program("column reduction", column_sums, lambda r, s: (f32(r, _n(4096, s), 1024),), **copying_hero),
        Program("argmax", argmax, lambda r, s: (f32(r, _n(4096, s), 1024),), **copying_hero),
        Program("concatenate", concatenation,
                lambda r, s: (f32(r, _n(2048, s), 1024), f32(r, _n(2048, s), 512), f32(r, _n(2048, s), 256)),
                **copying_hero),
        Program("scan dynamic-update-slice", scan_update_slice, lambda r, s: (f32(r, _n(64, s), 16384),), **hero),
        Program("scatter-add", scatter_add,
                lambda r, s: (f32(r, _n(65536, s), 16), r.integers(0, _n(65536, s), _n(16384, s)).astype(np.int32),
                              f32(r, _n(16384, s), 16)), **hero),
        Program("mlp block", mlp_block,
                lambda r, s: (f32(r, _n(256, s), 512), f32(r, 512, 2048, scale=0.05), f32(r, 2048),
                              f32(r, 2048, 512, scale=0.05), f32(r, 512))),
        Program("attention", attention,
                lambda r, s: (f32(r, _n(1024, s), 128), f32(r, _n(1024, s), 128), f32(r, _n(1024, s), 128))),
        Program("conv2d", conv2d, lambda r, s: (f32(r, _n(8, s, 1), 64, 64, 32), f32(r, 3, 3, 32, 32, scale=0.1))),
        Program("sort", sort, lambda r, s: (f32(r, _n(256, s), 4096),)),
    ]


# The hero emitters' targets: each hero case at least this many times as fast as XLA:CPU ...
HERO_TARGET = 1.2
# ... and the memory-bound ones moving their bytes at this share of the speed of a copy of as many bytes at least.
COPY_SHARE = 0.8

# A program whose first run takes longer than this (seconds) is timed once only.
_SLOW_RUN = 2.0
# The interpreter check's scale: small enough for the interpreter, large enough to take the same code paths.
_CHECK_SCALE = 1 / 256


# -- measuring ------------------------------------------------------------------------------------


@dataclass
class Result:
    name: str
    description: str
    hero: bool = False
    memory_bound: bool = False
    not_compiled: str | None = None
    cold: float | None = None
    cached: float | None = None
    xla_compile: float | None = None
    kernels: int | None = None
    library_calls: int | None = None
    bytes_moved: int = 0
    ours: list[float] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)
    # A memory-bound program's: the times of copies of as many bytes (``reference_copies``), in the same rounds.
    copies: list[list[float]] = field(default_factory=list)
    error_xla: float | None = None
    error_interpreter: float | None = None
    notes: list[str] = field(default_factory=list)


def _worst_error(ours: list[np.ndarray], theirs: list[np.ndarray]) -> float:
    return max((error_in_epsilons(a, b) for a, b in zip(ours, theirs)), default=0.0)


def check_small(program: Program) -> float:
    """The largest error of xlapy against the interpreter (``error_in_epsilons``) at the check's scale."""
    args = program.make_args(np.random.default_rng(1), _CHECK_SCALE)
    module = from_jax(program.fn, *args)
    flat = jax.tree.leaves(args)
    ours = leaves(xlapy.compile(module, backend="cpu")(*flat))
    return _worst_error(ours, leaves(xlapy.evaluate(module, *flat)))


def run_program(program: Program, rounds: int, scale: float, check: bool, cache_root: Path,
                console: Console) -> Result:
    args = program.make_args(np.random.default_rng(0), scale)
    flat = jax.tree.leaves(args)
    description = ", ".join(f"{a.dtype}{list(a.shape)}" for a in flat)
    console.print(f"[bold]{program.name}[/]: {description}")
    result = Result(program.name, description, program.hero, program.memory_bound)
    try:
        result.cold, result.cached, executable, _ = compile_cold_and_cached(
            lambda: from_jax(program.fn, *args), cache_root / program.name.replace(" ", "_"))
    except xlapy.XlapyError as error:
        result.not_compiled = f"{type(error).__name__}: {error}"
        return result
    summary = getattr(executable, "summary", None)
    if summary is not None:
        result.kernels, result.library_calls = summary.kernels, summary.library_calls

    lowered = jax.jit(program.fn).lower(*args)
    result.xla_compile, compiled = timed(lowered.compile)
    device_args = jax.device_put(args)

    def run_xla() -> Any:
        return jax.block_until_ready(compiled(*device_args))

    try:
        first_run, ours = timed(lambda: leaves(executable(*flat)))
    except xlapy.XlapyError as error:
        result.not_compiled = f"runs with {type(error).__name__}: {error}"
        return result
    theirs = [np.asarray(t) for t in leaves(run_xla())]
    result.bytes_moved = sum(a.nbytes for a in flat) + sum(o.nbytes for o in ours)
    result.error_xla = _worst_error(ours, theirs)
    if check:
        result.error_interpreter = check_small(program)

    warm_up = 2
    if first_run > _SLOW_RUN:
        rounds, warm_up = 1, 0
        result.notes.append(f"one run took {format_seconds(first_run)}: timed once, without warm-up")
    if not program.memory_bound:
        result.ours, result.theirs = time_alternately(lambda: executable(*flat), run_xla, rounds, warm_up)
        return result
    # The copy of as many bytes runs in the same rounds: it sees the same load and the same cache sizes.
    with reference_copies(result.bytes_moved // 2) as copies:
        result.ours, result.theirs, *result.copies = time_in_turns([lambda: executable(*flat), run_xla, *copies],
                                                                   rounds, warm_up)
    return result


# -- reporting ------------------------------------------------------------------------------------


def _epsilons(value: float | None) -> str:
    if value is None:
        return "-"
    if math.isinf(value):
        return "differ"
    return "0" if value == 0 else f"{value:.2g} ε"


def geometric_mean(ratios: list[float]) -> float:
    return math.exp(statistics.fmean(math.log(r) for r in ratios))


def report(results: list[Result], rounds: int, imports: float, bandwidth: float, console: Console) -> None:
    table = Table(title=f"JAX programs: xlapy vs XLA:CPU (medians of {rounds} alternating rounds)")
    for column in ("program", "xlapy", "XLA", "XLA/xlapy", "xlapy GB/s", "of copy", "XLA of copy", "kernels",
                   "library", "compile cold", "cached", "XLA compile", "vs XLA", "vs interp"):
        table.add_column(column, justify="left" if column == "program" else "right")
    ratios, hero_ratios, short = [], [], []
    for r in results:
        if r.not_compiled is not None:
            table.add_row(r.name, f"[yellow]not compiled: {r.not_compiled}[/]", *[""] * 12)
            continue
        ours, theirs = statistics.median(r.ours), statistics.median(r.theirs)
        ratio = theirs / ours
        ratios.append(ratio)
        copy = min(map(statistics.median, r.copies)) if r.copies else 0.0
        share, xla_share = copy / ours, copy / theirs
        if r.hero:
            hero_ratios.append(ratio)
            if ratio < HERO_TARGET or (r.memory_bound and share < COPY_SHARE):
                short.append(r.name)
        style = "green" if ratio >= 1.0 else "red"
        table.add_row(r.name + (" *" if r.hero else ""), format_seconds(ours), format_seconds(theirs),
                      f"[{style}]{ratio:.2f}[/]", f"{r.bytes_moved / ours / 1e9:.1f}",
                      f"{share:.0%}" if r.memory_bound else "", f"{xla_share:.0%}" if r.memory_bound else "",
                      str(r.kernels if r.kernels is not None else "-"),
                      str(r.library_calls if r.library_calls is not None else "-"), format_seconds(r.cold),
                      format_seconds(r.cached), format_seconds(r.xla_compile), _epsilons(r.error_xla),
                      _epsilons(r.error_interpreter))
    console.print(table)
    if ratios:
        console.print(f"geometric mean of XLA/xlapy over the {len(ratios)} programs that compiled: "
                      f"{geometric_mean(ratios):.3f}")
    console.print(f"'of copy': the median time of copying as many bytes as a memory-bound program reads and writes "
                  "(arguments plus results; numpy's copy on one thread or split over the cores, the faster), in the "
                  "same rounds, over the program's median time; 'XLA of copy': the same over XLA:CPU's (where both "
                  "are near the copy speed, neither side can be much faster than the other). The machine's copy "
                  f"bandwidth on 64 MiB, measured before and after the programs (best): {bandwidth / 1e9:.1f} GB/s "
                  "(bytes read plus written)")
    if hero_ratios:
        console.print(f"* hero cases: {len(hero_ratios) - len(short)} of {len(hero_ratios)} at {HERO_TARGET}x XLA or "
                      f"more (and, when memory-bound, {COPY_SHARE:.0%} of the copy speed or more)"
                      + (f"; short: {', '.join(short)}" if short else ""))
    console.print(f"compile cold: empty kernel cache, the compiler's modules already imported (importing them "
                  f"took {format_seconds(imports)}); cached: the same compile with the kernels on disk only. "
                  "xlapy's time includes its argument checks and the copies of small arguments and results; "
                  "XLA's runs on "
                  "device buffers placed once. vs interp: the largest difference from the interpreter (at a small "
                  "size), in machine epsilons of the largest result; vs XLA: the same against XLA:CPU (which sums "
                  "in another order and has its own approximations). 'differ': integers differ, or NaN against a "
                  "number.")
    for r in results:
        for note in r.notes:
            console.print(f"[yellow]{r.name}: {note}[/]")


# -- the compile-time case -----------------------------------------------------------------------


def compile_time_case(cache_root: Path, console: Console) -> None:
    rng = np.random.default_rng(2)
    args = (_normal(rng, 64, 64), _normal(rng, 64, 64, scale=0.1))
    module = from_jax(hundred_instructions, *args)
    count = sum(len(c.instructions) for c in module.computations)
    try:
        cold, cached, _, _ = compile_cold_and_cached(lambda: from_jax(hundred_instructions, *args),
                                                     cache_root / "compile_time")
    except xlapy.XlapyError as error:
        console.print(f"compile time, {count}-instruction program: not compiled: {type(error).__name__}: {error}")
        return
    xla, _ = timed(jax.jit(hundred_instructions).lower(*args).compile)
    console.print(f"compile time, {count}-instruction program: xlapy cold {format_seconds(cold)}, cached "
                  f"{format_seconds(cached)}; XLA:CPU {format_seconds(xla)}")


# -- the corpus table ----------------------------------------------------------------------------


def corpus_report(console: Console) -> None:
    from tools.jax_corpus import PROGRAMS

    table = Table(title="the JAX corpus: what xlapy and XLA:CPU make of each program")
    for column in ("program", "xlapy kernels", "library", "XLA fusions", "xlapy buffer bytes", "XLA bytes",
                   "XLA temp", "xlapy compile", "XLA compile"):
        table.add_column(column, justify="left" if column == "program" else "right")
    not_compiled = []
    for name, xla, ours in program_table_rows(PROGRAMS):
        xla_cells = (describe_fusions(xla.fusions),)
        if isinstance(ours, str):
            not_compiled.append((name, ours))
            table.add_row(name, "-", "-", *xla_cells, "-", f"{xla.buffer_bytes:,}", f"{xla.temp_bytes:,}", "-",
                          format_seconds(xla.compile_seconds))
            continue
        table.add_row(name, str(ours.kernels), str(ours.library_calls), *xla_cells, f"{ours.buffer_bytes:,}",
                      f"{xla.buffer_bytes:,}", f"{xla.temp_bytes:,}", format_seconds(ours.compile_seconds),
                      format_seconds(xla.compile_seconds))
    console.print(table)
    console.print("XLA bytes: memory_analysis() arguments + outputs + temporaries - aliased; xlapy buffer bytes: "
                  "the sum of its allocations (parameters, constants, temporaries, outputs).")
    for name, reason in not_compiled:
        console.print(f"[yellow]{name}: not compiled: {reason}[/]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("programs", nargs="*", metavar="PROGRAM", help="run only these programs (by name)")
    parser.add_argument("--rounds", type=int, default=20, help="alternating timed rounds per program (default 20)")
    parser.add_argument("--scale", type=float, default=1.0, help="scale the programs' leading dimension")
    parser.add_argument("--no-check", action="store_true", help="skip the comparison with the interpreter")
    parser.add_argument("--corpus", action="store_true", help="the per-program table of the JAX corpus instead")
    parser.add_argument("--compile-only", action="store_true", help="only the 100-instruction compile-time case")
    args = parser.parse_args(argv)

    console = Console(width=max(Console().width, 200))
    if args.corpus:
        corpus_report(console)
        return 0
    programs = _programs()
    if args.programs:
        known = {p.name for p in programs}
        unknown = [n for n in args.programs if n not in known]
        if unknown:
            raise SystemExit(f"unknown programs {unknown}; the programs are: {', '.join(sorted(known))}")
        programs = [p for p in programs if p.name in args.programs]
    imports = import_compiler()
    # Measured before the programs and again after them, the best kept: a copy can run slowly while XLA's
    # threads still spin after its last run.
    bandwidth = copy_bandwidth()
    with tempfile.TemporaryDirectory(prefix="xlapy-programs-cache-") as cache_root:
        compile_time_case(Path(cache_root), console)
        if args.compile_only:
            return 0
        results = [run_program(p, args.rounds, args.scale, not args.no_check, Path(cache_root), console)
                   for p in programs]
    report(results, args.rounds, imports, max(bandwidth, copy_bandwidth()), console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
