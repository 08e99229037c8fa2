"""Distances between results in units in the last place of their element type.

A float's position is its place in the ascending sequence of the values its
type represents: the bits read as sign and magnitude (using the type's own
width and sign bit, so 4- and 6-bit floats stored one per byte and the
unsigned f8e8m0fnu count right) give an integer that grows with the value,
adjacent values on adjacent integers and +0 and -0 on the same one; an
infinity comes right after the largest finite number. The distance between
two floats is the difference of their positions.

NaN has no position: NaN against NaN is 0 apart whatever the payloads, NaN
against a number is ``NAN_DISTANCE`` element by element (``NAN_MISMATCH`` as
the largest difference of two arrays), farther than any two numbers.
Integers are as far apart as their values, pred 0 or 1; complex numbers take
the larger distance of their real and imaginary parts.
"""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np

# Element by element: NaN against a number. The farthest numbers of any type (-inf and +inf in f64) are
# 0xFFE0000000000000 apart, so this value is no distance between numbers.
NAN_DISTANCE = np.uint64(np.iinfo(np.uint64).max)
# The largest difference of two arrays when a NaN faces a number: farther apart than any two numbers or
# integers (u64 values are up to 2**64 - 1 apart).
NAN_MISMATCH = 1 << 64

_UINT_OF_BYTES = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _float_format(dtype: np.dtype) -> tuple[int, bool] | None:
    """(bit width, has a sign bit) of a float dtype (numpy's or ml_dtypes'); None for other dtypes."""
    if dtype.kind == "f":
        info = ml_dtypes.finfo(dtype)
    elif dtype.kind == "V":
        try:
            info = ml_dtypes.finfo(dtype)
        except (TypeError, ValueError):
            return None
    else:
        return None
    return int(info.bits), float(info.min) < 0


def is_float_dtype(dtype: np.dtype) -> bool:
    """True for numpy's and ml_dtypes' real floating-point dtypes."""
    return _float_format(np.dtype(dtype)) is not None


def float_positions(array: np.ndarray) -> np.ndarray:
    """The position of every element of a float array among the values of its
    type, as int64: ascending with the value, consecutive for neighbours, the
    same for +0 and -0 (meaningless for NaN)."""
    array = np.ascontiguousarray(array)
    layout = _float_format(array.dtype)
    if layout is None:
        raise ValueError(f"no float positions for elements of {array.dtype}")
    width, signed = layout
    raw = array.view(_UINT_OF_BYTES[array.dtype.itemsize]).astype(np.uint64)
    if not signed:  # f8e8m0fnu: exponent bits only, in order
        return raw.astype(np.int64)
    sign_shift = np.uint64(width - 1)
    magnitude = (raw & ((np.uint64(1) << sign_shift) - np.uint64(1))).astype(np.int64)
    # Any bit from the sign bit up means negative, as ml_dtypes reads sub-byte floats whose high bits are set.
    negative = (raw >> sign_shift) != 0
    return np.where(negative, -magnitude, magnitude)


def _isnan(array: np.ndarray) -> np.ndarray:
    # Every float narrower than 32 bits converts to f32 exactly (NaN to NaN).
    return np.isnan(array.astype(np.float32) if array.dtype.itemsize < 4 else array)


def _value_dtype(dtype: np.dtype) -> np.dtype | None:
    """The dtype to read integers and pred in (sub-byte ml_dtypes integers as bytes); None for other types."""
    if dtype == np.bool_:
        return np.dtype(np.uint8)
    if dtype.kind in "iu":
        return dtype
    if dtype.kind == "V":
        try:
            low = ml_dtypes.iinfo(dtype).min
        except (TypeError, ValueError):
            return None
        return np.dtype(np.int8 if low < 0 else np.uint8)
    return None


def _integer_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # high - low lies in [0, 2**64), so it is exact in wrapping uint64 arithmetic.
    wide = np.int64 if a.dtype.kind == "i" else np.uint64
    low, high = np.minimum(a, b).astype(wide), np.maximum(a, b).astype(wide)
    return high.view(np.uint64) - low.view(np.uint64)


def ulp_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Element by element, how far apart ``a`` and ``b`` (arrays of one dtype)
    are, as uint64: floats in ulps of their type (the difference of their
    positions; NaN against NaN 0, NaN against a number ``NAN_DISTANCE``),
    complex numbers the larger distance of their parts, integers the absolute
    difference, pred 0 or 1."""
    a, b = np.asarray(a), np.asarray(b)
    if a.dtype != b.dtype:
        raise ValueError(f"dtypes differ: {a.dtype} and {b.dtype}")
    a, b = np.broadcast_arrays(a, b)
    return _distance(a.reshape(-1), b.reshape(-1)).reshape(a.shape)


def _distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``ulp_distance`` of flat arrays."""
    if a.dtype.kind == "c":
        return np.maximum(_distance(a.real, b.real), _distance(a.imag, b.imag))
    if _float_format(a.dtype) is not None:
        distance = _integer_distance(float_positions(a), float_positions(b))
        a_nan, b_nan = _isnan(a), _isnan(b)
        distance[a_nan & b_nan] = 0
        distance[a_nan != b_nan] = NAN_DISTANCE
        return distance
    values = _value_dtype(a.dtype)
    if values is None:
        raise ValueError(f"no ulp distance for elements of {a.dtype}")
    return _integer_distance(a.astype(values), b.astype(values))


def max_ulp_difference(actual: np.ndarray, expected: np.ndarray) -> int:
    """The largest ``ulp_distance`` between corresponding elements of
    ``actual`` (converted to ``expected``'s dtype) and ``expected``, with
    ``NAN_MISMATCH`` for a NaN against a number; 0 for empty arrays."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        raise ValueError(f"shapes differ: {actual.shape} and {expected.shape}")
    if actual.size == 0:
        return 0
    actual = actual.astype(expected.dtype, copy=False).reshape(-1)
    expected = expected.reshape(-1)
    float_like = expected.dtype.kind == "c" or _float_format(expected.dtype) is not None
    worst = 0
    # In pieces: the distance's temporaries (positions, masks, all 64-bit) stay in the caches instead of taking
    # several times each array's memory at once.
    for start in range(0, expected.size, _PIECE_ELEMENTS):
        distance = _distance(actual[start:start + _PIECE_ELEMENTS], expected[start:start + _PIECE_ELEMENTS])
        if float_like and np.any(distance == NAN_DISTANCE):
            return NAN_MISMATCH
        worst = max(worst, int(distance.max()))
    return worst


_PIECE_ELEMENTS = 1 << 16


def error_in_epsilons(actual: np.ndarray, expected: np.ndarray) -> float:
    """The largest difference between ``actual`` and ``expected`` in machine epsilons of ``expected``'s element
    type times its largest finite magnitude: the measure a sum in another order keeps small where ulps mislead
    (a result that cancels to near zero is many ulps from its neighbour in another order). 0 for equal arrays,
    infinite for integers that differ, for a NaN or an infinity against another value, and for anything but
    zeros where only zeros are expected."""
    actual, expected = np.asarray(actual), np.asarray(expected)
    if actual.shape != expected.shape:
        raise ValueError(f"shapes differ: {actual.shape} and {expected.shape}")
    actual = actual.astype(expected.dtype, copy=False)
    if not (expected.dtype.kind == "c" or is_float_dtype(expected.dtype)):
        return 0.0 if np.array_equal(actual, expected) else math.inf
    wide_actual, wide_expected = actual.astype(np.complex128), expected.astype(np.complex128)
    same = (wide_actual == wide_expected) | (np.isnan(wide_actual) & np.isnan(wide_expected))
    finite = np.isfinite(wide_actual) & np.isfinite(wide_expected)
    if (~same & ~finite).any():
        return math.inf
    with np.errstate(invalid="ignore", over="ignore"):  # inf - inf where both agree: masked by ``same``
        error = float(np.abs(wide_actual - wide_expected)[~same].max(initial=0.0))
    if error == 0:
        return 0.0
    largest = float(np.abs(wide_expected[finite]).max(initial=0.0))
    if largest == 0:
        return math.inf  # no magnitude to measure against: nothing rounds zeros into something else
    part = expected.real.dtype if expected.dtype.kind == "c" else expected.dtype
    return error / (float(ml_dtypes.finfo(part).eps) * largest)
