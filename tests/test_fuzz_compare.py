"""The fuzzer's comparison of compiled results with the interpreter's (``tools/fuzz/compare.py``): float sums in
another order are allowed their bound (``tools/fuzz/error_bounds.py``), carried through the ops that use them,
and no more; modules no such bound covers are not compared."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.fuzz.compare import difference, result_slack, uncomparable
from tools.fuzz.error_bounds import Unbounded, result_bounds

_ROW_SUMS = """HloModule row_sums
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }}
fused {{
  x = f32[64,4096] parameter(0)
  zero = f32[] constant(0)
  sums = f32[64] reduce(x, zero), dimensions={{1}}, to_apply=add
  ROOT out = {root}
}}
ENTRY e {{
  x = f32[64,4096] parameter(0)
  ROOT f = {shape} fusion(x), kind=kLoop, calls=fused
}}
"""


def _module(root: str = "f32[64] copy(sums)", shape: str = "f32[64]") -> str:
    return _ROW_SUMS.format(root=root, shape=shape)


def _arguments(seed: int) -> list[np.ndarray]:
    # Signs mixed, so that sums cancel and their results are far from their magnitudes.
    return [np.random.default_rng(seed).standard_normal((64, 4096)).astype(np.float32)]


@pytest.mark.parametrize("seed", [0, 1])
def test_sums_in_another_order_are_within_their_slack_and_a_larger_error_is_not(seed: int) -> None:
    text = _module()
    module = xlapy.parse_hlo(text)
    args = _arguments(seed)
    got = np.asarray(xlapy.compile(xlapy.parse_hlo(text))(*args))
    expected = np.asarray(xlapy.evaluate(module, *args))
    slack = result_slack(text, args)
    assert uncomparable(module) == "" and slack is not None
    assert difference(got, expected, module, slack) == ""
    # The bound is Higham's 2 * gamma(4097) * sum(|x|) of each row, as numpy computes the magnitudes.
    u = np.finfo(np.float32).eps / 2
    magnitudes = np.abs(args[0].astype(np.float64)).sum(axis=1)
    np.testing.assert_allclose(slack[0], 2 * (4097 * u / (1 - 4097 * u)) * magnitudes, rtol=1e-5)
    wrong = expected.copy()
    wrong[7] += np.float32(3 * slack[0][7])
    assert "allowed for the order of its sums" in difference(wrong, expected, module, slack)


@pytest.mark.parametrize(("root", "shape", "why"), [
    ("s32[64] convert(sums)", "s32[64]", "feed convert out, to s32"),
    ("f32[64] power(sums, sums)", "f32[64]", "feed power out, which has no rule"),
])
def test_sums_feeding_ops_without_a_rule_are_not_compared(root: str, shape: str, why: str) -> None:
    module = xlapy.parse_hlo(_module(root, shape))
    assert why in uncomparable(module)
    with pytest.raises(Unbounded, match=why):
        result_bounds(module, _arguments(0))


@pytest.mark.parametrize(("root", "shape"), [
    ("f64[64] convert(sums)", "f64[64]"),  # widened: no rounding
    ("f32[8,8] reshape(sums)", "f32[8,8]"),
    ("f32[64] multiply(sums, sums)", "f32[64]"),  # the sum's error grows through the product
    ("f32[64] exponential(sums)", "f32[64]"),
])
def test_sums_reaching_the_results_through_ops_with_rules_are_compared(root: str, shape: str) -> None:
    text = _module(root, shape)
    module = xlapy.parse_hlo(text)
    args = _arguments(3)
    assert uncomparable(module) == ""
    got = xlapy.compile(xlapy.parse_hlo(text))(*args)
    assert difference(got, xlapy.evaluate(module, *args), module, result_slack(text, args)) == ""


def test_exact_reductions_have_no_slack() -> None:
    text = _module().replace("add(a, b)", "maximum(a, b)")
    module = xlapy.parse_hlo(text)
    assert uncomparable(module) == "" and result_slack(text, _arguments(4)) is None


# Softmax and layernorm over rows, as jax writes them: the sums feed a divide, a subtract, a square, an rsqrt.
_NORMALIZATIONS = """HloModule normalizations
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT m = f32[] maximum(a, b) }
ENTRY e {
  x = f32[32,2048] parameter(0)
  low = f32[] constant(-inf)
  zero = f32[] constant(0)
  peak = f32[32] reduce(x, low), dimensions={1}, to_apply=max
  peaks = f32[32,2048] broadcast(peak), dimensions={0}
  shifted = f32[32,2048] subtract(x, peaks)
  e = f32[32,2048] exponential(shifted)
  total = f32[32] reduce(e, zero), dimensions={1}, to_apply=add
  totals = f32[32,2048] broadcast(total), dimensions={0}
  softmax = f32[32,2048] divide(e, totals)
  n = f32[] constant(2048)
  ns = f32[32] broadcast(n), dimensions={}
  sum = f32[32] reduce(x, zero), dimensions={1}, to_apply=add
  mean = f32[32] divide(sum, ns)
  means = f32[32,2048] broadcast(mean), dimensions={0}
  centred = f32[32,2048] subtract(x, means)
  squares = f32[32,2048] multiply(centred, centred)
  square_sum = f32[32] reduce(squares, zero), dimensions={1}, to_apply=add
  variance = f32[32] divide(square_sum, ns)
  eps = f32[] constant(1e-5)
  epss = f32[32] broadcast(eps), dimensions={}
  shifted_variance = f32[32] add(variance, epss)
  scale = f32[32] rsqrt(shifted_variance)
  scales = f32[32,2048] broadcast(scale), dimensions={0}
  layernorm = f32[32,2048] multiply(centred, scales)
  ROOT both = (f32[32,2048], f32[32,2048]) tuple(softmax, layernorm)
}
"""


def _normalization_arguments(seed: int) -> list[np.ndarray]:
    return [(np.random.default_rng(seed).standard_normal((32, 2048)) * 3 + 1).astype(np.float32)]


@pytest.mark.parametrize("seed", [0, 1])
def test_normalizations_compiled_are_within_their_bounds_and_a_larger_error_is_not(seed: int) -> None:
    module = xlapy.parse_hlo(_NORMALIZATIONS)
    args = _normalization_arguments(seed)
    got = xlapy.compile(xlapy.parse_hlo(_NORMALIZATIONS))(*args)
    expected = xlapy.evaluate(module, *args)
    slack = result_slack(_NORMALIZATIONS, args)
    assert uncomparable(module) == "" and slack is not None and all(s is not None for s in slack)
    assert difference(got, expected, module, slack) == ""
    for index, (bound, value) in enumerate(zip(slack, expected)):
        # Bounds that say something: well below the values' own size (a sum of the wrong elements moves them by that).
        assert np.max(bound) < 1e-3 * np.max(np.abs(value))
        wrong = [np.array(v) for v in expected]
        wrong[index][5, 17] += np.float32(3 * bound[5, 17] + 1e-6)
        assert "allowed for the order of its sums" in difference(tuple(wrong), expected, module, slack)


def test_normalization_bounds_cover_the_interpreter_on_rows_in_reverse() -> None:
    # The rows reversed are the same values summed in another order: the interpreter's own results on them,
    # reversed back, are within the bounds of the results on the rows as they are.
    module = xlapy.parse_hlo(_NORMALIZATIONS)
    args = _normalization_arguments(2)
    expected = xlapy.evaluate(module, *args)
    reversed_back = [np.asarray(v)[:, ::-1] for v in xlapy.evaluate(module, args[0][:, ::-1].copy())]
    assert difference(tuple(reversed_back), expected, module, result_slack(_NORMALIZATIONS, args)) == ""


@pytest.mark.parametrize(("function", "low"), [("exponential", -3.0), ("log", 0.5), ("rsqrt", 0.5), ("tanh", -3.0),
                                               ("sqrt", 0.5), ("logistic", -3.0)])
def test_a_function_of_a_sum_moves_no_more_than_its_bound(function: str, low: float) -> None:
    # Sums of 512 terms, perturbed by up to their order's bound: the function's results move by less than theirs.
    text = f"""HloModule f
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }}
ENTRY e {{ x = f32[16,512] parameter(0)  zero = f32[] constant(0)
          s = f32[16] reduce(x, zero), dimensions={{1}}, to_apply=add
          ROOT f = f32[16] {function}(s) }}
"""
    rng = np.random.default_rng(7)
    x = (rng.uniform(0, 1, (16, 512)) * (2 / 512) + low / 512).astype(np.float32)
    module = xlapy.parse_hlo(text)
    bound = result_slack(text, [x])[0]
    sums_text = text.replace(f"ROOT f = f32[16] {function}(s)", "ROOT f = f32[16] copy(s)")
    sums, sum_bound = xlapy.evaluate(xlapy.parse_hlo(sums_text), x), result_slack(sums_text, [x])[0]
    expected = np.asarray(xlapy.evaluate(module, x), np.float64)
    for sign in (-1, 1):
        moved = (np.asarray(sums, np.float64) + sign * sum_bound).astype(np.float32)
        reference = np.asarray(xlapy.evaluate(xlapy.parse_hlo(f"""HloModule g
ENTRY e {{ s = f32[16] parameter(0)  ROOT f = f32[16] {function}(s) }}
"""), moved), np.float64)
        assert np.all(np.abs(reference - expected) <= bound)


def test_a_select_on_a_compare_of_a_sum_covers_either_side_where_the_compare_may_go_either_way() -> None:
    # relu of row sums: rows whose terms cancel to about 0, where another order may flip the comparison.
    text = _module("f32[64] select(positive, sums, zeros)").replace(
        "  ROOT out =", "  zeros = f32[64] broadcast(zero), dimensions={}\n"
        "  positive = pred[64] compare(sums, zeros), direction=GT\n  ROOT out =")
    rng = np.random.default_rng(5)
    half = rng.standard_normal((64, 2048)).astype(np.float32)
    x = np.concatenate([half, -half], axis=1)
    x = np.take_along_axis(x, rng.permuted(np.tile(np.arange(4096), (64, 1)), axis=1), axis=1)
    x[:32, 0] += np.float32(50)  # rows that stay positive whatever the order
    module = xlapy.parse_hlo(text)
    slack = result_slack(text, [x])
    sums_bound = result_slack(_module(), [x])[0]
    expected = xlapy.evaluate(module, x)
    assert uncomparable(module) == ""
    sums = np.asarray(xlapy.evaluate(xlapy.parse_hlo(_module()), x), np.float64)
    np.testing.assert_array_equal(slack[0][:32], sums_bound[:32])  # certain: the sum's own bound
    # Uncertain (each sum is within its bound of 0): either the sum or 0.
    assert np.all(np.abs(sums[32:]) <= sums_bound[32:])
    np.testing.assert_array_equal(slack[0][32:], sums_bound[32:] + np.abs(sums[32:]))
    assert difference(xlapy.compile(xlapy.parse_hlo(text))(x), expected, module, slack) == ""
    assert difference(xlapy.evaluate(module, x[:, ::-1].copy()), expected, module, slack) == ""


def test_window_sums_are_allowed_their_order_bound() -> None:
    text = """HloModule windows
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e { x = f32[8,4096] parameter(0)  zero = f32[] constant(0)
          w = f32[8,4033] reduce-window(x, zero), window={size=1x64}, to_apply=add
          ROOT t = f32[8,4033] negate(w) }
"""
    x = np.random.default_rng(6).standard_normal((8, 4096)).astype(np.float32) / 8
    module = xlapy.parse_hlo(text)
    slack = result_slack(text, [x])
    assert uncomparable(module) == ""
    # 2 gamma(65) times the windows' magnitudes, carried unchanged by the negation.
    u = np.finfo(np.float32).eps / 2
    magnitudes = np.stack([np.convolve(np.abs(row.astype(np.float64)), np.ones(64), "valid") for row in x])
    order = 2 * (65 * u / (1 - 65 * u)) * magnitudes
    assert np.all(slack[0] >= order) and np.all(slack[0] <= order * (1 + 1e-5) + 1e-40)
    assert difference(xlapy.compile(xlapy.parse_hlo(text))(x), xlapy.evaluate(module, x), module, slack) == ""


def test_a_compare_may_differ_only_where_its_operands_may_move_and_meet() -> None:
    from tools.fuzz.error_bounds import _RULES

    a = np.array([1.0, 1.0, 1.0, np.nan, 2.0], np.float32)
    b = np.array([1.0, 2.0, 1.5, 0.0, 2.0], np.float32)
    bound_a = np.array([0.0, 0.5, 0.6, 1.0, 0.0])
    instr = xlapy.parse_hlo("""HloModule m
ENTRY e { a = f32[5] parameter(0)  b = f32[5] parameter(1)  ROOT c = pred[5] compare(a, b), direction=EQ }
""").entry.root
    uncertain = _RULES["compare"](instr, [a, b], [bound_a, None], a == b, None)
    # equal but exact; 1 apart, 0.5 of room; 0.5 apart, 0.6 of room; NaN that may move; equal, exact again
    np.testing.assert_array_equal(uncertain, [0, 0, 1, 1, 0])
