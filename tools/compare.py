"""Comparison of interpreter results with reference results (XLA:CPU, JAX).

Results are arrays or (nested) tuples of arrays. Floating-point closeness is
measured in units in the last place of the result's own type, so one
tolerance works for f64, f32, bf16 and the fp8 types alike.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from xlapy.runtime.ulps import is_float_dtype, ulp_distance

_UINT_OF_WIDTH = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def leaves(value: Any) -> list[np.ndarray]:
    """The arrays of a (nested) tuple or list, in order."""
    if isinstance(value, (tuple, list)):
        return [leaf for v in value for leaf in leaves(v)]
    return [np.asarray(value)]


def is_float(dtype: np.dtype) -> bool:
    """True for real floating-point dtypes (numpy's and ml_dtypes')."""
    return is_float_dtype(np.dtype(dtype))


def bits(array: np.ndarray) -> np.ndarray:
    """The raw bits of every element, as unsigned integers of the element's width
    (c128 elements as pairs of 64-bit words, on a last axis of 2)."""
    array = np.asarray(array, order="C")
    if array.dtype == np.bool_:
        return array.view(np.uint8)
    if array.dtype.itemsize == 16:
        return array.reshape(*array.shape, 1).view(np.uint64)
    return array.view(_UINT_OF_WIDTH[array.dtype.itemsize])


def _tiny(dtype: np.dtype) -> float:
    """Smallest normal number of the type XLA:CPU computes ``dtype`` in (f32 for the
    narrow floats, which it widens)."""
    return float(np.finfo(np.float64).tiny) if np.dtype(dtype) == np.float64 else float(np.finfo(np.float32).tiny)


def flush_denormals(array: np.ndarray, exponent: float = 1.0) -> np.ndarray:
    """``array`` with values below the smallest normal of its computation type
    replaced by zeros of the same sign (XLA:CPU runs with flush-to-zero); with
    ``exponent``, values below that smallest normal to the power ``exponent``
    (0.5: the values whose square would be denormal). Other arrays unchanged."""
    array = np.asarray(array)
    if np.iscomplexobj(array):
        # Parts set one by one: adding 1j * imag would turn an infinite imaginary part into a NaN real part.
        flushed = np.empty_like(array)
        flushed.real = flush_denormals(np.ascontiguousarray(array.real), exponent)
        flushed.imag = flush_denormals(np.ascontiguousarray(array.imag), exponent)
        return flushed
    if not is_float(array.dtype):
        return array
    wide = array.astype(np.float64)
    limit = _tiny(array.dtype) ** exponent
    flushed = np.where((np.abs(wide) < limit) & (wide != 0), np.copysign(0.0, wide), wide)
    return flushed.astype(array.dtype)


def normwise_errors(got: np.ndarray, expected: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For complex arrays of one dtype, element by element (as f64): the larger absolute error of the two
    parts; the magnitude it is measured against, the larger part of the expected value; and the spacing of
    the part type's floats at that magnitude (one ulp of it). Meaningless where a part is not finite."""
    part = np.float32 if got.dtype == np.complex64 else np.float64
    want = expected.astype(np.complex128)
    scale = np.maximum(np.abs(want.real), np.abs(want.imag))
    with np.errstate(over="ignore", invalid="ignore"):
        error = np.maximum(np.abs(got.real.astype(np.float64) - want.real),
                           np.abs(got.imag.astype(np.float64) - want.imag))
        spacing = np.spacing(scale.astype(part)).astype(np.float64)
    return error, scale, spacing


def _describe(index: tuple, got: np.ndarray, expected: np.ndarray, context: str) -> str:
    g, e = got[index], expected[index]
    return f"{context}: first mismatch at {index}: got {g!r} (bits {bits(np.asarray(g))!r}), expected {e!r} " \
           f"(bits {bits(np.asarray(e))!r})"


def _check_array(got: np.ndarray, expected: np.ndarray, *, exact_bits: bool, ulps: float, rtol: float,
                 atol: float, atol_below: float, normwise: bool, flush: bool, context: str) -> None:
    assert got.shape == expected.shape, f"{context}: shape {got.shape} != expected {expected.shape}"
    assert got.dtype == expected.dtype, f"{context}: dtype {got.dtype} != expected {expected.dtype}"
    if exact_bits or not (is_float(got.dtype) or np.iscomplexobj(got)):
        mismatch = bits(got) != bits(expected)
        if mismatch.ndim > got.ndim:
            mismatch = mismatch.any(axis=-1)
        if mismatch.any():
            count = int(mismatch.sum())
            index = tuple(int(i) for i in np.argwhere(mismatch)[0])
            raise AssertionError(f"{_describe(index, got, expected, context)} ({count} of {got.size} differ)")
        return
    tolerances = dict(ulps=ulps, rtol=rtol, atol=atol, atol_below=atol_below)
    if np.iscomplexobj(got) and normwise:
        _check_normwise(got, expected, flush=flush, context=context, **tolerances)
        return
    if np.iscomplexobj(got):
        for part in ("real", "imag"):
            _check_array(np.ascontiguousarray(getattr(got, part)), np.ascontiguousarray(getattr(expected, part)),
                         exact_bits=False, normwise=False, flush=flush, context=f"{context}.{part}", **tolerances)
        return
    if flush:
        got, expected = flush_denormals(got), flush_denormals(expected)
    with np.errstate(invalid="ignore", over="ignore"):  # NaNs of the narrow floats widen with a warning
        g, e = got.astype(np.float64), expected.astype(np.float64)
        g_nan, e_nan = np.isnan(g), np.isnan(e)
        ok = g_nan & e_nan
        same = (g == e) & ~ok
        # Equal values must also agree on the sign of zero when no tolerance is given.
        if ulps == 0 and rtol == 0 and atol == 0:
            same &= np.signbit(g) == np.signbit(e)
        ok |= same
        finite = np.isfinite(g) & np.isfinite(e)
        if ulps:
            ok |= finite & (ulp_distance(got, expected) <= ulps)
        if rtol or atol:
            ok |= finite & (np.abs(e) < atol_below) & (np.abs(g - e) <= atol + rtol * np.abs(e))
    _raise_unless(ok, got, expected, context, tolerances)


def _check_normwise(got: np.ndarray, expected: np.ndarray, *, ulps: float, rtol: float, atol: float,
                    atol_below: float, flush: bool, context: str) -> None:
    """Complex numbers within ``ulps`` of the larger part of the expected value (both parts' errors counted in
    the spacing of floats at that magnitude), or within ``atol`` where that magnitude is below ``atol_below``;
    infinities and NaN as the parts compare."""
    if flush:
        got, expected = flush_denormals(got), flush_denormals(expected)
    finite = np.isfinite(got) & np.isfinite(expected)
    if not finite.all():
        _check_array(got[~finite], expected[~finite], exact_bits=False, ulps=0, rtol=0, atol=0,
                     atol_below=np.inf, normwise=False, flush=False, context=f"{context} (not finite)")
    error, scale, spacing = normwise_errors(got, expected)
    with np.errstate(over="ignore", invalid="ignore"):
        ok = ~finite | (error <= ulps * spacing + rtol * scale)
        ok |= finite & (scale < atol_below) & (error <= atol)
    _raise_unless(ok, got, expected, context, dict(ulps=ulps, rtol=rtol, atol=atol, atol_below=atol_below,
                                                   normwise=True))


def _raise_unless(ok: np.ndarray, got: np.ndarray, expected: np.ndarray, context: str, tolerances: dict) -> None:
    if not ok.all():
        count = int((~ok).sum())
        index = tuple(int(i) for i in np.argwhere(~ok)[0])
        shown = ", ".join(f"{k}={v}" for k, v in tolerances.items())
        raise AssertionError(f"{_describe(index, got, expected, context)} ({count} of {got.size} differ; {shown})")


def assert_same(got: Any, expected: Any, *, exact_bits: bool = False, ulps: float = 0, rtol: float = 0,
                atol: float = 0, atol_below: float = math.inf, normwise: bool = False, flush: bool = False,
                context: str = "result") -> None:
    """Assert ``got`` matches ``expected`` leaf by leaf.

    Integers and pred always compare bit for bit. With ``exact_bits`` floats do
    too (NaN payloads included). Otherwise floats match when both are NaN,
    equal (with the same sign of zero unless a tolerance is given), within
    ``ulps`` units in the last place, or within ``atol + rtol * |expected|``
    where ``|expected|`` is below ``atol_below`` (everywhere by default), so
    that an absolute tolerance can be kept to the results near zero, where
    the reference loses its relative accuracy. Complex numbers compare their
    parts, or with ``normwise`` the larger error of the parts against the
    larger expected part (ulps of it, and ``atol`` where it is below
    ``atol_below``). ``flush`` flushes denormals of both to zero first."""
    got_leaves, expected_leaves = leaves(got), leaves(expected)
    assert len(got_leaves) == len(expected_leaves), \
        f"{context}: {len(got_leaves)} results, expected {len(expected_leaves)}"
    for i, (g, e) in enumerate(zip(got_leaves, expected_leaves)):
        where = context if len(got_leaves) == 1 else f"{context}[{i}]"
        _check_array(np.asarray(g), np.asarray(e), exact_bits=exact_bits, ulps=ulps, rtol=rtol, atol=atol,
                     atol_below=atol_below, normwise=normwise, flush=flush, context=where)


def gamma(n: float, dtype: Any) -> float:
    """Higham's ``gamma(n) = n u / (1 - n u)``, ``u`` the unit roundoff of ``dtype`` (half its machine epsilon): a
    value computed through ``n`` roundings, each a factor ``1 + d`` with ``|d| <= u``, is within ``gamma(n)`` of the
    exact value relatively. So a sum of ``n`` terms in any order, with its multiply-adds fused or not, is within
    ``gamma(n)`` times the sum of the terms' magnitudes of the exact sum (Higham, Accuracy and Stability of
    Numerical Algorithms, 3.1 and 4.2), and two such sums of the same terms within twice that of each other."""
    u = float(ml_dtypes.finfo(dtype).eps) / 2
    assert n * u < 1, n
    return n * u / (1 - n * u)


def assert_within_bound(got: Any, expected: Any, bound: Any, *, context: str = "result",
                        what: str = "the bound") -> None:
    """``got`` within ``bound`` (an array of absolute errors, broadcast to the results) of ``expected``,
    element by element. Equal values (infinities included) match, and so does NaN against NaN (of each part of
    complex numbers); ``what`` names the bound in the message."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got.shape, got.dtype, expected.dtype)
    wide = np.complex128 if np.iscomplexobj(expected) else np.float64
    bound = np.broadcast_to(np.asarray(bound, np.float64), got.shape)
    got_wide, want_wide = got.astype(wide), expected.astype(wide)
    with np.errstate(invalid="ignore", over="ignore"):
        error = np.abs(got_wide - want_wide)
        same = np.ones(got.shape, bool)
        for g, e in ((got_wide.real, want_wide.real), (got_wide.imag, want_wide.imag)):
            same &= (g == e) | (np.isnan(g) & np.isnan(e))
        ok = same | (error <= bound)
    bad = [tuple(int(i) for i in index) for index in np.argwhere(~ok)]
    assert not bad, (f"{context}: {len(bad)} of {got.size} results differ by more than {what}, first at {bad[0]}: "
                     f"got {got[bad[0]]}, expected {expected[bad[0]]}, allowed {bound[bad[0]]:.3g}")


def assert_within_sum_of_magnitudes(got: Any, expected: Any, magnitudes: Any, epsilons: float) -> None:
    """``got`` within ``epsilons`` machine epsilons of ``magnitudes``: the same sums taken over the absolute
    values (moduli) of the terms. Any summation order rounds within such a bound, while a sum whose terms
    cancel can be near zero, where neither result keeps its relative accuracy. Equal values (infinities
    included) match, and so does NaN against NaN (of each part of complex numbers)."""
    expected = np.asarray(expected)
    bound = epsilons * float(ml_dtypes.finfo(expected.real.dtype).eps) * np.asarray(magnitudes, np.float64)
    assert_within_bound(got, expected, bound, context="result", what=f"{epsilons} eps of the sum of |terms|")
