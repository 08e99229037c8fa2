"""The fuzzer's comparison of compiled results with the interpreter's (``tools/fuzz/compare.py``): float sums in
another order are allowed their bound, and no more; modules no such bound covers are not compared."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.fuzz.compare import difference, magnitude_module, summation_slack, uncomparable

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
    slack = summation_slack(text, args)
    assert uncomparable(module) == "" and slack is not None
    assert difference(got, expected, module, slack) == ""
    # The bound is Higham's 2 * gamma(4097) * sum(|x|) of each row, as numpy computes the magnitudes.
    u = np.finfo(np.float32).eps / 2
    magnitudes = np.abs(args[0].astype(np.float64)).sum(axis=1)
    np.testing.assert_allclose(slack[0], 2 * (4097 * u / (1 - 4097 * u)) * magnitudes, rtol=1e-5)
    wrong = expected.copy()
    wrong[7] += np.float32(3 * slack[0][7])
    assert "allowed for the order of its sums" in difference(wrong, expected, module, slack)


def test_the_magnitude_module_adds_the_terms_magnitudes() -> None:
    args = _arguments(2)
    magnitudes = np.asarray(xlapy.evaluate(magnitude_module(_module()), *args), np.float64)
    np.testing.assert_allclose(magnitudes, np.abs(args[0].astype(np.float64)).sum(axis=1), rtol=1e-5)


@pytest.mark.parametrize(("root", "shape"), [
    ("f32[64] multiply(sums, sums)", "f32[64]"),  # the sum's error grows through the product
    ("f32[64] exponential(sums)", "f32[64]"),
])
def test_sums_feeding_other_ops_are_not_compared(root: str, shape: str) -> None:
    assert "feed other ops" in uncomparable(xlapy.parse_hlo(_module(root, shape)))


@pytest.mark.parametrize(("root", "shape"), [
    ("f64[64] convert(sums)", "f64[64]"),  # widened: no rounding
    ("f32[8,8] reshape(sums)", "f32[8,8]"),
])
def test_sums_reaching_the_results_through_carrying_ops_are_compared(root: str, shape: str) -> None:
    text = _module(root, shape)
    module = xlapy.parse_hlo(text)
    args = _arguments(3)
    assert uncomparable(module) == ""
    got = xlapy.compile(xlapy.parse_hlo(text))(*args)
    assert difference(got, xlapy.evaluate(module, *args), module, summation_slack(text, args)) == ""


def test_exact_reductions_have_no_slack() -> None:
    text = _module().replace("add(a, b)", "maximum(a, b)")
    module = xlapy.parse_hlo(text)
    assert uncomparable(module) == "" and summation_slack(text, _arguments(4)) is None
