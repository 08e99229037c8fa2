"""The reduction emitter (``xlapy/codegen/emitters/reduction.py``): fusions whose hero is a reduce.

Every module of ``data/reduction`` (an entry computation around one fusion) states the variant XLA's reduction
emitter would take (``// VARIANT:``) and FileCheck expectations on the emitted MLIR (``// CHECK`` lines, on an
AVX-512-sized device so that they do not depend on the host), and is compiled for the CPU and compared with the
reference interpreter on seeded random arguments rich in special values: bit for bit (within the ulps of a
transcendental epilogue), except for float sums marked ``// BOUND:``, compared on arguments without special values
within the bound of two summation orders. The interpreter sums a contiguous row in numpy's pairwise order; any
order of ``n`` terms is within ``gamma(n) * M`` of the exact sum, ``M`` the sum of the terms' magnitudes
(Higham, Accuracy and Stability of Numerical Algorithms, 4.2), and so is the emitter's ``in-order`` sum; its
``partial-accumulators`` sum (64 bytes of ``V`` partial accumulators, a halving tree, then the init value; see
the emitter's docstring) puts each term through ``n/V`` additions in its lane, ``log2(V)`` in the tree and one
with the init value, within ``gamma(n/V + log2(V) + 1) * M``. The two results differ by at most the sum of the
two bounds.

Sums over element types, row and column variants, shapes that do and do not divide the vector width, and both
layouts are compared with the interpreter bit for bit on values whose sums are exact in any order.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

import xlapy
from tests.codegen.emitter_cases import exact_values, kernel_thunks
from tests.codegen.filecheck import filecheck
from tools.loop_fusion_compare import assert_within_ulps, random_arguments, ulp_tolerance
from xlapy.codegen.emitters.reduction import (
    VARIANTS,
    emit_reduction_fusion,
    reduction_fusion,
    reduction_launch,
    reduction_shape,
    side_output_map,
    variant,
)
from xlapy.codegen.launch import Device, thread_id_to_output_map
from xlapy.codegen.mlir_text import print_mlir
from xlapy.codegen.partitioner import index_shape
from xlapy.codegen.pipeline import emitter_name
from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloInstruction
from xlapy.indexing.affine import evaluate
from xlapy.runtime import thread_pool
from xlapy.shapes import ELEMENT_TYPES

DATA = Path(__file__).parent / "data" / "reduction"
FILES = sorted(DATA.glob("*.hlo"), key=lambda p: p.name)
# The device the FileCheck expectations and variants are written for: a host with 512-bit SIMD registers.
WIDE_HOST = Device("cpu", threads_per_block=64, vector_bytes=64, max_vector=64, exact_blocks=True,
                   rows_hold_vectors=True)

pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def _fusion(module: xlapy.HloModule) -> HloInstruction:
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    return fusion


def _directive(text: str, name: str) -> str | None:
    match = re.search(rf"^// {name}: (.*)$", text, re.MULTILINE)
    return match.group(1).strip() if match else None


def _checks(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if re.match(r"// CHECK", line))


def test_every_variant_has_a_module():
    assert {_directive(p.read_text(), "VARIANT") for p in FILES} == set(VARIANTS)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_module_emits_its_variant_and_matches_its_checks(path: Path, tmp_path):
    text = path.read_text()
    fusion = _fusion(xlapy.parse_hlo(text))
    assert emitter_name(fusion) == "reduction"
    info = reduction_fusion(fusion)
    assert variant(info.hero, WIDE_HOST) == _directive(text, "VARIANT")
    if checks := _checks(text):
        module, _ = emit_reduction_fusion(fusion, WIDE_HOST)
        filecheck(print_mlir(module, map_aliases=True), checks, tmp_path)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_module_matches_the_interpreter(path: Path):
    text = path.read_text()
    module = xlapy.parse_hlo(text)
    executable = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)
    (thunk,) = kernel_thunks(executable)
    assert emitter_name(thunk.fusion, thunk.slice_indices) == "reduction"
    order = _directive(text, "BOUND")
    for seed in (0, 1):
        args = random_arguments(module, seed, specials=order is None)
        got, expected = executable(*args), xlapy.evaluate(module, *args)
        if order is not None:
            _assert_within_summation_bound(text, module, order, got, expected, args)
        else:
            assert_within_ulps(got, expected, module, ulp_tolerance(module), context=f"{path.stem} (seed {seed})")


def _assert_within_summation_bound(text: str, module: xlapy.HloModule, order: str, got, expected, args) -> None:
    """``got`` (summed in ``order``) and ``expected`` (the interpreter's) differ by at most the bound of the module
    docstring; ``M`` is the interpreter's sum of the magnitudes (the add reducer applied to ``|b|``)."""
    hero = reduction_fusion(_fusion(module)).hero
    n = math.prod(hero.operands[0].shape.dimensions[d] for d in hero.attr("dimensions"))
    lanes = 64 // ELEMENT_TYPES[hero.shape.element_type].byte_width
    magnitudes = text.replace("ROOT sum = f32[] add(a, b)", "m = f32[] abs(b)\n  ROOT sum = f32[] add(a, m)")
    assert magnitudes != text
    magnitude = np.asarray(xlapy.evaluate(xlapy.parse_hlo(magnitudes), *args), np.float64)
    u = np.finfo(np.asarray(got).dtype).eps / 2

    def gamma(k: float) -> float:
        return k * u / (1 - k * u)

    depth = {"partial-accumulators": n / lanes + math.log2(lanes) + 1, "in-order": n}[order]
    bound = (gamma(depth) + gamma(n)) * magnitude
    error = np.abs(np.asarray(got, np.float64) - np.asarray(expected, np.float64))
    assert np.all(error <= bound), f"largest excess {np.max(error - bound)}"


# -- element types, shapes and layouts -----------------------------------------------------------------------

_SUM = """HloModule sums
r {{ a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT c = {t}[] {op}(a, b) }}
f {{ x = {t}[{dims}]{layout} parameter(0)  i = {t}[] constant({init})
     ROOT s = {t}[{kept}] reduce(x, i), dimensions={{{axes}}}, to_apply=r }}
ENTRY e {{ p = {t}[{dims}]{layout} parameter(0)  ROOT fusion = {t}[{kept}] fusion(p), kind=kLoop, calls=f }}
"""


def _sum_module(element_type: str, shape: tuple[int, ...], axes: tuple[int, ...], layout: str = "") -> str:
    kept = ",".join(str(n) for d, n in enumerate(shape) if d not in axes)
    op, init = ("or", "false") if element_type == "pred" else ("add", "0")
    return _SUM.format(t=element_type, dims=",".join(map(str, shape)), layout=layout, kept=kept,
                       axes=",".join(map(str, axes)), op=op, init=init)


# Rows of 512 elements reduce with partial accumulators in every type (a multiple of 4 vectors of 64 bytes), 37
# in order; columns of 64 and 5 elements. Values are multiples of 1/8 up to 2 in magnitude (-1, 0 or 1 for the
# 16-bit floats, whose sums here stay below 256): every partial sum is exact, so every order gives the exact sum.
@pytest.mark.parametrize("element_type", ["f32", "f64", "bf16", "f16", "s32", "s8", "u8", "s64", "u16", "pred"])
@pytest.mark.parametrize(("shape", "axes", "layout"), [
    ((24, 512), (1,), ""),        # row, whole vectors
    ((9, 37), (1,), ""),          # row, a length no vector divides
    ((70, 64), (0,), ""),         # column
    ((33, 5), (0,), ""),          # small column, 5 lanes no power of two divides
    ((512, 6), (0,), "{0,1}"),    # row in memory: dimension 0 is minor
    ((3, 40, 64), (0, 2), ""),    # row with a major reduced dimension
])
def test_sums_over_element_types_shapes_and_layouts(element_type: str, shape, axes, layout: str):
    text = _sum_module(element_type, shape, axes, layout)
    module = xlapy.parse_hlo(text)
    assert emitter_name(_fusion(module)) == "reduction"
    spec = f"{element_type}[{','.join(map(str, shape))}]"
    narrow = element_type in ("bf16", "f16")
    x = exact_values(spec, 3, integer_bound=100, steps=1 if narrow else 16, denominator=1 if narrow else 8)
    got = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)(x)
    expected = xlapy.evaluate(module, x)
    assert got.dtype == expected.dtype
    assert got.tobytes() == expected.tobytes()


def test_row_sums_are_the_same_for_any_number_of_workers(monkeypatch):
    """Blocks partition the outputs: the number of cores the blocks are spread over does not change a bit."""
    text = _sum_module("f32", (4096, 256), (1,))
    x = np.random.default_rng(5).normal(size=(4096, 256)).astype(np.float32)
    results = []
    for workers in (1, 2, 3):
        monkeypatch.setattr(thread_pool, "worker_count", lambda w=workers: w)
        results.append(xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)(x))
    assert all(r.tobytes() == results[0].tobytes() for r in results)


# -- the emitter's pieces ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("shape", "axes", "layout", "expected"), [
    ((24, 512), (1,), "", (True, (1, 24, 512))),
    ((3, 40, 64), (0, 2), "", (True, (3, 40, 64))),
    ((8, 1, 16), (0, 1), "", (False, (1, 8, 16))),
    ((6, 40, 32), (1,), "", (False, (6, 40, 32))),
    ((512, 6), (0,), "{0,1}", (True, (1, 6, 512))),
    ((64,), (0,), "", (True, (1, 1, 64))),
])
def test_reduction_shape_is_xlas_normalized_form(shape, axes, layout, expected):
    hero = reduction_fusion(_fusion(xlapy.parse_hlo(_sum_module("f32", shape, axes, layout)))).hero
    found = reduction_shape(hero)
    assert (found.is_row, found.dimensions) == expected


@pytest.mark.parametrize(("shape", "axes"), [((24, 96), (1,)), ((7, 10, 20), (0,)), ((5, 33), (0,))])
def test_side_output_map_covers_every_input_element_once(shape, axes):
    hero = reduction_fusion(_fusion(xlapy.parse_hlo(_sum_module("f32", shape, axes)))).hero
    launch = reduction_launch(hero, WIDE_HOST)
    output_map = thread_id_to_output_map(launch, index_shape(hero.shape))
    indexing_map = side_output_map(output_map, hero)
    seen: dict[tuple[int, ...], int] = {}
    ranges = [range(v.bounds.lower, v.bounds.upper + 1) for v in [*indexing_map.dim_vars, *indexing_map.range_vars]]
    for point in _product(ranges):
        dims, symbols = point[:2], point[2:]
        if indexing_map.constraints and not all(
                interval.lower <= evaluate(expr, dims, symbols) <= interval.upper
                for expr, interval in indexing_map.constraints.items()):
            continue
        index = tuple(evaluate(e, dims, symbols) for e in indexing_map.results)
        seen[index] = seen.get(index, 0) + 1
    assert sorted(seen) == sorted(np.ndindex(*shape)) and set(seen.values()) == {1}


def _product(ranges):
    if not ranges:
        yield ()
        return
    for value in ranges[0]:
        for rest in _product(ranges[1:]):
            yield (value, *rest)


def test_a_fusion_that_is_not_a_reduction_is_refused():
    text = ("HloModule m\nf { x = f32[8] parameter(0)  ROOT n = f32[8] negate(x) }\n"
            "ENTRY e { p = f32[8] parameter(0)  ROOT fusion = f32[8] fusion(p), kind=kLoop, calls=f }\n")
    fusion = _fusion(xlapy.parse_hlo(text))
    assert reduction_fusion(fusion) is None
    with pytest.raises(VerifyError, match="not a reduction fusion"):
        emit_reduction_fusion(fusion, WIDE_HOST)
