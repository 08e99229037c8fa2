"""Complex elementwise ops computed as XLA:CPU computes them, one function per opcode in ``COMPLEX_RULES``.

Each is XLA's formula on the real and imaginary parts, in the parts' type (f32 for c64, f64 for c128):

- multiply: re = fma(ar, br, -(ai bi)), im = fma(ai, br, ar bi): (ar br - ai bi, ai br + ar bi) as LLVM contracts
  it on hosts with FMA (bit for bit what XLA:CPU computes there, vectorized or not).
- divide: Smith's algorithm with its sums contracted into fused multiply-adds, and XLA's results where it gives NaN
  in both parts: a zero divisor (unless both dividend parts are NaN), an infinite dividend over a finite divisor, a
  finite dividend over an infinite divisor.
- abs: max * sqrt(fma(r, r, 1)) with r = min / max of the parts' magnitudes, and min where that is NaN (so
  |inf + NaN i| is NaN, and |inf + inf i| is inf).
- sign: z / |z|, each part divided by that magnitude; z itself (signed zeros kept) where both parts are 0.
- rsqrt: polar: |z|^-1/2 (cos t + i sin t), t = -arg(z) / 2, |z|^-1/2 = rsqrt(max) sqrt(rsqrt(1 + r^2)); ±0 where
  a part is infinite, inf + NaN i at 0.
- log-plus-one: StableHLO's expansion: re = log(max) + log1p(r^2) / 2 for huge |z|, log((x+1)^2 + y^2) / 2 near -1,
  else log1p(x^2 + 2x + y^2) / 2 with that sum computed in double-word arithmetic (no cancellation for small z);
  im = atan2(y, x + 1).
- logistic: 1 / (1 + e^-z), dividing as divide does.
- power: |x|^c e^(-d arg x) (cos q + i sin q) with q = c arg x + d ln|x|, |x| as abs computes it, and Kahan's
  special cases.

The real functions they call (log, log1p, atan2, cos, sin, exp, pow) are the C library's (``libm``), within an
ulp or so of XLA's own approximations, so results are as close to XLA's as XLA's accuracy allows. The other
complex functions (exp, log, sqrt, expm1, sin, cos, tan, tanh) are numpy's: C99's `cexp`, `clog`, ... and numpy's
own formulas on the C library's functions.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from xlapy.interpreter.libm import c_function, fused_multiply_add
from xlapy.registry import registrar

ComplexRule = Callable[..., np.ndarray]

# opcode -> function of the operands' values (complex arrays).
COMPLEX_RULES: dict[str, ComplexRule] = {}
_complex_rule = registrar(COMPLEX_RULES, "complex rules")


def compose(real: np.ndarray, imag: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """The complex array of these parts, assigned part by part: arithmetic would lose the signs of zeros."""
    real, imag = np.broadcast_arrays(real, imag)
    result = np.empty(real.shape, dtype)
    result.real, result.imag = real, imag
    return result


def _constant(value: float, like: np.ndarray) -> np.ndarray:
    return np.asarray(value, like.dtype)


@_complex_rule("multiply")
def product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    (ar, ai), (br, bi) = (a.real, a.imag), (b.real, b.imag)
    return compose(fused_multiply_add(ar, br, -(ai * bi)), fused_multiply_add(ai, br, ar * bi), a.dtype)


@_complex_rule("divide")
def quotient(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    (ar, ai), (br, bi) = (a.real, a.imag), (b.real, b.imag)
    fma = fused_multiply_add
    # Smith's algorithm: divide through by the larger part of the divisor.
    ratio = br / bi
    denominator = fma(ratio, br, bi)
    by_imag = fma(ar, ratio, ai) / denominator, fma(ai, ratio, -ar) / denominator
    ratio = bi / br
    denominator = fma(ratio, bi, br)
    by_real = fma(ai, ratio, ar) / denominator, fma(-ar, ratio, ai) / denominator
    real_smaller = np.abs(br) < np.abs(bi)
    real, imag = (np.where(real_smaller, i, r) for i, r in zip(by_imag, by_real))

    one, zero, inf = _constant(1, ar), _constant(0, ar), _constant(np.inf, ar)

    def unit(x: np.ndarray) -> np.ndarray:  # ±1 where x is infinite, else ±0, with x's sign
        return np.copysign(np.where(np.abs(x) == inf, one, zero), x)

    finite_dividend, finite_divisor = np.isfinite(ar) & np.isfinite(ai), np.isfinite(br) & np.isfinite(bi)
    zero_divisor = (br == 0) & (bi == 0) & ~(np.isnan(ar) & np.isnan(ai))
    signed_inf = np.copysign(inf, br)
    (ar_unit, ai_unit), (br_unit, bi_unit) = (unit(ar), unit(ai)), (unit(br), unit(bi))
    cases = [  # by priority, lowest first
        (finite_dividend & (np.isinf(br) | np.isinf(bi)),
         zero * (ar * br_unit + ai * bi_unit), zero * (ai * br_unit - ar * bi_unit)),
        ((np.isinf(ar) | np.isinf(ai)) & finite_divisor,
         inf * (ar_unit * br + ai_unit * bi), inf * (ai_unit * br - ar_unit * bi)),
        (zero_divisor, signed_inf * ar, signed_inf * ai),
    ]
    smith_failed = np.isnan(real) & np.isnan(imag)
    special_real, special_imag = real, imag
    for condition, case_real, case_imag in cases:
        special_real = np.where(condition, case_real, special_real)
        special_imag = np.where(condition, case_imag, special_imag)
    return compose(np.where(smith_failed, special_real, real), np.where(smith_failed, special_imag, imag), a.dtype)


def magnitude(z: np.ndarray) -> np.ndarray:
    """XLA's |z| (see the module docstring)."""
    re, im = np.abs(z.real), np.abs(z.imag)
    larger, smaller = np.maximum(re, im), np.minimum(re, im)  # NaN-propagating, as LLVM's maximum/minimum
    ratio = smaller / larger
    value = larger * np.sqrt(fused_multiply_add(ratio, ratio, _constant(1, ratio)))
    return np.where(np.isnan(value), smaller, value)


@_complex_rule("abs")
def _abs(z: np.ndarray) -> np.ndarray:
    return magnitude(z)


@_complex_rule("sign")
def sign(z: np.ndarray) -> np.ndarray:
    length = magnitude(z)
    zero = (z.real == 0) & (z.imag == 0)
    return np.where(zero, z, compose(z.real / length, z.imag / length, z.dtype))


def _real_rsqrt(x: np.ndarray) -> np.ndarray:
    return _constant(1, x) / np.sqrt(x)


@_complex_rule("rsqrt")
def rsqrt(z: np.ndarray) -> np.ndarray:
    re, im = z.real, z.imag
    abs_re, abs_im = np.abs(re), np.abs(im)
    larger, smaller = np.maximum(abs_re, abs_im), np.minimum(abs_re, abs_im)
    ratio = smaller / larger
    one_plus_square = fused_multiply_add(ratio, ratio, _constant(1, ratio))
    scale = _real_rsqrt(larger) * np.sqrt(_real_rsqrt(one_plus_square))
    scale = np.where(np.isnan(scale), _real_rsqrt(smaller), scale)
    angle = c_function("atan2", im, re) * _constant(-0.5, re)
    real, imag = scale * c_function("cos", angle), scale * c_function("sin", angle)
    inf, zero = _constant(np.inf, re), _constant(0, re)
    vanishing = ((abs_im == inf) & np.isnan(re)) | (abs_re == inf)
    real = np.where(vanishing, np.copysign(zero, re), real)
    imag = np.where(vanishing, -np.copysign(zero, im), imag)
    at_zero = (re == 0) & (im == 0)
    return compose(np.where(at_zero, inf, real), np.where(at_zero, _constant(np.nan, re), imag), z.dtype)


def _split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Veltkamp's split: x = high + low, each with half of x's significand, so products of halves are exact."""
    bits = np.finfo(x.dtype).nmant + 1
    scaled = x * _constant(2 ** ((bits + 1) // 2) + 1, x)
    high = scaled + (x - scaled)
    return high, x - high


def _square_error(x: np.ndarray, square: np.ndarray) -> np.ndarray:
    """x * x - square, exactly (``square`` being x * x rounded): Dekker's product."""
    high, low = _split(x)
    cross = high * low
    return ((-square + high * high) + cross + cross) + low * low


def _sum_error(total: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b - total, exactly (``total`` being a + b rounded): Knuth's two-sum."""
    b_part = total - a
    return (a - (total - b_part)) + (b - b_part)


def _log1p_of_sum(x: np.ndarray, y: np.ndarray, y_squared: np.ndarray) -> np.ndarray:
    """log1p(2x + y^2 + x^2) / 2, the sum and its rounding errors added up in the order of StableHLO's expansion."""
    two_x = x + x
    s1 = two_x + y_squared
    x_squared = x * x
    s2 = s1 + x_squared
    y_error = _square_error(y, y_squared)
    s3 = s2 + y_error
    x_error = _square_error(x, x_squared)
    s4 = s3 + x_error
    errors = ((_sum_error(s1, two_x, y_squared) + _sum_error(s2, s1, x_squared)) + _sum_error(s3, s2, y_error)) \
        + _sum_error(s4, s3, x_error)
    return c_function("log1p", s4 + errors) * _constant(0.5, x)


@_complex_rule("log-plus-one")
def log_plus_one(z: np.ndarray) -> np.ndarray:
    x, y = z.real, z.imag
    one, half = _constant(1, x), _constant(0.5, x)
    abs_x, abs_y = np.abs(x), np.abs(y)
    larger, smaller = np.maximum(abs_x, abs_y), np.minimum(abs_x, abs_y)
    ratio = smaller / larger
    # Huge |z|: log|z| = log(larger) + log1p((smaller / larger)^2) / 2, without overflow.
    squared_ratio = np.where(smaller == larger, one, ratio * ratio)
    huge = c_function("log", larger) + c_function("log1p", squared_ratio) * half
    x_plus_one = x + one
    y_squared = y * y
    # Near z = -1: log|z + 1| directly.
    near_minus_one = c_function("log", fused_multiply_add(x_plus_one, x_plus_one, y_squared)) * half
    large = np.sqrt(np.finfo(x.dtype).max) * _constant(0.01, x)
    real = np.where(larger > large, huge,
                    np.where(np.abs(x_plus_one) + abs_y < _constant(0.2, x), near_minus_one,
                             _log1p_of_sum(x, y, y_squared)))
    return compose(real, c_function("atan2", y, x_plus_one), z.dtype)


@_complex_rule("logistic")
def logistic(z: np.ndarray) -> np.ndarray:
    one = np.ones_like(z)
    return quotient(one, one + np.exp(-z))


@_complex_rule("power")
def power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """(a+bi)^(c+di) = |x|^c e^(-d arg x) (cos q + i sin q), q = c arg x + d ln|x| (its sum contracted), with
    XLA's special cases (Kahan's): x^0 = 1, 0^c = 0 for real c > 0, 1^y = 1, inf^c = inf for real c > 0 and 0 for
    real c < 0."""
    x, y = np.broadcast_arrays(x, y)
    a, b, c, d = x.real, x.imag, y.real, y.imag
    length = magnitude(x)
    angle = c_function("atan2", b, a)
    coefficient = c_function("pow", length, c) * c_function("exp", -d * angle)
    q = fused_multiply_add(c, angle, d * c_function("log", length))
    value = compose(coefficient * c_function("cos", q), coefficient * c_function("sin", q), x.dtype)
    zero = _constant(0, a)
    real_exponent, real_base = d == zero, b == zero
    cases = [  # later cases win
        ((length == zero) & real_exponent & (c >= zero), np.where(c == zero, 1, 0)),
        ((c == zero) & real_exponent, 1),
        ((a == 1) & real_base, 1),
        ((a == np.inf) & real_base & real_exponent & (c > zero), np.inf),
        ((a == np.inf) & real_base & real_exponent & (c < zero), 0),
    ]
    for condition, special in cases:
        value = np.where(condition, np.asarray(special).astype(x.dtype), value)
    return value
