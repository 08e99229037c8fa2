"""TreeReductionRewriter: the HLO after the pass, on cases adapted from XLA's
``xla/service/gpu/transforms/tree_reduction_rewriter_test.cc`` (the split sizes are the CPU's: ``tree_split``), and
the values of split reductions against the interpreter on the unsplit module (bit for bit for integers, min, max,
argmax and argmin; within the bound of the split's order for float sums) and against XLA:CPU through jax.

The float bound: the split sums each row of ``k2`` terms in the row emitter's order, then the ``k1`` row sums in
the same way, so each term passes through at most ``depth(k2) + depth(k1)`` additions, ``depth(m)`` being
``m / L + log2(L) + 1`` with ``L`` partial accumulators (``m`` when a row is summed in order; see
``xlapy/codegen/elemental_reduce.py``): the result is within ``gamma(depth(k2) + depth(k1)) * sum|x|`` of the exact
sum (Higham, Accuracy and Stability of Numerical Algorithms, 4.2), and the interpreter's within ``gamma(n)``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import xlapy
from tests.codegen.emitter_cases import kernel_thunks
from tests.codegen.filecheck import filecheck
from xlapy.hlo import parse_module, verify
from xlapy.transforms.tree_reduction_rewriter import TreeReductionRewriter, tree_split

pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")

_ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT sum = f32[] add(a, b)
}
"""

# jax's argmax reducer (jnp.argmax), as it lowers it.
_ARGMAX = """
argmax {
  value_a = f32[] parameter(0)
  index_a = s32[] parameter(1)
  value_b = f32[] parameter(2)
  index_b = s32[] parameter(3)
  gt = pred[] compare(value_a, value_b), direction=GT
  nan = pred[] compare(value_a, value_a), direction=NE
  keep = pred[] or(gt, nan)
  value = f32[] select(keep, value_a, value_b)
  eq = pred[] compare(value_a, value_b), direction=EQ
  lt = pred[] compare(index_a, index_b), direction=LT
  tie = pred[] and(eq, lt)
  take_a = pred[] or(keep, tie)
  index = s32[] select(take_a, index_a, index_b)
  ROOT pair = (f32[], s32[]) tuple(value, index)
}
"""


def _sum_module(input_shape: str, output_shape: str, dimensions: str, init: str = "0",
                reducer: str = _ADD, element_type: str = "f32") -> str:
    return f"""HloModule m
{reducer}
ENTRY main {{
  input = {input_shape} parameter(0)
  init = {element_type}[] constant({init})
  ROOT out = {output_shape} reduce(input, init), dimensions={{{dimensions}}}, to_apply={reducer.split()[0]}
}}"""


def _argmax_module(rows: int, n: int, reducer: str = _ARGMAX) -> str:
    return f"""HloModule m
{reducer}
ENTRY main {{
  input = f32[{rows},{n}] parameter(0)
  positions = s32[{rows},{n}] iota(), iota_dimension=1
  lowest = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT out = (f32[{rows}], s32[{rows}]) reduce(input, positions, lowest, zero), dimensions={{1}}, to_apply=argmax
}}"""


def _rewrite(text: str, rewriter: TreeReductionRewriter | None = None) -> tuple[bool, str]:
    module = parse_module(text)
    changed = (rewriter or TreeReductionRewriter()).run(module)
    verify(module)
    return changed, module.to_text()


# -- the HLO after the pass -------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "checks"), [
    # A whole array summed (XLA's RowReductionSingleDimensionNoBatchedLargeInput): 64 rows of 16384.
    (_sum_module("f32[1048576]", "f32[]", "0"), """
// CHECK: %[[RESHAPE:.*]] = f32[64,16384]{1,0} reshape(%input)
// CHECK: %[[INNER:.*]] = f32[64]{0} reduce(%[[RESHAPE]], %init), dimensions={1}, to_apply=%add
// CHECK: ROOT %out = f32[]{{.*}} reduce(%[[INNER]], %init), dimensions={0}, to_apply=%add
"""),
    # 64 does not divide the length (XLA's RowReductionSingleDimensionNoBatched, which pads): 64 rows of 16384, and
    # the 7 elements after them reduced apart, their sum the outer reduction's last term.
    (_sum_module("f32[1048583]", "f32[]", "0"), """
// CHECK: %[[HEAD:.*]] = f32[1048576]{0} slice(%input), slice={[0:1048576]}
// CHECK: %[[RESHAPE:.*]] = f32[64,16384]{1,0} reshape(%[[HEAD]])
// CHECK: %[[INNER:.*]] = f32[64]{0} reduce(%[[RESHAPE]], %init), dimensions={1}
// CHECK: %[[TAIL:.*]] = f32[7]{0} slice(%input), slice={[1048576:1048583]}
// CHECK: %[[REST:.*]] = f32[]{{.*}} reduce(%[[TAIL]], %init), dimensions={0}
// CHECK: %[[ONE:.*]] = f32[1]{0} reshape(%[[REST]])
// CHECK: %[[ALL:.*]] = f32[65]{0} concatenate(%[[INNER]], %[[ONE]]), dimensions={0}
// CHECK: ROOT %out = f32[]{{.*}} reduce(%[[ALL]], %init), dimensions={0}
"""),
    # Columns whose length 16 does not divide (XLA's ColumnReductionSimpleNoDivisible): rows of a multiple of 64.
    (_sum_module("f32[1000003,3]", "f32[3]", "0"), """
// CHECK: %[[HEAD:.*]] = f32[999424,3]{1,0} slice(%input), slice={[0:999424], [0:3]}
// CHECK: %[[RESHAPE:.*]] = f32[16,62464,3]{2,1,0} reshape(%[[HEAD]])
// CHECK: %[[INNER:.*]] = f32[16,3]{1,0} reduce(%[[RESHAPE]], %init), dimensions={1}
// CHECK: %[[TAIL:.*]] = f32[579,3]{1,0} slice(%input), slice={[999424:1000003], [0:3]}
// CHECK: %[[REST:.*]] = f32[3]{0} reduce(%[[TAIL]], %init), dimensions={0}
// CHECK: %[[ONE:.*]] = f32[1,3]{1,0} reshape(%[[REST]])
// CHECK: %[[ALL:.*]] = f32[17,3]{1,0} concatenate(%[[INNER]], %[[ONE]]), dimensions={0}
// CHECK: ROOT %out = f32[3]{0} reduce(%[[ALL]], %init), dimensions={0}
"""),
    # Four rows (XLA's RowReductionNoBatched): 16 pieces of each, 64 rows in all.
    (_sum_module("f32[4,262144]", "f32[4]", "1"), """
// CHECK: %[[RESHAPE:.*]] = f32[4,16,16384]{2,1,0} reshape(%input)
// CHECK: %[[INNER:.*]] = f32[4,16]{1,0} reduce(%[[RESHAPE]], %init), dimensions={2}
// CHECK: ROOT %out = f32[4]{0} reduce(%[[INNER]], %init), dimensions={1}
"""),
    # Two reduced dimensions (XLA's RowReductionBatchedDimensionFits): the larger is split, the other stays in the
    # inner reduction.
    (_sum_module("f32[8,4,131072]", "f32[4]", "0,2"), """
// CHECK: %[[RESHAPE:.*]] = f32[8,4,16,8192]{3,2,1,0} reshape(%input)
// CHECK: %[[INNER:.*]] = f32[4,16]{1,0} reduce(%[[RESHAPE]], %init), dimensions={0,3}
// CHECK: ROOT %out = f32[4]{0} reduce(%[[INNER]], %init), dimensions={1}
"""),
    # A column reduction of five columns (XLA's ColumnReductionVeryLargeInput): 12 -> 8 pieces of each column.
    (_sum_module("f32[1048576,5]", "f32[5]", "0"), """
// CHECK: %[[RESHAPE:.*]] = f32[8,131072,5]{2,1,0} reshape(%input)
// CHECK: %[[INNER:.*]] = f32[8,5]{1,0} reduce(%[[RESHAPE]], %init), dimensions={1}
// CHECK: ROOT %out = f32[5]{0} reduce(%[[INNER]], %init), dimensions={0}
"""),
    # A column reduction of 1024 columns: eight pieces of 512 whole rows, which the column-tile form reads row by
    # row, a block each.
    (_sum_module("f32[4096,1024]", "f32[1024]", "0"), """
// CHECK: %[[RESHAPE:.*]] = f32[8,512,1024]{2,1,0} reshape(%input)
// CHECK: %[[INNER:.*]] = f32[8,1024]{1,0} reduce(%[[RESHAPE]], %init), dimensions={1}
// CHECK: ROOT %out = f32[1024]{0} reduce(%[[INNER]], %init), dimensions={0}
"""),
    # A column reduction with a kept major dimension of 2: four pieces of each.
    (_sum_module("f32[2,2048,512]", "f32[2,512]", "1"), """
// CHECK: %[[RESHAPE:.*]] = f32[2,4,512,512]{3,2,1,0} reshape(%input)
// CHECK: %[[INNER:.*]] = f32[2,4,512]{2,1,0} reduce(%[[RESHAPE]], %init), dimensions={2}
// CHECK: ROOT %out = f32[2,512]{1,0} reduce(%[[INNER]], %init), dimensions={1}
"""),
    # The output's layout stays (XLA's RowReductionWeirdOutputLayout).
    (_sum_module("f32[2,4,131072]{2,1,0}", "f32[2,4]{0,1}", "2"), """
// CHECK: reshape(%input)
// CHECK: ROOT %out = f32[2,4]{0,1} reduce(
"""),
    # An argmax of two rows (XLA's VariadicReductionLargeRow, with jax's reducer): the inner reduction takes the
    # positions within its rows, the outer one the positions in the whole row.
    (_argmax_module(2, 1048576), """
// CHECK: %[[VALUES:.*]] = f32[2,32,32768]{2,1,0} reshape(%input)
// CHECK: %[[LOCAL:.*]] = s32[2,32,32768]{2,1,0} iota(), iota_dimension=2
// CHECK: %[[INNER:.*]] = (f32[2,32]{1,0}, s32[2,32]{1,0}) reduce(%[[VALUES]], %[[LOCAL]], %lowest, %zero)
// CHECK-SAME: dimensions={2}
// CHECK: %[[BEST:.*]] = f32[2,32]{1,0} get-tuple-element(%[[INNER]]), index=0
// CHECK: %[[ROW:.*]] = s32[2,32]{1,0} iota(), iota_dimension=1
// CHECK: %[[K2:.*]] = s32[] constant(32768)
// CHECK: %[[STRIDE:.*]] = s32[2,32]{1,0} broadcast(%[[K2]]), dimensions={}
// CHECK: %[[FIRST:.*]] = s32[2,32]{1,0} multiply(%[[ROW]], %[[STRIDE]])
// CHECK: %[[AT:.*]] = s32[2,32]{1,0} get-tuple-element(%[[INNER]]), index=1
// CHECK: %[[POSITION:.*]] = s32[2,32]{1,0} add(%[[FIRST]], %[[AT]])
// CHECK: ROOT %out = (f32[2]{0}, s32[2]{0}) reduce(%[[BEST]], %[[POSITION]], %lowest, %zero), dimensions={1}
"""),
    # An argmax whose rows leave a remainder: its positions start where the rows end.
    (_argmax_module(1, 1048583), """
// CHECK: %[[INNER:.*]] = (f32[1,64]{1,0}, s32[1,64]{1,0}) reduce(
// CHECK: %[[TAIL:.*]] = f32[1,7]{1,0} slice(%input), slice={[0:1], [1048576:1048583]}
// CHECK: %[[ALONG:.*]] = s32[1,7]{1,0} iota(), iota_dimension=1
// CHECK: %[[START:.*]] = s32[] constant(1048576)
// CHECK: %[[OFFSET:.*]] = s32[1,7]{1,0} broadcast(%[[START]]), dimensions={}
// CHECK: %[[AT:.*]] = s32[1,7]{1,0} add(%[[ALONG]], %[[OFFSET]])
// CHECK: %[[REST:.*]] = (f32[1]{0}, s32[1]{0}) reduce(%[[TAIL]], %[[AT]], %lowest, %zero), dimensions={1}
// CHECK: concatenate({{.*}}), dimensions={1}
// CHECK: %[[POSITIONS:.*]] = s32[1,65]{1,0} concatenate({{.*}}), dimensions={1}
// CHECK: ROOT %out = (f32[1]{0}, s32[1]{0}) reduce({{.*}}, %[[POSITIONS]], %lowest, %zero), dimensions={1}
"""),
])
def test_split_reductions(text: str, checks: str, tmp_path):
    changed, out = _rewrite(text)
    assert changed
    filecheck(out, checks, tmp_path)


_SUBTRACT = _ADD.replace("add {", "subtract {").replace("add(a, b)", "subtract(a, b)")
# XLA's argmax of its test: no NaN test and no tie-break, so a split would change the index of equal values.
_ARGMAX_WITHOUT_TIE_BREAK = """
argmax {
  running_max = f32[] parameter(0)
  running_max_idx = s32[] parameter(1)
  current_value = f32[] parameter(2)
  current_value_idx = s32[] parameter(3)
  cmp_code = pred[] compare(current_value, running_max), direction=GT
  new_max = f32[] select(cmp_code, current_value, running_max)
  new_idx = s32[] select(cmp_code, current_value_idx, running_max_idx)
  ROOT out = (f32[], s32[]) tuple(new_max, new_idx)
}
"""


@pytest.mark.parametrize("text", [
    _sum_module("f32[50021]", "f32[]", "0"),                   # small: one thread is quick enough
    _sum_module("f32[1024,4096]", "f32[1024]", "1"),          # rows enough for the thread pool
    _sum_module("f32[64,65536]", "f32[64]", "1"),              # as many rows as TARGET_ROWS
    _sum_module("f32[1048576]", "f32[]", "0", init="1"),      # the init value is no identity: combined once
    _sum_module("f32[1048576]", "f32[]", "0", reducer=_SUBTRACT),
    _sum_module("f32[1048576,2]{0,1}", "f32[2]", "0"),         # not the default layout: a reshape would copy
    _sum_module("f32[40,1048576]", "f32[40]", "1"),           # 40 rows: no power of two of pieces fits 64
    _sum_module("f32[8,1024,1024]", "f32[8,1024]", "1"),      # columns: 8 kept rows are pieces enough
    _sum_module("f32[100,16384]", "f32[16384]", "0"),         # columns: too few rows for two pieces of 64
    _argmax_module(2, 1048576, reducer=_ARGMAX_WITHOUT_TIE_BREAK),
])
def test_reductions_left_alone(text: str):
    changed, out = _rewrite(text)
    assert not changed
    assert out == parse_module(text).to_text()


def test_split_is_a_function_of_the_shape():
    """The same shapes give the same split, whatever the values or the names (the order of a float sum is fixed by
    the shapes only)."""
    first = tree_split(parse_module(_sum_module("f32[3000009]", "f32[]", "0")).entry.root)
    second = tree_split(parse_module(_sum_module("f32[3000009]", "f32[]", "0").replace("input", "x")).entry.root)
    assert first == second
    assert (first.outer, first.inner, first.remainder) == (64, 46848, 3000009 - 64 * 46848)


@pytest.mark.parametrize(("size", "kernels"), [(16777216, 2), (16777219, 3)])
def test_the_cpu_pipeline_keeps_the_pieces_in_separate_kernels(size: int, kernels: int):
    """The rows' reduction (and the remainder's) do not fuse into the outer one, not even through the concatenate:
    the rows are a kernel of 64 blocks of their own."""
    module = parse_module(_sum_module(f"f32[{size}]", "f32[]", "0"))
    executable = xlapy.compile(module, backend="cpu")
    assert executable.summary.kernels == kernels
    assert max(thunk.blocks for thunk in kernel_thunks(executable)) == 64


# -- values -----------------------------------------------------------------------------------------------------

# Small thresholds: splits of arrays the interpreter evaluates quickly.
_SMALL = TreeReductionRewriter(min_split_elements=1 << 12, target_rows=16, min_inner_elements=64)


def _lanes(m: int, itemsize: int) -> int | None:
    """The row emitter's partial accumulators for a row of ``m`` elements (None: the row is summed in order)."""
    vector = 64 // itemsize
    return next((lanes for lanes in (4 * vector, 2 * vector, vector)
                 if (lanes <= 64 or lanes == vector) and m % lanes == 0 and m >= 4 * lanes), None)


def _depth(count: int, minor: int, is_row: bool, itemsize: int = 4) -> float:
    """The additions a term goes through in a reduction of ``count`` terms per output: with ``L`` partial
    accumulators when the minor dimension (``minor`` elements) is reduced and allows them, else in order."""
    lanes = _lanes(minor, itemsize) if is_row else None
    return count if lanes is None else count / lanes + math.log2(lanes) + 1


def _gamma(k: float, dtype) -> float:
    u = np.finfo(dtype).eps / 2
    return k * u / (1 - k * u)


def _split_and_compile(text: str, rewriter: TreeReductionRewriter = _SMALL) -> xlapy.Executable:
    module = parse_module(text)
    assert rewriter.run(module)
    return xlapy.compile(module, backend="cpu")


@pytest.mark.parametrize(("shape", "dimensions", "out"), [
    ((100003,), "0", ()),                 # a remainder of 675
    ((3, 65536), "1", (3,)),
    ((65536, 3), "0", (3,)),              # columns
    ((65539, 3), "0", (3,)),              # columns and a remainder of 3
    ((256, 64), "0", (64,)),              # columns, as many as TARGET_ROWS: four pieces of whole rows
    ((4, 5, 8192), "0,2", (5,)),
])
def test_float_sums_within_the_bound_of_the_split_order(shape, dimensions, out):
    text = _sum_module(f"f32[{','.join(map(str, shape))}]", f"f32[{','.join(map(str, out))}]", dimensions)
    module = parse_module(text)
    split = tree_split(module.entry.root, *_SMALL.thresholds)
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    got = _split_and_compile(text)(x)
    expected = xlapy.evaluate(module, x)
    axes = tuple(int(d) for d in dimensions.split(","))
    n = math.prod(shape[d] for d in axes)
    others = n // split.size  # the other reduced dimensions' elements
    is_row = split.dimension == len(shape) - 1
    rows = _depth(others * split.inner, split.inner, is_row)
    rest = _depth(others * split.remainder, split.remainder, is_row) if split.remainder else 0
    pieces = split.outer + (split.remainder > 0)
    outer_is_row = all(k in axes for k in range(split.dimension + 1, len(shape)))  # no kept dimension after it
    depth = max(rows, rest) + _depth(pieces, pieces, outer_is_row)
    bound = (_gamma(depth, np.float32) + _gamma(n, np.float32)) * np.sum(np.abs(x.astype(np.float64)), axis=axes)
    error = np.abs(np.asarray(got, np.float64) - np.asarray(expected, np.float64))
    assert np.all(error <= bound), f"largest excess {np.max(error - bound)}"


@pytest.mark.parametrize(("op", "element_type", "init"), [
    ("add", "s32", "0"),
    ("multiply", "u32", "1"),
    ("maximum", "f32", "-inf"),
    ("minimum", "f32", "inf"),
    ("maximum", "s8", "-128"),
    ("and", "u16", "65535"),
    ("or", "pred", "false"),
    ("xor", "s64", "0"),
])
def test_exact_reductions_match_the_interpreter_bit_for_bit(op: str, element_type: str, init: str):
    reducer = f"""
reducer {{
  a = {element_type}[] parameter(0)
  b = {element_type}[] parameter(1)
  ROOT r = {element_type}[] {op}(a, b)
}}
"""
    text = _sum_module(f"{element_type}[2,50003]", f"{element_type}[2]", "1", init=init, reducer=reducer,
                       element_type=element_type)
    rng = np.random.default_rng(1)
    dtype = parse_module(text).entry.root.shape.dtype
    if element_type == "pred":
        x = rng.random((2, 50003)) < 1e-4
    elif dtype.kind == "f":
        x = rng.normal(size=(2, 50003)).astype(dtype)
        x[0, 777] = np.nan
        x[1, :] = -np.inf if op == "minimum" else np.inf
        x[1, 40000] = np.float32(-0.0) if op == "minimum" else np.float32(0.0)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, size=(2, 50003), endpoint=True, dtype=dtype)
        if op == "multiply":
            x = (x | 1).astype(dtype)  # odd factors: the product does not vanish
    got = _split_and_compile(text)(x)
    expected = xlapy.evaluate(parse_module(text), x)
    assert np.asarray(got).tobytes() == np.asarray(expected).tobytes()


def _rows_with_ties(rows: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(2)
    x = rng.integers(-20, 20, size=(rows, n)).astype(np.float32)  # many equal values
    x[1, 4000] = np.nan
    x[1, 9000] = np.nan
    x[2, :] = -np.inf
    x[3, :] = 0.0
    x[3, 5000::700] = -0.0  # the value output keeps the last of equal values: its sign shows
    x[4, 6000] = 100.0
    x[4, 7000] = 100.0
    return x


def test_argmax_matches_the_interpreter_bit_for_bit():
    text = _argmax_module(5, 10007)  # two rows of 4992 and a remainder of 23 per output
    x = _rows_with_ties(5, 10007)
    got = _split_and_compile(text)(x)
    expected = xlapy.evaluate(parse_module(text), x)
    for g, e in zip(got, expected):
        assert np.asarray(g).tobytes() == np.asarray(e).tobytes()


def test_argmin_of_jax_matches_xla_cpu():
    """``jnp.argmin`` of two long rows, split by the pipeline's own thresholds, against XLA:CPU."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from xlapy.frontends.jax import jit

    x = -_rows_with_ties(5, 1 << 20)[1:3]  # a NaN row and a row of +inf

    def argmin(a):
        return jnp.argmin(a, axis=1)

    np.testing.assert_array_equal(jit(argmin)(x), np.asarray(jax.jit(argmin)(x)))


def test_large_sums_match_xla_cpu():
    """``jnp.sum`` of f32[16777219] (64 rows of 262144 and the 3 elements after them, then the 65 sums) against
    XLA:CPU's sum: of -1, 0
    and 1, whose partial sums are all exact, the same value; of normal values, within the bound of the split's
    order of the exact sum (XLA's order is not known: any order's bound, ``gamma(n)``, is void at this ``n``)."""
    jax = pytest.importorskip("jax")
    import jax.numpy as jnp

    from xlapy.frontends.jax import jit

    n = (1 << 24) + 3
    rng = np.random.default_rng(3)
    signs = rng.integers(-1, 2, size=n).astype(np.float32)
    assert float(jit(jnp.sum)(signs)) == float(jax.jit(jnp.sum)(signs)) == float(np.sum(signs, dtype=np.int64))
    x = rng.normal(size=n).astype(np.float32) + np.float32(0.25)
    inner = n // 64 // 64 * 64
    magnitude = float(np.sum(np.abs(x.astype(np.float64))))
    depth = max(_depth(inner, inner, True), _depth(n - 64 * inner, n - 64 * inner, True)) + _depth(65, 65, True)
    bound = (_gamma(depth, np.float32) + _gamma(n, np.float64)) * magnitude
    assert abs(float(jit(jnp.sum)(x)) - float(np.sum(x.astype(np.float64)))) <= bound
