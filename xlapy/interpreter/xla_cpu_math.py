"""f32 tanh and exp as XLA:CPU computes them: the f32 transcendentals that are not the exact value rounded once.

XLA's CPU backend evaluates these two functions on f32 (and on f16 and bf16, extended to f32 and rounded back) with
approximations of its own, in f32 arithmetic, and that is what `tanh` and `exponential` mean in xlapy too: the
interpreter computes them here, the compiled code in `xlapy/codegen/backends/mathlib/xla_cpu_f32.py`, both bit for
bit as XLA:CPU (tests/codegen/test_xla_cpu_f32.py compares every f32 with XLA:CPU through jaxlib). Every
multiply-add of both is one fused multiply-add: XLA emits them with LLVM's `contract` flag, which fuses them on
hosts with FMA (here ``fused_multiply_add``, rounded once exactly).

**tanh** (`EmitFastTanh`, openxla/xla `xla/codegen/intrinsic/tanh.cc`, Eigen's rational): x P(x^2) / Q(x^2) on x
clamped to [-TANH_CLAMP, TANH_CLAMP], where the approximation reaches 1 exactly, so that no result exceeds 1; x
itself for |x| < TANH_IDENTITY_BELOW and +-1 for |x| >= TANH_ONE_FROM. Up to TANH_MAX_ULPS from the correctly rounded
tanh.

**exp** (`GenerateVF32Exp`, `xla/backends/cpu/codegen/polynomial_approximations.cc`, Cephes' polynomial): x
clamped to [-87.8, 88.8], n = floor(x log2(e) + 1/2) clamped to [-127, 127], r = x - n ln2 with ln2 split in two
(Cody and Waite), e^r = 1 + r + r^2 P(r) (degree 5), times 2^n made from its exponent bits (0 for n = -127). Within
1 ulp of the correctly rounded exp below EXP_ONE_ULP_BELOW; above, the clamp of n to 127 (from x = 88.376) leaves
r beyond ln2/2, where the polynomial is less accurate: up to EXP_MAX_ULPS just below the overflow threshold. XLA:CPU
runs with denormals flushed to zero, so where the result is subnormal it returns 0 and xlapy (which does not flush)
the product rounded.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# tanh: x P(x^2) / Q(x^2), the coefficients of P and Q as f32, highest degree first.
TANH_NUMERATOR = (-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11, 5.12229709037114e-08,
                  1.48572235717979e-05, 6.37261928875436e-04, 4.89352455891786e-03)
TANH_DENOMINATOR = (1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03, 4.89352518554385e-03)
# The clamp of the argument (the approximation is 1 exactly there, with fused multiply-adds), the magnitude below
# which tanh(x) is taken as x, and the one from which it is +-1.
TANH_CLAMP = 7.99881172180175781
TANH_IDENTITY_BELOW = 0.0004
TANH_ONE_FROM = 20.0
# The largest distance from the correctly rounded tanh, in ulps, over every f32 (reached at 3.7372892).
TANH_MAX_ULPS = 5

# exp: the clamp of the argument, log2(e), ln2 = EXP_LN2_HIGH - EXP_LN2_LOW (the first of 9 significant bits, so
# that its products with n are exact), the clamp of n, and P(r) = EXP_POLYNOMIAL[0] r^5 + ... + EXP_POLYNOMIAL[5].
EXP_CLAMP = (-87.8, 88.8)
EXP_LOG2E = 1.44269504088896341
EXP_LN2_HIGH = 0.693359375
EXP_LN2_LOW = 2.12194440e-4
EXP_N_CLAMP = (-127.0, 127.0)
EXP_POLYNOMIAL = (1.9875691500e-4, 1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1,
                  5.0000001201e-1)
# The largest distance from the correctly rounded exp, in ulps, over every f32 whose exp is a normal float (reached
# at 88.721672), and the argument below which it is 1.
EXP_MAX_ULPS = 6
EXP_ONE_ULP_BELOW = 88.6


# f64 keeps 29 more significand bits than f32: an f64 halfway between two f32 has exactly the top one of them set.
_BELOW_F32 = np.uint64((1 << 29) - 1)
_HALFWAY = np.uint64(1 << 28)
_F32_TINY = float(np.finfo(np.float32).tiny)
# Elements computed at a time: the temporaries of one step stay in the caches.
_CHUNK = 1 << 15


def fused_multiply_add(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c rounded once to f32, for f32 arrays (broadcast together) of finite values.

    The product is exact in f64 (48 significant bits), and the f64 sum rounds to f32 as the exact sum does unless
    it lies exactly halfway between two f32 (or below f32's normal range): only there can rounding twice differ
    from rounding once. Those few elements are computed again exactly (``_rounded_once``)."""
    product = np.asarray(a, np.float32).astype(np.float64) * np.asarray(b, np.float32)
    addend = np.asarray(c, np.float32).astype(np.float64)
    total = np.asarray(product + addend)
    result = total.astype(np.float32)
    suspect = _may_round_twice(total)
    if suspect.any():
        product, addend = np.broadcast_to(product, total.shape), np.broadcast_to(addend, total.shape)
        result[suspect] = _rounded_once(product[suspect], addend[suspect])
    return result


def _may_round_twice(total: np.ndarray) -> np.ndarray:
    """Where the f64 ``total`` may round to f32 otherwise than the exact value it was rounded from."""
    halfway = (total.view(np.uint64) & _BELOW_F32) == _HALFWAY
    return halfway | (np.abs(total) < _F32_TINY)


def _rounded_once(product: np.ndarray, addend: np.ndarray) -> np.ndarray:
    """``product + addend`` (f64, the product exact) rounded once to f32: the f64 sum's error recovered exactly
    (Knuth's two-sum), and the sum rounded to odd first, truncated toward zero with its last bit set when inexact.
    A value rounded to odd with at least two more bits than the target rounds to the target as the exact value
    does."""
    total = product + addend
    virtual = total - product
    error = (product - (total - virtual)) + (addend - virtual)
    inexact = error != 0
    # |exact| < |total| where the error has the other sign: the truncation is total's neighbour toward zero
    truncated = np.where(inexact & (error * total < 0), np.nextafter(total, 0.0), total)
    odd = np.where(inexact, (truncated.view(np.uint64) | np.uint64(1)).view(np.float64), truncated)
    return odd.astype(np.float32)


def _clamped(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """``x`` limited to [low, high]; NaN stays NaN."""
    x = np.where(x < np.float32(low), np.float32(low), x)
    return np.where(x > np.float32(high), np.float32(high), x)


def _horner(x: np.ndarray, coefficients: tuple[float, ...]) -> np.ndarray:
    """The polynomial (highest degree first) at ``x``, a fused multiply-add per step."""
    result = np.full_like(x, coefficients[0])
    for c in coefficients[1:]:
        result = fused_multiply_add(x, result, np.float32(c))
    return result


def _in_chunks(function: Callable[[np.ndarray], np.ndarray], x: np.ndarray) -> np.ndarray:
    """``function`` of the f32 array ``x``, computed a cache-sized chunk at a time: its dozens of steps then read
    and write the caches rather than memory (3x faster on f32[6,512,4096])."""
    x = np.asarray(x, np.float32)
    flat = x.reshape(-1)
    if flat.size <= _CHUNK:
        return function(flat).reshape(x.shape)
    out = np.empty_like(flat)
    for start in range(0, flat.size, _CHUNK):
        out[start:start + _CHUNK] = function(flat[start:start + _CHUNK])
    return out.reshape(x.shape)


def tanh_f32(x: np.ndarray) -> np.ndarray:
    """tanh of the f32 array ``x`` as XLA:CPU computes it."""
    return _in_chunks(_tanh, x)


def exp_f32(x: np.ndarray) -> np.ndarray:
    """exp of the f32 array ``x`` as XLA:CPU computes it (without flushing subnormal results to zero)."""
    return _in_chunks(_exp, x)


def _tanh(x: np.ndarray) -> np.ndarray:
    with np.errstate(all="ignore"):  # NaN arguments
        clamped = _clamped(x, -TANH_CLAMP, TANH_CLAMP)
        square = clamped * clamped
        quotient = clamped * _horner(square, TANH_NUMERATOR) / _horner(square, TANH_DENOMINATOR)
    magnitude = np.abs(x)
    result = np.where(magnitude < np.float32(TANH_IDENTITY_BELOW), x, quotient)
    return np.where(magnitude >= np.float32(TANH_ONE_FROM), np.copysign(np.float32(1), x), result).astype(np.float32)


def _exp(x: np.ndarray) -> np.ndarray:
    x = _clamped(x, *EXP_CLAMP)
    with np.errstate(all="ignore"):  # NaN arguments
        n = _clamped(np.floor(fused_multiply_add(x, np.float32(EXP_LOG2E), np.float32(0.5))), *EXP_N_CLAMP)
        r = fused_multiply_add(np.float32(-EXP_LN2_HIGH), n, x)
        r = fused_multiply_add(np.float32(EXP_LN2_LOW), n, r)
        z = fused_multiply_add(_horner(r, EXP_POLYNOMIAL), r * r, r)
        # 2^n from its exponent bits, n + 127 in [0, 254] (0 for NaN: the product stays NaN)
        exponent = np.where(np.isnan(n), np.float32(0), n).astype(np.int32) + 127
        return ((np.float32(1) + z) * (exponent.astype(np.uint32) << 23).view(np.float32)).astype(np.float32)
