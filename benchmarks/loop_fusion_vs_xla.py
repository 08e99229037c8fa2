"""Loop fusions compiled by xlapy side by side with XLA:CPU (through jaxlib, in
this process): GELU in bf16 and f32 at 6x512x4096, optionally modules of the
loop-fusion test corpus.

For each module: xlapy's compile time cold (an empty disk cache, from
``$XLAPY_CACHE_DIR`` set to a fresh directory; the compiler's modules are
imported beforehand, once, and that time is printed apart), in a fresh
process (the first ``xlapy.compile`` of a new Python process after ``import
xlapy``, empty disk cache: what a program's first compile costs, imports of
the compiler included), cached (the in-memory cache cleared, so the kernel
comes from disk) and warm (from memory); then N rounds
alternating one xlapy run (``executable(*arrays)``) and one XLA:CPU run
(``execute`` on device buffers placed once, until ready); the medians, the
ratio XLA/xlapy (above 1: xlapy is faster), and the bandwidth each achieves
(bytes read and written per second) against the machine's copy bandwidth,
measured here with numpy (one thread, and one copy per core at once). The
results are checked against the interpreter (a slice of GELU's, corpus
modules whole) and compared with XLA's.

XLA gets the module with the fusion inlined (its own pipeline fuses it, as it
does what JAX hands it; see tools/xla_reference.py). Inputs are
seeded normal values without special values: denormals would slow down
whichever side does not flush them, which is not what this measures.

    python -m benchmarks.loop_fusion_vs_xla                        # GELU bf16 and f32
    python -m benchmarks.loop_fusion_vs_xla --rounds 50 --shape 6,512,4096
    python -m benchmarks.loop_fusion_vs_xla --corpus large_256x1024 iota_large_f32
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

import xlapy
from benchmarks.timing import compile_cold_and_cached, format_seconds, import_compiler, time_alternately, timed
from tools.compare import leaves
from tools.loop_fusion_compare import NAN_MISMATCH, max_ulp_difference, random_arguments, result_element_types
from tools.loop_fusion_corpus import CORPUS, GELU_SHAPE, gelu_text
from tools.xla_reference import unfused_text

# The rows of GELU checked against the interpreter (it is elementwise, so a
# slice of the input gives the same slice of the output).
_GELU_CHECK_SHAPE = (1, 8)


@dataclass
class Case:
    name: str
    text: str
    # (smaller module text, how to cut its inputs and outputs from the full ones), for modules too large
    # for the interpreter to check whole.
    check: tuple[str, Callable[[np.ndarray], np.ndarray]] | None = None


@dataclass
class Result:
    name: str
    description: str
    bytes_moved: int
    cold: float | None = None
    fresh: float | None = None
    cached: float | None = None
    warm: float | None = None
    xla_compile: float | None = None
    ours: list[float] = field(default_factory=list)
    theirs: list[float] = field(default_factory=list)
    ulp_interpreter: int | None = None
    ulp_xla: int | None = None
    notes: list[str] = field(default_factory=list)


def gelu_case(element_type: str, shape: str) -> Case:
    rows = tuple(slice(0, n) for n in _GELU_CHECK_SHAPE)
    dims = [int(d) for d in shape.split(",")]
    small = ",".join(str(n) for n in [*_GELU_CHECK_SHAPE, *dims[len(_GELU_CHECK_SHAPE):]])
    return Case(f"gelu {element_type}", gelu_text(element_type, shape), (gelu_text(element_type, small),
                                                                          lambda a: a[rows]))


def corpus_case(name: str) -> Case:
    path = CORPUS / f"{name}.hlo"
    if not path.exists():
        known = ", ".join(sorted(p.stem for p in CORPUS.glob("*.hlo")))
        raise SystemExit(f"no corpus module {name!r}; the corpus has: {known}")
    return Case(name, path.read_text())


# -- the machine ---------------------------------------------------------------------------------


def copy_bandwidth(megabytes: int, repeat: int, threads: int) -> float:
    """GB/s of a numpy copy of ``megabytes`` into a preallocated array (2 bytes
    moved per byte copied), median of ``repeat``, split over ``threads``."""
    source = np.ones(megabytes * (1 << 20) // 8, np.float64)
    target = np.empty_like(source)
    chunks = np.array_split(np.arange(source.size), threads)
    bounds = [(c[0], c[-1] + 1) for c in chunks if c.size]

    def copy_part(bound: tuple[int, int]) -> None:
        np.copyto(target[bound[0]:bound[1]], source[bound[0]:bound[1]])

    times = []
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for _ in range(repeat + 1):
            start = time.perf_counter()
            list(pool.map(copy_part, bounds))
            times.append(time.perf_counter() - start)
    return 2 * source.nbytes / statistics.median(times[1:]) / 1e9


# -- xlapy ------------------------------------------------------------------------------------------


# Run in a fresh process: the time of the first xlapy.compile of the module read from stdin.
_FRESH_PROCESS = """
import sys, time
import xlapy
module = xlapy.parse_hlo(sys.stdin.read())
start = time.perf_counter()
xlapy.compile(module, backend="cpu")
print(time.perf_counter() - start)
"""


def fresh_process_compile(case: Case, directory: Path) -> float:
    """The compile time of ``case`` as the first compile of a new Python process, into the empty disk cache
    ``directory``."""
    directory.mkdir()
    root = Path(__file__).resolve().parents[1]
    path = os.pathsep.join([str(root), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = dict(os.environ, XLAPY_CACHE_DIR=str(directory), PYTHONPATH=path)
    done = subprocess.run([sys.executable, "-c", _FRESH_PROCESS], input=case.text, capture_output=True, text=True,
                          env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{case.name}: the compile in a fresh process failed:\n{done.stderr}")
    return float(done.stdout.split()[-1])


def compile_xlapy(case: Case, result: Result, cache_root: Path) -> xlapy.Executable:
    """Compile three times (cold, from disk, from memory), recording the times."""
    directory = cache_root / case.name.replace(" ", "_")
    result.cold, result.cached, executable, files_written = compile_cold_and_cached(
        lambda: xlapy.parse_hlo(case.text), directory)
    if files_written == 0:
        result.notes.append(f"the cold compile wrote nothing into $XLAPY_CACHE_DIR ({directory})")
    result.warm, _ = timed(lambda: xlapy.compile(xlapy.parse_hlo(case.text), backend="cpu"))
    result.fresh = fresh_process_compile(case, cache_root / (directory.name + "_fresh_process"))
    return executable


# -- XLA --------------------------------------------------------------------------------------------


class XlaRunner:
    """The module compiled by XLA:CPU, its arguments placed on the device once."""

    def __init__(self, text: str, args: list[np.ndarray]) -> None:
        from tools.xla_cpu import compile_on_xla_cpu

        self.compile_time, self.compiled = timed(lambda: compile_on_xla_cpu(unfused_text(text)))
        import jax
        from jax._src import config as jax_config

        self._x64 = jax_config.enable_x64
        with self._x64(True):
            self.buffers = [jax.device_put(np.asarray(a).astype(d, copy=False), self.compiled.device)
                            for a, d in zip(args, self.compiled.parameter_dtypes)]

    def run(self) -> list:
        with self._x64(True):
            outputs = self.compiled.executable.execute(self.buffers)
            for output in outputs:
                output.block_until_ready()
        return outputs

    def results(self) -> list[np.ndarray]:
        with self._x64(True):
            return [np.asarray(o) for o in self.run()]


# -- one case ---------------------------------------------------------------------------------------


def _worst(pairs: list[tuple[np.ndarray, np.ndarray]], types: list[str]) -> int:
    return max((max_ulp_difference(a, b, t) for (a, b), t in zip(pairs, types)), default=0)


def check_with_interpreter(case: Case, module: xlapy.HloModule, args: list[np.ndarray], ours: list[np.ndarray],
                           types: list[str]) -> int:
    """The largest ulp difference between xlapy's results and the interpreter's,
    on the slice ``case.check`` names (the whole module when it names none)."""
    if case.check is None:
        expected = leaves(xlapy.evaluate(module, *args))
        return _worst(list(zip(ours, expected)), types)
    small_text, cut = case.check
    small = xlapy.parse_hlo(small_text)
    expected = leaves(xlapy.evaluate(small, *[np.ascontiguousarray(cut(a)) for a in args]))
    return _worst([(np.ascontiguousarray(cut(o)), e) for o, e in zip(ours, expected)], types)


def run_case(case: Case, rounds: int, check: bool, cache_root: Path, console: Console) -> Result:
    module = xlapy.parse_hlo(case.text)
    args = random_arguments(module, 0, specials=False)
    types = result_element_types(module)
    root = module.entry.root
    description = ", ".join(str(s) for s in (list(root.shape.tuple_shapes) or [root.shape]))
    console.print(f"[bold]{case.name}[/]: {description}")
    result = Result(case.name, description, 0)
    executable = compile_xlapy(case, result, cache_root)
    xla = XlaRunner(case.text, args)
    result.xla_compile = xla.compile_time

    ours = leaves(executable(*args))
    result.bytes_moved = sum(a.nbytes for a in args) + sum(o.nbytes for o in ours)
    theirs = xla.results()
    result.ulp_xla = _worst(list(zip(ours, theirs)), types)
    if check:
        result.ulp_interpreter = check_with_interpreter(case, module, args, ours, types)

    result.ours, result.theirs = time_alternately(lambda: executable(*args), xla.run, rounds)
    return result


# -- report -----------------------------------------------------------------------------------------


def _ulps(value: int | None) -> str:
    if value is None:
        return "-"
    return "NaN≠num" if value == NAN_MISMATCH else str(value)


def _short(description: str) -> str:
    """The result shapes, or the first one and how many there are (multi-output fusions)."""
    shapes = description.split(", ")
    return description if len(shapes) <= 2 else f"{shapes[0]}, ... ({len(shapes)} results)"


def report(results: list[Result], copy_one: float, copy_all: float, threads: int, rounds: int, imports: float,
           console: Console) -> None:
    table = Table(title=f"loop fusions: xlapy vs XLA:CPU (medians of {rounds} alternating rounds)")
    for column, justify in (("module", "left"), ("result", "left"), ("xlapy", "right"), ("XLA", "right"),
                            ("XLA/xlapy", "right"), ("xlapy GB/s", "right"), ("% copy", "right"),
                            ("XLA GB/s", "right"), ("compile cold", "right"), ("fresh process", "right"),
                            ("cached", "right"),
                            ("warm", "right"), ("XLA compile", "right"), ("ulp interp", "right"),
                            ("ulp XLA", "right")):
        table.add_column(column, justify=justify)
    for r in results:
        ours, theirs = statistics.median(r.ours), statistics.median(r.theirs)
        ratio = theirs / ours
        ours_gbs, theirs_gbs = r.bytes_moved / ours / 1e9, r.bytes_moved / theirs / 1e9
        style = "green" if ratio >= 1.0 else "red"
        compile_times = (r.cold, r.fresh, r.cached, r.warm, r.xla_compile)
        table.add_row(r.name, _short(r.description), format_seconds(ours), format_seconds(theirs),
                      f"[{style}]{ratio:.2f}[/]", f"{ours_gbs:.1f}", f"{100 * ours_gbs / copy_all:.0f}%",
                      f"{theirs_gbs:.1f}", *(format_seconds(t) for t in compile_times),
                      _ulps(r.ulp_interpreter), _ulps(r.ulp_xla))
    console.print(table)
    console.print(f"copy bandwidth (numpy copy into a preallocated array, 2 x bytes / time): "
                  f"{copy_one:.1f} GB/s on one thread, {copy_all:.1f} GB/s on {threads} threads "
                  f"(% copy is against the latter)")
    console.print(f"compile cold: empty disk cache, the compiler's modules already imported (importing them took "
                  f"{format_seconds(imports)} in this process); fresh process: the first xlapy.compile of a new "
                  "process after `import xlapy`, those imports included, empty disk cache.")
    console.print("XLA/xlapy ≥ 1: xlapy is at least as fast. ulp interp: xlapy against the interpreter "
                  "(GELU on a slice); ulp XLA: xlapy against XLA:CPU (which contracts a*b+c into FMAs and "
                  "has its own approximations, so not 0).")
    for r in results:
        for note in r.notes:
            console.print(f"[yellow]{r.name}: {note}[/]")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=20, help="alternating timed rounds per module (default 20)")
    parser.add_argument("--shape", default=GELU_SHAPE, help=f"GELU's shape (default {GELU_SHAPE})")
    parser.add_argument("--types", nargs="*", default=["bf16", "f32"], help="GELU's element types")
    parser.add_argument("--corpus", nargs="*", default=[], metavar="NAME",
                        help="also these modules of tests/codegen/data/loop_fusions, at their own size")
    parser.add_argument("--no-check", action="store_true", help="skip the comparison with the interpreter")
    parser.add_argument("--copy-mb", type=int, default=512, help="size of the copy-bandwidth buffer (MiB)")
    args = parser.parse_args(argv)

    console = Console(width=max(Console().width, 200))
    threads = os.cpu_count() or 1
    cases = [gelu_case(t, args.shape) for t in args.types] + [corpus_case(n) for n in args.corpus]
    copy_one = copy_bandwidth(args.copy_mb, 10, 1)
    copy_all = copy_bandwidth(args.copy_mb, 10, threads)
    imports = import_compiler()
    with tempfile.TemporaryDirectory(prefix="xlapy-bench-cache-") as cache_root:
        results = [run_case(c, args.rounds, not args.no_check, Path(cache_root), console) for c in cases]
    report(results, copy_one, copy_all, threads, args.rounds, imports, console)
    return 0


if __name__ == "__main__":
    sys.exit(main())
