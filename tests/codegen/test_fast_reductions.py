"""Reductions the CPU kernels compute with SIMD vectors (``elemental_reduce.py``, ``vectorize-loads-stores``,
``vectorize-lanes``; docs/emitters.md).

- Column-style reductions (the input's minor dimension is kept): each lane of a vector is one output element and
  the reduction loop carries vector accumulators, so every output element still combines its inputs in XLA's
  elemental order (``acc = init``, then the reduced elements in row-major order): bit for bit that order,
  computed with numpy in the element type.
- Row-style reductions (the minor dimension is reduced, by one associative and commutative op): ``L`` partial
  accumulators (one to four 512-bit vectors, ``_lanes``), a horizontal combination halving them, then the init
  value: bit for bit
  a numpy emulation of exactly that order, and against the interpreter within the bound of two sums of ``n``
  terms each: ``2 * gamma(n) * sum(|x|)`` with ``gamma(n) = n*u / (1 - n*u)`` and ``n`` the number of terms, the
  init value included (Higham, Accuracy and Stability of Numerical Algorithms, 4.2): any order of the additions
  is within ``gamma(n) * sum(|x|)`` of the exact sum.
"""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.codegen.emitter_cases import assert_sum_within_bound
from tools.loop_fusion_corpus import single_fusion
from xlapy.codegen.launch import Device
from xlapy.codegen.pipeline import Dumper, lower_fusion

_REDUCER = """
{name} {{
  a = {t}[] parameter(0)
  b = {t}[] parameter(1)
  ROOT r = {t}[] {op}(a, b)
}}
"""


pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def _reduce_module(dtype: str, shape: tuple[int, ...], axes: tuple[int, ...], op: str = "add",
                   producer: str | None = None) -> str:
    dims = ",".join(map(str, shape))
    kept = ",".join(str(n) for d, n in enumerate(shape) if d not in axes)
    lines = [] if producer is None else [f"x = {dtype}[{dims}] {producer}(p0)"]
    lines.append(f"ROOT r = {dtype}[{kept}] reduce({'p0' if producer is None else 'x'}, p1), "
                 f"dimensions={{{','.join(map(str, axes))}}}, to_apply=reducer")
    return single_fusion([f"{dtype}[{dims}]", f"{dtype}[]"], lines, f"{dtype}[{kept}]",
                         _REDUCER.format(name="reducer", t=dtype, op=op))


def _run(text: str, *args):
    return xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)(*args)


def _lowered_text(text: str, tmp_path) -> tuple[int, str]:
    """The vector size of the kept lowering of the module's fusion and its MLIR after ``vectorize-lanes``."""
    module = xlapy.parse_hlo(text)
    fusion = module.entry.root
    lowered = lower_fusion(fusion, Device.host(), Dumper.create(tmp_path, "vectorize-lanes"))
    (dump,) = tmp_path.glob("*.vectorize-lanes.mlir")
    return lowered.launch.vector_size, dump.read_text()


def _sequential(x: np.ndarray, init, axes: tuple[int, ...], combine=np.add) -> np.ndarray:
    """XLA's elemental order: ``acc = init`` and the reduced elements in row-major order, in x's type."""
    kept = [d for d in range(x.ndim) if d not in axes]
    flat = np.transpose(x, kept + list(axes)).reshape([x.shape[d] for d in kept] + [-1])
    accumulator = np.full(flat.shape[:-1], init, x.dtype)
    for k in range(flat.shape[-1]):
        accumulator = combine(accumulator, flat[..., k])
    return accumulator


def _lanes(n: int, itemsize: int) -> int:
    """The partial accumulators of a row of ``n`` elements: ``V`` = 64 bytes of elements times 4, 2 or 1, the first
    that gives at most 64 lanes (or is ``V``) and divides the row into 4 chunks or more."""
    vector = 64 // itemsize
    return next(lanes for lanes in (4 * vector, 2 * vector, vector)
                if (lanes <= 64 or lanes == vector) and n % lanes == 0 and n >= 4 * lanes)


def _partial_accumulators(x: np.ndarray, init, axes: tuple[int, ...], identity, combine=np.add) -> np.ndarray:
    """The row-style order: ``L`` (``_lanes``) partial accumulators from the identity; for each index of the other
    reduced dimensions (row-major), then each chunk of ``L`` minor elements, lane ``k`` combines the chunk's
    element ``k``; then lanes ``k`` and ``k + L/2`` combine while more than one is left; then ``init`` with that."""
    lanes = _lanes(x.shape[-1], x.itemsize)
    minor = x.ndim - 1
    assert minor in axes
    others = [d for d in axes if d != minor]
    kept = [d for d in range(x.ndim) if d not in axes]
    rows = np.transpose(x, kept + others + [minor]).reshape([x.shape[d] for d in kept] + [-1, x.shape[minor]])
    partials = np.full((*rows.shape[:-2], lanes), identity, x.dtype)
    for i in range(rows.shape[-2]):
        for c in range(x.shape[minor] // lanes):
            partials = combine(partials, rows[..., i, c * lanes:(c + 1) * lanes])
    while partials.shape[-1] > 1:
        half = partials.shape[-1] // 2
        partials = combine(partials[..., :half], partials[..., half:])
    return combine(np.full(partials.shape[:-1], init, x.dtype), partials[..., 0])


# -- column-style: vector accumulators across output elements --------------------------------------------------


@pytest.mark.parametrize(("dtype", "shape", "axes"), [
    ("f32", (300, 128), (0,)),       # a loop of 300 rows (not unrolled)
    ("f32", (6, 40, 64), (0, 1)),    # two reduced dimensions, then the kept minor one
    ("f64", (33, 4, 32), (0,)),
])
def test_column_sums_vectorize_in_the_elemental_order(dtype: str, shape, axes, tmp_path):
    text = _reduce_module(dtype, shape, axes)
    vector_size, lowered = _lowered_text(text, tmp_path)
    assert vector_size > 1
    assert f"xf{dtype[1:]}>" in lowered and "arith.addf" in lowered and "vector.extract" not in lowered
    x = np.random.default_rng(0).normal(size=shape).astype(np.dtype(dtype.replace("f", "float")))
    init = x.dtype.type(0.375)
    got = _run(text, x, init)
    np.testing.assert_array_equal(got, _sequential(x, init, axes))


def test_column_max_with_nans_and_infinities():
    """maximum propagates NaN, lane by lane as element by element."""
    text = _reduce_module("f32", (50, 64), (0,), op="maximum")
    x = np.random.default_rng(1).normal(size=(50, 64)).astype(np.float32)
    x[7, 3] = np.nan
    x[:, 11] = -np.inf
    init = np.float32(-np.inf)
    got = _run(text, x, init)
    expected = xlapy.evaluate(xlapy.parse_hlo(text), x, init)
    np.testing.assert_array_equal(got.view(np.uint32), expected.view(np.uint32))


# -- row-style: partial accumulators over the minor dimension ----------------------------------------------------


@pytest.mark.parametrize(("dtype", "shape", "axes"), [
    ("f32", (12, 1024), (1,)),       # 64 lanes: four vectors
    ("f32", (3, 5, 128), (0, 2)),    # another reduced dimension, outside the chunks; 32 lanes
    ("f32", (4, 96), (1,)),          # 16 lanes: 32 do not divide the row
    ("f64", (256,), (0,)),           # to a scalar; 32 lanes
])
def test_row_sums_in_the_partial_accumulator_order(dtype: str, shape, axes, tmp_path):
    text = _reduce_module(dtype, shape, axes)
    x = np.random.default_rng(2).normal(size=shape).astype(np.dtype(dtype.replace("f", "float")))
    init = x.dtype.type(0.375)  # not the identity: combined once
    got = _run(text, x, init)
    np.testing.assert_array_equal(got, _partial_accumulators(x, init, axes, x.dtype.type(-0.0)))
    assert_sum_within_bound(got, xlapy.evaluate(xlapy.parse_hlo(text), x, init), x, float(init), axes)
    _, lowered = _lowered_text(text, tmp_path)
    lanes = _lanes(x.shape[-1], x.itemsize)
    assert f"-> (vector<{lanes}x{dtype}>)" in lowered  # the chunk loop carries the partial accumulators


def test_row_sum_of_a_fused_producer():
    """exp(x) summed by rows: the exponential is computed on the vectors the partial accumulators take."""
    text = _reduce_module("f32", (16, 256), (1,), producer="exponential")
    x = np.random.default_rng(3).normal(size=(16, 256)).astype(np.float32)
    init = np.float32(0)
    got = _run(text, x, init)
    expected = xlapy.evaluate(xlapy.parse_hlo(text), x, init)
    # Each term within 1 ulp of the interpreter's exponential (u relative more), the sums within 2 * gamma(n).
    u = np.finfo(np.float32).eps / 2
    n = 257
    bound = 2 * n * u / (1 - n * u) + 2 * u
    np.testing.assert_array_less(np.abs(got.astype(np.float64) - expected) / np.abs(expected), bound)


@pytest.mark.parametrize(("op", "dtype", "identity"), [
    ("maximum", "f32", -np.inf),
    ("minimum", "f32", np.inf),
    ("multiply", "f64", 1.0),
    ("add", "s32", 0),
    ("maximum", "u8", 0),
    ("minimum", "s16", np.iinfo(np.int16).max),
    ("xor", "u32", 0),
])
def test_row_reductions_of_each_reducer(op: str, dtype: str, identity):
    numpy_dtype = np.dtype({"f": "float", "s": "int", "u": "uint"}[dtype[0]] + dtype[1:])
    shape = (4, 64 // numpy_dtype.itemsize * 16)  # several vectors of partial accumulators
    text = _reduce_module(dtype, shape, (1,), op=op)
    random = np.random.default_rng(4)
    if numpy_dtype.kind == "f":
        x = random.uniform(0.9, 1.1, size=shape).astype(numpy_dtype)
        if op != "multiply":
            x[1, 17] = np.nan
    else:
        info = np.iinfo(numpy_dtype)
        x = random.integers(info.min, info.max, size=shape, endpoint=True, dtype=numpy_dtype)
    init = numpy_dtype.type(2)
    got = _run(text, x, init)
    bits = f"u{numpy_dtype.itemsize}"
    if op in ("multiply", "add"):
        with np.errstate(over="ignore"):
            expected = _partial_accumulators(x, init, (1,), numpy_dtype.type(identity),
                                             np.multiply if op == "multiply" else np.add)
        np.testing.assert_array_equal(got.view(bits), expected.view(bits))
    if op != "multiply" or numpy_dtype.kind != "f":  # exact in any order: the interpreter's bits
        np.testing.assert_array_equal(got.view(bits), xlapy.evaluate(xlapy.parse_hlo(text), x, init).view(bits))


@pytest.mark.parametrize(("shape", "op"), [
    ((4, 48), "add"),        # fewer than four chunks of 16
    ((4, 100), "add"),       # not a multiple of 16: a vector read would straddle two rows
    ((4, 128), "subtract"),  # not associative
])
def test_other_row_reductions_keep_the_elemental_order(shape, op):
    text = _reduce_module("f32", shape, (1,), op=op)
    x = np.random.default_rng(5).normal(size=shape).astype(np.float32)
    init = np.float32(0.375)
    combine = np.add if op == "add" else np.subtract
    np.testing.assert_array_equal(_run(text, x, init), _sequential(x, init, (1,), combine))
