"""Reductions, reduce-window and dynamic-update-slice inside loop fusions, compiled for the CPU with
``xlapy.compile`` and compared with the reference interpreter.

The modules of ``data/loop_fusions`` named ``reduce_*``, ``reduce_window_*`` and ``dynamic_update_slice_*`` run in
``test_loop_fusions.py`` at 0 ulp: integer, pred, min/max and argmax reductions do not depend on the order of the
elements, and reduce-window and bf16 sums combine in the order the interpreter uses too (window positions, and the
reduced elements of a non-numpy type, in row-major order).

Float sums over a reduce are where the orders differ. The loop emitter follows XLA's elemental order: the
accumulator starts at the init value and takes the reduced elements one by one in row-major order of the reduced
dimensions (``acc = reducer(acc, x)``); the interpreter sums with numpy, which adds pairwise along a contiguous
axis and the init value last. Here such results are compared

- bit for bit with that sequential order computed with numpy in the element type, and
- with the interpreter within ``2 * gamma(n) * sum(|x|)`` per output element (``gamma(n) = n*u / (1 - n*u)``,
  ``u`` half an ulp of 1, ``n`` the number of terms, the init value included): each of the two sums is within
  ``gamma(n) * sum(|x|)`` of the exact sum (Higham, Accuracy and Stability of Numerical Algorithms, 4.2), on
  finite inputs that do not overflow.
"""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tests.codegen.emitter_cases import assert_sum_within_bound
from tools.loop_fusion_compare import assert_within_ulps, random_arguments
from tools.loop_fusion_corpus import single_fusion
from xlapy.codegen.fusion_checks import unsupported_fused_ops
from xlapy.codegen.partitioner import partition
from xlapy.errors import UnimplementedError

_ADD = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def _compile(text: str):
    return xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)


def _sequential_sum(x: np.ndarray, init: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """``init + x0 + x1 + ...`` over ``axes`` in row-major order, rounded after every addition in x's type."""
    kept = [d for d in range(x.ndim) if d not in axes]
    flat = np.transpose(x, kept + list(axes)).reshape([x.shape[d] for d in kept] + [-1])
    accumulator = np.full(flat.shape[:-1], init, x.dtype)
    for k in range(flat.shape[-1]):
        accumulator = accumulator + flat[..., k]
    return accumulator


@pytest.mark.parametrize(("dtype", "shape", "axes"), [
    ("f32", (7, 300), (1,)),         # the minor dimension: numpy adds it pairwise
    ("f32", (40, 3, 9), (0, 2)),     # two dimensions around a kept one
    ("f64", (5, 130), (0, 1)),       # everything, to a scalar
])
def test_float_sum_in_xla_elemental_order(dtype: str, shape: tuple[int, ...], axes: tuple[int, ...]):
    dims = ",".join(map(str, shape))
    kept = [n for d, n in enumerate(shape) if d not in axes]
    result = f"{dtype}[{','.join(map(str, kept))}]"
    text = single_fusion(
        [f"{dtype}[{dims}]", f"{dtype}[]"],
        [f"ROOT r = {result} reduce(p0, p1), dimensions={{{','.join(map(str, axes))}}}, to_apply=add"],
        result, _ADD.replace("f32", dtype))
    module = xlapy.parse_hlo(text)
    x = np.random.default_rng(1).normal(size=shape).astype(dtype.replace("f", "float"))
    init = x.dtype.type(0.375)
    got = _compile(text)(x, init)
    np.testing.assert_array_equal(got, _sequential_sum(x, init, axes))
    assert_sum_within_bound(got, xlapy.evaluate(module, x, init), x, float(init), axes)


def test_softmax_with_two_reductions():
    """max and sum over rows, with exponentials between: the sum within the bound above (its terms are the
    exponentials, which may be 1 ulp off the interpreter's: 1 more ulp per term, covered by the extra u*sum)."""
    text = single_fusion(["f32[8,65]"], [
        "lowest = f32[] constant(-inf)",
        "row_max = f32[8] reduce(p0, lowest), dimensions={1}, to_apply=max",
        "spread_max = f32[8,65] broadcast(row_max), dimensions={0}",
        "shifted = f32[8,65] subtract(p0, spread_max)",
        "e = f32[8,65] exponential(shifted)",
        "zero = f32[] constant(0)",
        "row_sum = f32[8] reduce(e, zero), dimensions={1}, to_apply=add",
        "spread_sum = f32[8,65] broadcast(row_sum), dimensions={0}",
        "ROOT softmax = f32[8,65] divide(e, spread_sum)",
    ], "f32[8,65]", _ADD + _ADD.replace("add", "max").replace("ROOT s = f32[] max", "ROOT s = f32[] maximum"))
    module = xlapy.parse_hlo(text)
    (x,) = random_arguments(module, 0, specials=False)
    got = _compile(text)(x)
    expected = xlapy.evaluate(module, x)
    # Relative: the sum of positive terms by (2 * gamma(66) + u), the exponential and the division 1 ulp each.
    u = np.finfo(np.float32).eps / 2
    n = 66
    bound = 2 * n * u / (1 - n * u) + 5 * u
    np.testing.assert_array_less(np.abs(got.astype(np.float64) - expected) / np.abs(expected), bound)
    np.testing.assert_allclose(got.sum(axis=1), 1, rtol=1e-5)


def test_complex_sum():
    """c64 sums add the real and the imaginary parts separately, in the order above."""
    text = single_fusion(["c64[6,33]"], ["zero = c64[] constant((0, 0))",
                                         "ROOT r = c64[6] reduce(p0, zero), dimensions={1}, to_apply=add"],
                         "c64[6]", _ADD.replace("f32", "c64"))
    random = np.random.default_rng(2)
    x = (random.normal(size=(6, 33)) + 1j * random.normal(size=(6, 33))).astype(np.complex64)
    got = _compile(text)(x)
    zero = np.float32(0)
    np.testing.assert_array_equal(got.real, _sequential_sum(x.real, zero, (1,)))
    np.testing.assert_array_equal(got.imag, _sequential_sum(x.imag, zero, (1,)))


def test_argmax_through_get_tuple_element_with_another_output():
    """A variadic reduce read by get-tuple-element: both its results and an elementwise output of the fusion."""
    reducer = """
argmax {
  va = s32[] parameter(0)
  ia = s32[] parameter(1)
  vb = s32[] parameter(2)
  ib = s32[] parameter(3)
  greater = pred[] compare(va, vb), direction=GT
  equal = pred[] compare(va, vb), direction=EQ
  earlier = pred[] compare(ia, ib), direction=LT
  tie = pred[] and(equal, earlier)
  take_a = pred[] or(greater, tie)
  v = s32[] select(take_a, va, vb)
  i = s32[] select(take_a, ia, ib)
  ROOT r = (s32[], s32[]) tuple(v, i)
}
"""
    text = single_fusion(["s32[4,9,5]", "s32[4,5]"], [
        "positions = s32[4,9,5] iota(), iota_dimension=1",
        "lowest = s32[] constant(-2147483648)",
        "zero = s32[] constant(0)",
        "argmax = (s32[4,5], s32[4,5]) reduce(p0, positions, lowest, zero), dimensions={1}, to_apply=argmax",
        "value = s32[4,5] get-tuple-element(argmax), index=0",
        "index = s32[4,5] get-tuple-element(argmax), index=1",
        "shifted = s32[4,5] add(value, p1)",
        "ROOT outputs = (s32[4,5], s32[4,5], s32[4,5]) tuple(index, shifted, value)",
    ], "(s32[4,5], s32[4,5], s32[4,5])", reducer)
    module = xlapy.parse_hlo(text)
    args = random_arguments(module, 0)
    args[0][:, 3, :] = args[0][:, 6, :]  # ties: the first index wins
    got = _compile(text)(*args)
    expected = xlapy.evaluate(module, *args)
    assert_within_ulps(got, expected, module, 0)
    np.testing.assert_array_equal(got[0], np.argmax(args[0], axis=1))


def test_reduce_of_a_reduce_and_reduce_window_of_a_producer():
    text = single_fusion(["s64[6,10,4]"], [
        "zero = s64[] constant(0)",
        "squares = s64[6,10,4] multiply(p0, p0)",
        "rows = s64[6,4] reduce(squares, zero), dimensions={1}, to_apply=add",
        "negated = s64[6,4] negate(rows)",
        "total = s64[4] reduce(negated, zero), dimensions={0}, to_apply=add",
        "windows = s64[4] reduce-window(total, zero), window={size=3 pad=1_1}, to_apply=add",
        "ROOT result = s64[4] subtract(windows, total)",
    ], "s64[4]", _ADD.replace("f32", "s64"))
    module = xlapy.parse_hlo(text)
    args = random_arguments(module, 0)
    assert_within_ulps(_compile(text)(*args), xlapy.evaluate(module, *args), module, 0)


def test_a_reduction_input_is_computed_by_its_own_function():
    """The partitioner keeps a reduce's input out of the reduce's function: the reduce reads it at indices with
    range variables (many elements per output element), so it is a function called in the reduction loop. The
    reduce then reads another function's value at other indices than its own, so it roots a function too (the
    partitioner's rule for index-changing instructions); its init value goes with it."""
    module = xlapy.parse_hlo(single_fusion(["f32[4,6]"], [
        "e = f32[4,6] negate(p0)",
        "z = f32[] constant(0)",
        "r = f32[4] reduce(e, z), dimensions={1}, to_apply=add",
        "ROOT n = f32[4] negate(r)",
    ], "f32[4]", _ADD))
    subgraphs = partition(module.computation("fused")).subgraphs
    assert [[i.name for i in s.instructions] for s in subgraphs] == [["n"], ["z", "r"], ["e"]]


def test_reducer_ops_without_rules_are_named():
    reducer = """
strange {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  ROOT c = f32[] custom-call(s), custom_call_target="unknown"
}
"""
    text = single_fusion(["f32[4,6]"], ["z = f32[] constant(0)",
                                        "ROOT r = f32[4] reduce(p0, z), dimensions={1}, to_apply=strange"],
                         "f32[4]", reducer)
    module = xlapy.parse_hlo(text)
    fusion = module.entry.root
    assert unsupported_fused_ops(fusion) == ["custom-call (c) in strange in fusion fusion"]
    with pytest.raises(UnimplementedError, match=r"custom-call \(c\) in strange in fusion fusion"):
        xlapy.compile(module, run_hlo_passes=False)


_BATCHED_DOT = ("ROOT d = {t}[3,5,4] dot(n, p1), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, "
                "lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}")


def _batched_dot_module(element_type: str) -> str:
    return single_fusion([f"{element_type}[3,5,37]", f"{element_type}[3,37,4]"],
                         [f"n = {element_type}[3,5,37] negate(p0)", _BATCHED_DOT.format(t=element_type)],
                         f"{element_type}[3,5,4]")


def _sequential_dot(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """``acc = acc + lhs[b, i, k] * rhs[b, k, j]`` for k in order, from zero, rounded after each operation."""
    accumulator = np.zeros((lhs.shape[0], lhs.shape[1], rhs.shape[2]), lhs.dtype)
    for k in range(lhs.shape[2]):
        accumulator = accumulator + lhs[:, :, k, None] * rhs[:, None, k, :]
    return accumulator


@pytest.mark.parametrize("element_type", ["f32", "c64"])
def test_dot_in_xla_elemental_order(element_type: str):
    """A batched dot of a negated operand: the products added in order of the contracting index, compared with
    the interpreter within ``2 * gamma(n) * sum(|lhs * rhs|)``, and for f32 bit for bit with that order (complex
    products are contracted into fused multiply-adds, as XLA:CPU computes them, which numpy does not)."""
    text = _batched_dot_module(element_type)
    module = xlapy.parse_hlo(text)
    lhs, rhs = random_arguments(module, 0, specials=False)
    got = _compile(text)(lhs, rhs)
    if element_type == "f32":
        np.testing.assert_array_equal(got, _sequential_dot(-lhs, rhs))
    expected = xlapy.evaluate(module, lhs, rhs)
    u = np.finfo(np.float32).eps / 2
    gamma = 38 * u / (1 - 38 * u)
    magnitude = np.einsum("bik,bkj->bij", np.abs(lhs.astype(np.complex128)), np.abs(rhs.astype(np.complex128)))
    # Complex products carry a rounding of their own (up to sqrt(2) * 2u relative, Higham 3.6); 4u covers it.
    bound = (2 * gamma + (4 * u if element_type == "c64" else 0)) * magnitude.real
    assert np.all(np.abs(got - expected) <= bound)


@pytest.mark.parametrize(("params", "dot", "result"), [
    (["s32[3,5,37]", "s32[3,37,4]"], _BATCHED_DOT.format(t="s32"), "s32[3,5,4]"),    # wraps around
    (["s8[4,9]", "s8[9]"], "ROOT d = s32[4] dot(n, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
     "s32[4]"),                                                                       # mixed precision
    (["pred[4,9]", "pred[9,2]"],
     "ROOT d = pred[4,2] dot(n, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}", "pred[4,2]"),
    (["bf16[6,1]", "bf16[1,5]"],  # no contraction: the product alone (signed zeros and specials too)
     "ROOT d = f32[6,5] dot(n, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}", "f32[6,5]"),
])
def test_exact_dots(params: list[str], dot: str, result: str):
    negate = f"n = {params[0]} {'not' if params[0].startswith('pred') else 'negate'}(p0)"
    text = single_fusion(params, [negate, dot], result)
    module = xlapy.parse_hlo(text)
    args = random_arguments(module, 0)
    assert_within_ulps(_compile(text)(*args), xlapy.evaluate(module, *args), module, 0)
