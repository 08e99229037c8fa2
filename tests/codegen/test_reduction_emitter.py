"""The reduction emitter (``xlapy/codegen/emitters/reduction.py``): fusions whose hero is a reduce.

Every module of ``data/reduction`` (an entry computation around one fusion) states the variant XLA's reduction
emitter would take (``// VARIANT:``) and FileCheck expectations on the emitted MLIR (``// CHECK`` lines, on an
AVX-512-sized device so that they do not depend on the host), and is compiled for the CPU and compared with the
reference interpreter on seeded random arguments rich in special values: bit for bit (within the ulps of a
transcendental epilogue), except for float sums marked ``// BOUND:``, compared on arguments without special values
within the bound of two summation orders. The interpreter sums a contiguous row in numpy's pairwise order; any
order of ``n`` terms is within ``gamma(n) * M`` of the exact sum, ``M`` the sum of the terms' magnitudes
(Higham, Accuracy and Stability of Numerical Algorithms, 4.2), and so is the emitter's ``in-order`` sum; its
``partial-accumulators`` sum (``L`` partial accumulators, one to four vectors of 64 bytes, a halving tree, then the
init value; see the emitter's docstring) puts each term through ``n/L`` additions in its lane, ``log2(L)`` in the
tree and one with the init value, within ``gamma(n/L + log2(L) + 1) * M``. The two results differ by at most the
sum of the two bounds.

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
from tests.codegen.emitter_cases import WIDE_HOST, check_lines, directive, exact_values, kernel_thunks, only_fusion
from tests.codegen.filecheck import filecheck
from tools.loop_fusion_compare import assert_within_ulps, random_arguments, ulp_tolerance
from xlapy.codegen.emitters.reduction import (
    VARIANTS,
    emit_reduction_fusion,
    reduction_fusion,
    reduction_launch,
    reduction_shape,
    side_output_map,
    uses_column_tile,
    variant,
)
from xlapy.codegen.launch import Device, thread_id_to_output_map
from xlapy.codegen.mlir_text import print_mlir
from xlapy.codegen.partitioner import index_shape
from xlapy.codegen.pipeline import Dumper, emitter_name, lower_fusion
from xlapy.errors import VerifyError
from xlapy.indexing.affine import evaluate
from xlapy.runtime import thread_pool
from xlapy.shapes import ELEMENT_TYPES

DATA = Path(__file__).parent / "data" / "reduction"
FILES = sorted(DATA.glob("*.hlo"), key=lambda p: p.name)

pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def test_every_variant_has_a_module():
    assert {directive(p.read_text(), "VARIANT") for p in FILES} == set(VARIANTS)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_module_emits_its_variant_and_matches_its_checks(path: Path, tmp_path):
    text = path.read_text()
    fusion = only_fusion(xlapy.parse_hlo(text))
    assert emitter_name(fusion) == "reduction"
    info = reduction_fusion(fusion)
    assert variant(info.hero, WIDE_HOST) == directive(text, "VARIANT")
    if checks := check_lines(text):
        module, _ = emit_reduction_fusion(fusion, WIDE_HOST)
        filecheck(print_mlir(module, map_aliases=True), checks, tmp_path)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.stem)
def test_module_matches_the_interpreter(path: Path):
    text = path.read_text()
    module = xlapy.parse_hlo(text)
    executable = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)
    (thunk,) = kernel_thunks(executable)
    assert emitter_name(thunk.fusion, thunk.slice_indices) == "reduction"
    order = directive(text, "BOUND")
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
    hero = reduction_fusion(only_fusion(module)).hero
    n = math.prod(hero.operands[0].shape.dimensions[d] for d in hero.attr("dimensions"))
    operand = hero.operands[0].shape
    minor = operand.dimensions[operand.layout_or_default.minor_to_major[0]]
    vector = 64 // ELEMENT_TYPES[hero.shape.element_type].byte_width
    # The most vectors of partial accumulators, up to four and 64 lanes, that leave the row 4 chunks or more.
    lanes = next((k for k in (4 * vector, 2 * vector, vector)
                 if (k <= 64 or k == vector) and minor % k == 0 and minor >= 4 * k), None)
    magnitudes = text.replace("ROOT sum = f32[] add(a, b)", "m = f32[] abs(b)\n  ROOT sum = f32[] add(a, m)")
    assert magnitudes != text
    magnitude = np.asarray(xlapy.evaluate(xlapy.parse_hlo(magnitudes), *args), np.float64)
    u = np.finfo(np.asarray(got).dtype).eps / 2

    def gamma(k: float) -> float:
        return k * u / (1 - k * u)

    if order == "partial-accumulators":
        assert lanes is not None
        depth = n / lanes + math.log2(lanes) + 1
    else:
        depth = n
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
@pytest.mark.parametrize("element_type", [
    # One type of each kind in the default run; the others with the slow tests.
    "f32", "bf16", "s8", "pred",
    *(pytest.param(t, marks=pytest.mark.slow) for t in ("f64", "f16", "s32", "u8", "s64", "u16"))])
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
    assert emitter_name(only_fusion(module)) == "reduction"
    spec = f"{element_type}[{','.join(map(str, shape))}]"
    narrow = element_type in ("bf16", "f16")
    x = exact_values(spec, 3, integer_bound=100, steps=1 if narrow else 16, denominator=1 if narrow else 8)
    got = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)(x)
    expected = xlapy.evaluate(module, x)
    assert got.dtype == expected.dtype
    assert got.tobytes() == expected.tobytes()


_COLUMN_TILE = """HloModule column_tile
r {{ a = {t}[] parameter(0)  b = {t}[] parameter(1)  ROOT c = {t}[] {op}(a, b) }}
f {{
  p = {t}[{dims}]{layout} parameter(0)
  i = {t}[] constant({init})
  s = {t}[{kept}]{kept_layout} reduce(p, i), dimensions={{{axes}}}, to_apply=r
  ROOT e = {t}[{kept}]{kept_layout} {epilogue}
}}
ENTRY e {{
  p = {t}[{dims}]{layout} parameter(0)
  ROOT fusion = {t}[{kept}]{kept_layout} fusion(p), kind=kLoop, calls=f
}}
"""

_COLUMN_OPS = {"pred": ("or", "false"), "c64": ("add", "(0, 0)"), "c128": ("add", "(0, 0)"),
               "f8e5m2": ("maximum", "-inf"), "u16": ("multiply", "1"), "s64": ("xor", "0"), "f16": ("minimum", "inf")}


def _column_tile_module(element_type: str, shape, axes, layout: str = "", kept_layout: str = "") -> str:
    op, init = _COLUMN_OPS.get(element_type, ("add", "0"))
    epilogue = "copy(s)" if element_type == "pred" or element_type.startswith("u") else "negate(s)"
    kept = ",".join(str(n) for d, n in enumerate(shape) if d not in axes)
    return _COLUMN_TILE.format(t=element_type, dims=",".join(map(str, shape)), layout=layout, kept=kept,
                               kept_layout=kept_layout, axes=",".join(map(str, axes)), op=op, init=init,
                               epilogue=epilogue)


# The column-tile form folds the rows in the elemental order (row-major over the reduced dimensions), so every
# value, infinities, signed zeros and roundings included, is that order's bit for bit (NaN payloads apart: LLVM
# may commute an add, and x86 keeps the first operand's NaN). The interpreter reduces in that order when numpy
# does not sum along memory (pairwise): it is given a C-contiguous copy with the dimensions in their order in memory.
# Rows by 4 (40), by 2 (38) and one at a time (37).
@pytest.mark.parametrize("element_type", [
    "f32", "bf16", "s8", "pred", "c64", "f8e5m2",  # f8e5m2: a vector of its -inf (the maximum's init value)
    *(pytest.param(t, marks=pytest.mark.slow) for t in ("f64", "f16", "s32", "u16", "s64", "c128"))])
@pytest.mark.parametrize(("shape", "axes", "layout", "kept_layout"), [
    ((40, 96), (0,), "", ""),
    ((38, 3, 64), (0,), "", ""),                  # a kept major dimension
    ((37, 5, 2, 128), (0, 2), "", ""),            # two reduced dimensions
    ((64, 20, 12), (2,), "{1,0,2}", "{1,0}"),     # dimension 2 is major in memory, dimension 1 minor
])
def test_column_tile_form_folds_rows_in_the_elemental_order(element_type: str, shape, axes, layout: str,
                                                           kept_layout: str):
    text = _column_tile_module(element_type, shape, axes, layout, kept_layout)
    module = xlapy.parse_hlo(text)
    assert uses_column_tile(reduction_fusion(only_fusion(module)), Device.host())
    order = list(reversed(module.entry.root.operands[0].shape.layout_or_default.minor_to_major))
    in_memory = xlapy.parse_hlo(_column_tile_module(element_type, [shape[d] for d in order],
                                                    [order.index(a) for a in axes]))
    executable = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)
    kept_order = np.argsort([d for d in order if d not in axes])
    for seed in (0, 1):
        (x,) = random_arguments(module, seed, specials=True)
        expected = np.transpose(xlapy.evaluate(in_memory, np.ascontiguousarray(np.transpose(x, order))), kept_order)
        assert_within_ulps(executable(x), expected, module, 0, context=f"{element_type} {shape} (seed {seed})")



@pytest.mark.parametrize("element_type", ["bf16", "f16", "f32"])
def test_column_tile_init_value_from_a_parameter(element_type: str):
    """The accumulators start as a splat of an init value the kernel reads (a bf16 splat is moved as its bits:
    x86 without AVX512-BF16 would round it through an f32 register with __truncsfbf2, which the process lacks)."""
    text = f"""HloModule column_init
add {{ a = {element_type}[] parameter(0)  b = {element_type}[] parameter(1)  ROOT c = {element_type}[] add(a, b) }}
f {{
  x = {element_type}[64,128] parameter(0)
  i = {element_type}[] parameter(1)
  ROOT s = {element_type}[128] reduce(x, i), dimensions={{0}}, to_apply=add
}}
ENTRY e {{
  x = {element_type}[64,128] parameter(0)
  i = {element_type}[] parameter(1)
  ROOT fusion = {element_type}[128] fusion(x, i), kind=kLoop, calls=f
}}"""
    module = xlapy.parse_hlo(text)
    assert uses_column_tile(reduction_fusion(only_fusion(module)), Device.host())
    x, init = random_arguments(module, 0, specials=False)
    got = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)(x, init)
    # XLA's elemental order, from the init value: the interpreter adds the init value to the rows' sum instead.
    expected = np.full(128, init, x.dtype)
    for row in x:
        expected = (expected + row).astype(x.dtype)
    assert_within_ulps(got, expected, module, 0)

def test_the_column_tile_form_reads_whole_rows_of_large_column_sums(tmp_path):
    """f32[4096,1024] summed over its rows: ``tree-reduction-rewriter`` makes eight pieces of 512 rows, each a block
    of the column-tile form reading its rows 1024 columns (4 KiB) and 4 rows a step."""
    text = """HloModule column_sums
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT c = f32[] add(a, b) }
ENTRY e {
  x = f32[4096,1024] parameter(0)
  zero = f32[] constant(0)
  ROOT sums = f32[1024] reduce(x, zero), dimensions={0}, to_apply=add
}"""
    executable = xlapy.compile(xlapy.parse_hlo(text), backend="cpu", dump_to=tmp_path)
    pieces = [t for t in kernel_thunks(executable) if tuple(t.fusion.shape.dimensions) == (8, 1024)]
    assert len(pieces) == 1 and pieces[0].blocks == 8
    (dump,) = [p for p in tmp_path.glob("*.vectorize-lanes.mlir") if "tensor<4194304xf32>" in p.read_text()]
    filecheck(dump.read_text(), """
CHECK: xla.allocate_shared : tensor<1024xf32>
CHECK: scf.for %row = %{{.*}} to %{{.*}} step %[[FOUR:.*]] iter_args
CHECK: vector.transfer_read %{{.*}} : tensor<1024xf32>, vector<64xf32>
CHECK-COUNT-4: vector.transfer_read %{{.*}} : tensor<4194304xf32>, vector<64xf32>
CHECK: vector.transfer_write %{{.*}} : vector<64xf32>, tensor<1024xf32>
CHECK: xla.sync_threads
""", tmp_path)


def test_row_sums_are_the_same_for_any_number_of_workers(monkeypatch):
    """Blocks partition the outputs: the number of cores the blocks are spread over does not change a bit."""
    text = _sum_module("f32", (4096, 256), (1,))
    x = np.random.default_rng(5).normal(size=(4096, 256)).astype(np.float32)
    results = []
    for workers in (1, 2, 3):
        monkeypatch.setattr(thread_pool, "worker_count", lambda w=workers: w)
        results.append(xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)(x))
    assert all(r.tobytes() == results[0].tobytes() for r in results)


# -- argmax and argmin rows ---------------------------------------------------------------------------------------

_ARG = """HloModule arg
r {{
  va = {t}[] parameter(0)  ia = s32[] parameter(1)  vb = {t}[] parameter(2)  ib = s32[] parameter(3)
  {keep}
  value = {t}[] select(keep, va, vb)
  equal = pred[] compare(va, vb), direction=EQ
  smaller = pred[] compare(ia, ib), direction=LT
  tie = pred[] and(equal, smaller)
  take_a = pred[] or(keep, tie)
  index = s32[] select(take_a, ia, ib)
  ROOT result = ({t}[], s32[]) tuple(value, index)
}}
f {{
  x = {t}[{rows},{n}] parameter(0)
  positions = s32[{rows},{n}] iota(), iota_dimension=1
  init = {t}[] constant({init})
  zero = s32[] constant(0)
  ROOT r = ({t}[{rows}], s32[{rows}]) reduce(x, positions, init, zero), dimensions={{1}}, to_apply=r
}}
ENTRY e {{
  p = {t}[{rows},{n}] parameter(0)
  ROOT fusion = ({t}[{rows}], s32[{rows}]) fusion(p), kind=kLoop, calls=f
}}
"""


def _arg_module(element_type: str, which: str, rows: int, n: int) -> str:
    """jax's reducer of ``jnp.argmax`` / ``jnp.argmin`` (``_argmax`` / ``_argmin`` in ``jax/_src/lax/lax.py``): the
    value keeps the last of equal values, the index the first; floats test for NaN (the first NaN wins)."""
    direction = {"argmax": "GT", "argmin": "LT"}[which]
    if not ELEMENT_TYPES[element_type].is_integral:
        keep = (f"better = pred[] compare(va, vb), direction={direction}\n"
                "  nan = pred[] compare(va, va), direction=NE\n  keep = pred[] or(better, nan)")
        init = "-inf" if which == "argmax" else "inf"
    else:
        keep = f"keep = pred[] compare(va, vb), direction={direction}"
        info = np.iinfo(ELEMENT_TYPES[element_type].dtype)
        init = info.min if which == "argmax" else info.max
    return _ARG.format(t=element_type, keep=keep, init=init, rows=rows, n=n)


def _rows_with_ties(element_type: str, rows: int, n: int, seed: int) -> np.ndarray:
    """Rows drawn from a few values (ties everywhere), with NaNs of several payloads, infinities and both zeros,
    and rows made for the corners: all NaN, all -inf, all +inf, only zeros of both signs, one NaN last, the
    largest and smallest values last, the same value throughout, a few zeros (or NaNs) among equal values."""
    dtype = ELEMENT_TYPES[element_type].dtype
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        info = np.iinfo(dtype)
        pool = np.array([info.min, info.max, 0, 1, 7, info.max - 1, info.min + 1], dtype)
        x = rng.choice(pool, size=(rows, n))
        x[0] = 0
        x[1, -1], x[2, -1] = info.max, info.min
        return x
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
    nans = [np.array(np.nan, dtype)]
    for payload in (1, 2):  # quiet NaNs with other payloads, one negative
        nan = np.array(np.nan, dtype).view(bits) | np.asarray(payload, bits)
        nans.append(nan.view(dtype) if payload == 1 else (-nan.view(dtype)))
    pool = np.array([np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -2.5], dtype)
    x = rng.choice(pool, size=(rows, n))
    sparse_nans = rng.random((rows, n)) < 1.0 / n  # about one NaN a row
    x[sparse_nans] = rng.choice(np.array([v.item() for v in nans], dtype), size=int(sparse_nans.sum()))
    x[0] = nans[1]
    x[1] = -np.inf
    x[2] = np.inf
    x[3] = rng.choice(np.array([0.0, -0.0], dtype), size=n)
    x[4] = -1.0
    x[4, -1] = nans[2]
    x[5] = -1.0
    x[5, -1] = np.inf
    x[6] = 0.0
    x[6, -1] = -0.0
    # Zeros among -1s: the last zero is in a lane whose first zero comes before another lane's (lanes of 64 bytes).
    lanes = 64 // np.dtype(dtype).itemsize
    x[7] = -1.0
    x[7, [1, 2, lanes + 1]] = np.array([0.0, -0.0, 0.0], dtype)
    x[8:12] = np.where(rng.random((4, n)) < 4.0 / n, rng.choice(np.array([0.0, -0.0], dtype), size=(4, n)),
                       np.array([[-1.0], [-1.0], [1.0], [1.0]], dtype))  # for argmax and for argmin
    x[16] = 1.0
    x[16, [1, 2, lanes + 1]] = np.array([0.0, -0.0, 0.0], dtype)
    x[12:16] = np.where(rng.random((4, n)) < 4.0 / n, rng.choice(np.array([v.item() for v in nans], dtype),
                                                                  size=(4, n)), 1.0)
    return x


def _assert_arg_rows_are_the_interpreters(text: str, element_type: str, rows: int, n: int) -> None:
    """The compiled arg reduction of ``text`` gives the interpreter's values and indices, bit for bit, on rows with
    ties (two seeds)."""
    module = xlapy.parse_hlo(text)
    executable = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)
    for seed in (0, 1):
        x = _rows_with_ties(element_type, rows, n, seed)
        (value, index), (expected_value, expected_index) = executable(x), xlapy.evaluate(module, x)
        assert index.tobytes() == expected_index.tobytes(), f"seed {seed}"
        assert value.tobytes() == expected_value.tobytes(), f"seed {seed}"


# Rows of 4 and 5 vectors of 64 bytes take per-lane accumulators; 4 vectors and 3 elements keep the elemental order.
@pytest.mark.parametrize("element_type", ["f32", "f64", "bf16", "f16", "s32", "s8", "u8"])
@pytest.mark.parametrize("which", ["argmax", "argmin"])
@pytest.mark.parametrize("vectors", [4, 5, 4.25])
def test_argmax_and_argmin_rows_are_the_interpreters_bit_for_bit(element_type: str, which: str, vectors: float):
    lanes = 64 // ELEMENT_TYPES[element_type].byte_width
    n = int(vectors * lanes) if vectors == int(vectors) else 4 * lanes + 3
    rows = 24
    text = _arg_module(element_type, which, rows, n)
    module = xlapy.parse_hlo(text)
    emitted, _ = emit_reduction_fusion(only_fusion(module), WIDE_HOST)
    assert (f"vector<{lanes}x" in print_mlir(emitted)) == (n % lanes == 0)
    _assert_arg_rows_are_the_interpreters(text, element_type, rows, n)


# Rows of 8 and 12 vectors of 64 bytes take two vectors of (value, index) states (one for 8-bit values: 64 lanes at
# most), halved from 2V lanes; 12 vectors make a chunk count that is not a power of two.
@pytest.mark.parametrize("element_type", ["f32", "f64", "bf16", "f16", "s32", "u8"])
@pytest.mark.parametrize("which", ["argmax", "argmin"])
@pytest.mark.parametrize("vectors", [8, 12])
def test_argmax_and_argmin_rows_of_two_vectors_are_the_interpreters_bit_for_bit(element_type: str, which: str,
                                                                                 vectors: int):
    vector_lanes = 64 // ELEMENT_TYPES[element_type].byte_width
    n, rows = vectors * vector_lanes, 24
    lanes = min(2 * vector_lanes, max(64, vector_lanes))
    text = _arg_module(element_type, which, rows, n)
    module = xlapy.parse_hlo(text)
    emitted, _ = emit_reduction_fusion(only_fusion(module), WIDE_HOST)
    assert f"-> (vector<{lanes}x" in print_mlir(emitted)
    _assert_arg_rows_are_the_interpreters(text, element_type, rows, n)


def test_argmax_rows_become_vector_code(tmp_path):
    """After ``vectorize-lanes``, the chunk loop of ``argmax_rows.hlo`` carries (value, index, last index) vectors
    and its body is vector code: one read of 32 values, the reducer's compares and selects on whole vectors; the
    halving is vector code too, on 16, 8, 4 and 2 lanes, and only the last two lanes are read one by one."""
    fusion = only_fusion(xlapy.parse_hlo((DATA / "argmax_rows.hlo").read_text()))
    lower_fusion(fusion, WIDE_HOST, Dumper.create(tmp_path, "vectorize-lanes"))
    (dump,) = tmp_path.glob("*.vectorize-lanes.mlir")
    checks = """
// CHECK:      scf.for {{.*}} iter_args({{.*}}) -> (vector<32xf32>, vector<32xi32>, vector<32xi32>)
// CHECK:        vector.transfer_read {{.*}} vector<32xf32>
// CHECK:        arith.cmpf ogt, {{.*}} : vector<32xf32>
// CHECK:        arith.cmpf une, {{.*}} : vector<32xf32>
// CHECK:        arith.select {{.*}} : vector<32xi1>, vector<32xf32>
// CHECK:        arith.select {{.*}} : vector<32xi1>, vector<32xi32>
// CHECK:        scf.yield {{.*}} : vector<32xf32>, vector<32xi32>, vector<32xi32>
// CHECK-NOT:  scf.for
// CHECK:      vector.shuffle {{.*}} [16, 17, {{.*}}, 31] : vector<32xi32>, vector<32xi32>
// CHECK-NOT:  vector.extract
// CHECK:      arith.cmpi ult, {{.*}} : vector<16xi32>
// CHECK:      arith.cmpf ogt, {{.*}} : vector<16xf32>
// CHECK:      arith.cmpi ult, {{.*}} : vector<8xi32>
// CHECK:      arith.cmpi ult, {{.*}} : vector<4xi32>
// CHECK:      arith.cmpi ult, {{.*}} : vector<2xi32>
// CHECK:      vector.extract {{.*}}[1] : i32 from vector<2xi32>
// CHECK-NOT:  vector.extract {{.*}}[2]
"""
    filecheck(dump.read_text(), checks, tmp_path)


# Reducers and operands the per-lane accumulators do not reproduce keep the elemental order: no NaN test (a NaN
# would lose to the next element), equal values taking the later index, positions that are not the row's iota, an
# IEEE total order (-0 < +0).
@pytest.mark.parametrize(("old", "new"), [
    ("  nan = pred[] compare(va, va), direction=NE\n  keep = pred[] or(better, nan)",
     "  keep = pred[] or(better, better)"),
    ("tie = pred[] and(equal, smaller)", "tie = pred[] and(equal, equal)"),
    ("positions = s32[24,256] iota(), iota_dimension=1", "positions = s32[24,256] iota(), iota_dimension=0"),
    ("better = pred[] compare(va, vb), direction=GT", "better = pred[] compare(va, vb), direction=GT, type=TOTALORDER"),
])
def test_other_variadic_rows_keep_the_elemental_order(old: str, new: str):
    text = _arg_module("f32", "argmax", 24, 256)
    assert old in text
    text = text.replace(old, new)
    module = xlapy.parse_hlo(text)
    emitted, _ = emit_reduction_fusion(only_fusion(module), WIDE_HOST)
    assert "vector<" not in print_mlir(emitted)
    x = _rows_with_ties("f32", 24, 256, 4)
    got, expected = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)(x), xlapy.evaluate(module, x)
    assert all(g.tobytes() == e.tobytes() for g, e in zip(got, expected))


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "int32", "uint8"])
@pytest.mark.parametrize("which", ["argmax", "argmin"])
def test_argmax_and_argmin_match_xla_cpu(dtype: str, which: str, tmp_path):
    """``jnp.argmax`` / ``jnp.argmin`` over the rows, through xlapy and through XLA:CPU, on the same arrays."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from xlapy.frontends.jax import jit

    element_type = {"float32": "f32", "bfloat16": "bf16", "float16": "f16", "int32": "s32", "uint8": "u8"}[dtype]
    n = 8 * 64 // ELEMENT_TYPES[element_type].byte_width
    x = _rows_with_ties(element_type, 40, n, 3)

    def reduce_rows(a):
        return getattr(jnp, which)(a, axis=-1)

    got = jit(reduce_rows, dump_to=str(tmp_path))(x)
    expected = np.asarray(jax.jit(reduce_rows)(x))
    np.testing.assert_array_equal(got, expected)
    dumps = [p.read_text() for p in tmp_path.rglob("*.vectorize-lanes.mlir")]
    # The fold of the (value, index) lanes is vector code: the index chosen by a select of whole vectors.
    assert any(re.search(r"arith\.select .* : vector<\d+xi1>, vector<\d+xi32>", d) for d in dumps)


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
    hero = reduction_fusion(only_fusion(xlapy.parse_hlo(_sum_module("f32", shape, axes, layout)))).hero
    found = reduction_shape(hero)
    assert (found.is_row, found.dimensions) == expected


@pytest.mark.parametrize(("shape", "axes"), [((24, 96), (1,)), ((7, 10, 20), (0,)), ((5, 33), (0,))])
def test_side_output_map_covers_every_input_element_once(shape, axes):
    hero = reduction_fusion(only_fusion(xlapy.parse_hlo(_sum_module("f32", shape, axes)))).hero
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



def test_column_side_outputs_are_written_as_vectors(tmp_path):
    """The side outputs' lanes are their loop's innermost: it becomes vector stores (with the lanes outermost it was
    unrolled into a scalar store per element, 1,920 of them here, and compiled for half a minute)."""
    fusion = only_fusion(xlapy.parse_hlo((DATA / "side_output_column.hlo").read_text()))
    lower_fusion(fusion, Device.host(), Dumper.create(tmp_path, "vectorize-lanes"))
    (dump,) = tmp_path.glob("*.vectorize-lanes.mlir")
    text = dump.read_text()
    assert "vector.transfer_write" in text and text.count("tensor.insert") < 8

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
    fusion = only_fusion(xlapy.parse_hlo(text))
    assert reduction_fusion(fusion) is None
    with pytest.raises(VerifyError, match="not a reduction fusion"):
        emit_reduction_fusion(fusion, WIDE_HOST)


def test_row_reductions_of_bf16_load_whole_vectors() -> None:
    # The final combine reads lanes out of the partial accumulators; the rows themselves stay vector loads (taken
    # for per-lane code, each element was a scalar i16 load the vectorizers only partly joined again).
    from xlapy.codegen.backends.cpu import translate_module

    module = lower_fusion(only_fusion(xlapy.parse_hlo((DATA / "bf16_row_sum_in_f32.hlo").read_text())),
                          WIDE_HOST).module
    text = str(translate_module(module)[0])
    assert re.search(r"load <\d+ x i16>", text) and not re.search(r"load i16,", text)
