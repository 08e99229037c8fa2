"""Distances between results in units in the last place of their element type."""

from __future__ import annotations

import numpy as np

from xlapy.shapes import TypeKind, element_type_of_dtype

NAN_MISMATCH = np.iinfo(np.int64).max
_UINT_OF_WIDTH = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Number of representable values between ``a`` and ``b`` (same float dtype;
    -0 and +0 count as one value), exact for every width."""
    width = a.dtype.itemsize * 8
    sign_bit = np.uint64(1 << (width - 1))
    unsigned = _UINT_OF_WIDTH[a.dtype.itemsize]
    raw_a = np.ascontiguousarray(a).view(unsigned).astype(np.uint64)
    raw_b = np.ascontiguousarray(b).view(unsigned).astype(np.uint64)
    magnitude_a, magnitude_b = raw_a & ~sign_bit, raw_b & ~sign_bit
    same_sign = (raw_a & sign_bit) == (raw_b & sign_bit)
    apart = np.where(magnitude_a >= magnitude_b, magnitude_a - magnitude_b, magnitude_b - magnitude_a)
    return np.where(same_sign, apart, magnitude_a + magnitude_b)


def max_ulp_difference(actual: np.ndarray, expected: np.ndarray) -> int:
    """The largest distance in ulps of ``expected``'s element type between
    corresponding elements (NaN matches NaN; a NaN against a number is
    ``NAN_MISMATCH``). Complex numbers: their real and imaginary parts apart,
    in ulps of the part's type. For integers and pred: the largest absolute
    difference."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        raise ValueError(f"shapes differ: {actual.shape} and {expected.shape}")
    if actual.size == 0:
        return 0
    actual = actual.astype(expected.dtype, copy=False)
    if element_type_of_dtype(expected.dtype).kind is TypeKind.COMPLEX:
        return max(max_ulp_difference(actual.real, expected.real), max_ulp_difference(actual.imag, expected.imag))
    if element_type_of_dtype(expected.dtype).kind is not TypeKind.FLOAT:
        wide = np.int64 if expected.dtype.itemsize < 8 else object
        return int(np.max(np.abs(actual.astype(wide) - expected.astype(wide))))
    a_nan, e_nan = np.isnan(actual.astype(np.float64)), np.isnan(expected.astype(np.float64))
    if np.any(a_nan != e_nan):
        return NAN_MISMATCH
    keep = ~e_nan
    return int(ulp_distance(actual[keep], expected[keep]).max()) if np.any(keep) else 0
