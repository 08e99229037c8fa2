"""f32 tanh as XLA:CPU computes it: the one f32 transcendental that is not the exact value rounded once.

XLA's CPU backend evaluates f32 tanh (and f16/bf16 tanh, extended to f32) with an odd rational approximation in f32
arithmetic, the one Eigen uses (`EmitFastTanh` in openxla/xla `xla/codegen/intrinsic/tanh.cc`):

    tanh(x) ~= x P(x^2) / Q(x^2)

on x clamped to [-CLAMP, CLAMP] (where the approximation reaches 1 exactly, so that no result exceeds 1), with x
itself for |x| < IDENTITY_BELOW and +-1 for |x| >= ONE_FROM. Both polynomials are evaluated by Horner's scheme
with a fused multiply-add per step (XLA emits the steps with LLVM's `contract` flag, which fuses them on hosts with
FMA). The result is up to MAX_ULPS off the correctly rounded tanh.

The interpreter and the compiled code both compute this function, so that `tanh` means the same thing in both
and as in XLA:CPU, bit for bit (tests/codegen/test_tanh_f32.py checks every f32 against XLA:CPU through jaxlib).
The compiled form is `xlapy/codegen/backends/mathlib/tanh_f32.py`; this one is numpy's, with the fused
multiply-adds rounded once exactly (``fused_multiply_add``).
"""

from __future__ import annotations

import numpy as np

# x P(x^2) / Q(x^2): the coefficients of P and Q as f32, highest degree first.
NUMERATOR = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
             1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03)
DENOMINATOR = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)
# The clamp of the argument (the approximation is 1 exactly there, with fused multiply-adds), the magnitude below
# which tanh(x) is taken as x, and the one from which it is +-1.
CLAMP = 7.99881172180175781
IDENTITY_BELOW = 0.0004
ONE_FROM = 20.0
# The largest distance from the correctly rounded tanh, in ulps, over every f32 (reached at 3.7372892).
MAX_ULPS = 5


def fused_multiply_add(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c rounded once to f32, for f32 arrays of finite values.

    The product is exact in f64 (48 significant bits); the sum is rounded to f64 and its error recovered exactly
    (Knuth's two-sum). Rounding the f64 sum to f32 could round twice, so it is first rounded to odd: truncated
    toward zero, with its last bit set when inexact. A value rounded to odd with at least two more bits than the
    target rounds to the target as the exact value does."""
    product = a.astype(np.float64) * b.astype(np.float64)
    addend = c.astype(np.float64)
    total = product + addend
    virtual = total - product
    error = (product - (total - virtual)) + (addend - virtual)
    inexact = error != 0
    # |exact| < |total| where the error has the other sign: the truncation is total's neighbour toward zero
    truncated = np.where(inexact & (error * total < 0), np.nextafter(total, 0.0), total)
    odd = np.where(inexact, (truncated.view(np.uint64) | np.uint64(1)).view(np.float64), truncated)
    return odd.astype(np.float32)


def tanh_f32(x: np.ndarray) -> np.ndarray:
    """tanh of the f32 array ``x`` as XLA:CPU computes it."""
    x = np.asarray(x, np.float32)
    limit = np.float32(CLAMP)
    clamped = np.where(x < -limit, -limit, x)
    clamped = np.where(clamped > limit, limit, clamped)  # NaN stays NaN
    square = clamped * clamped

    def horner(coefficients: tuple[float, ...]) -> np.ndarray:
        result = np.full_like(square, coefficients[0])
        for c in coefficients[1:]:
            result = fused_multiply_add(square, result, np.full_like(square, c))
        return result

    with np.errstate(all="ignore"):  # NaN arguments
        quotient = clamped * horner(NUMERATOR) / horner(DENOMINATOR)
    magnitude = np.abs(x)
    result = np.where(magnitude < np.float32(IDENTITY_BELOW), x, quotient)
    return np.where(magnitude >= np.float32(ONE_FROM), np.copysign(np.float32(1), x), result).astype(np.float32)
