"""Distances between results in units in the last place of their element type."""

from __future__ import annotations

import numpy as np

from xlapy.shapes import element_type_of_dtype


def _ordered(values: np.ndarray) -> np.ndarray:
    """Floats as integers whose difference counts the representable values
    between them (-0 and +0 map to the same integer)."""
    bits = values.dtype.itemsize * 8
    as_int = values.view({8: np.uint8, 16: np.uint16, 32: np.uint32, 64: np.uint64}[bits]).astype(np.uint64)
    sign = as_int >> np.uint64(bits - 1)
    magnitude = (as_int & np.uint64((1 << (bits - 1)) - 1)).astype(object if bits == 64 else np.int64)
    return np.where(sign == 1, -magnitude, magnitude)


def max_ulp_difference(actual: np.ndarray, expected: np.ndarray) -> int:
    """The largest distance in ulps of ``expected``'s element type between
    corresponding elements (NaN matches NaN; a NaN against a number is
    infinitely far). For integers and pred: the largest absolute difference."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        raise ValueError(f"shapes differ: {actual.shape} and {expected.shape}")
    if actual.size == 0:
        return 0
    actual = actual.astype(expected.dtype, copy=False)
    if element_type_of_dtype(expected.dtype).kind.value != "float":
        wide = np.int64 if expected.dtype.itemsize < 8 else object
        return int(np.max(np.abs(actual.astype(wide) - expected.astype(wide))))
    a_nan, e_nan = np.isnan(actual.astype(np.float64)), np.isnan(expected.astype(np.float64))
    if np.any(a_nan != e_nan):
        return np.iinfo(np.int64).max
    keep = ~e_nan
    if not np.any(keep):
        return 0
    difference = np.abs(_ordered(actual[keep]) - _ordered(expected[keep]))
    return int(np.max(difference))
