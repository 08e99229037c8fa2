"""The C library's real math functions and a correctly rounded fused multiply-add, on numpy arrays.

XLA's complex functions are formulas on real functions. The interpreter evaluates them with the C library's
(`log1pf`, `atan2f`, ... on f32; `log1p`, `atan2`, ... on f64), which are within an ulp or so of the exact
values, like XLA's own approximations, and are the functions compiled code can call too, so that both compute
the same bits. numpy's float ufuncs are no substitute: on hosts with AVX-512 they run numpy's own SIMD
approximations, which round differently.

XLA:CPU contracts products into fused multiply-adds (LLVM may fuse `a * b + c` on hosts with FMA, and XLA lets
it), so its complex formulas round some sums once; `fused_multiply_add` computes those roundings.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
from collections.abc import Callable

import numpy as np

from xlapy.errors import UnimplementedError

_C_TYPES = {np.dtype(np.float32): ctypes.c_float, np.dtype(np.float64): ctypes.c_double}


@functools.cache
def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("m")
    # Where libm is part of the C library (macOS), the process's own symbols have the functions.
    return ctypes.CDLL(name) if name else ctypes.CDLL(None)


@functools.cache
def _elementwise(name: str, dtype: np.dtype, arity: int) -> Callable[..., np.ndarray]:
    """The C function ``name`` (``namef`` on f32) as a numpy ufunc on Python floats."""
    c_type = _C_TYPES[dtype]
    symbol = name + ("f" if dtype == np.float32 else "")
    try:
        function = getattr(_library(), symbol)
    except AttributeError:
        raise UnimplementedError(f"the C library has no function {symbol}") from None
    function.restype = c_type
    function.argtypes = [c_type] * arity
    return np.frompyfunc(function, arity, 1)


def c_function(name: str, *args: np.ndarray) -> np.ndarray:
    """The C library's real function ``name`` (e.g. ``"atan2"``) applied element by element to arrays of f32
    (calling ``atan2f``) or f64 (calling ``atan2``); the result has the arguments' type."""
    arrays = np.broadcast_arrays(*(np.asarray(a) for a in args))
    dtype = arrays[0].dtype
    if dtype not in _C_TYPES or any(a.dtype != dtype for a in arrays):
        raise UnimplementedError(f"C function {name} on {', '.join(str(a.dtype) for a in arrays)}")
    if arrays[0].size == 0:
        return np.empty(arrays[0].shape, dtype)
    # Python floats carry f32 values exactly; ctypes passes them as C floats.
    with np.errstate(all="ignore"):
        result = _elementwise(name, dtype, len(arrays))(*(a.astype(np.float64) for a in arrays))
        return np.asarray(result, np.float64).astype(dtype).reshape(arrays[0].shape)


def fused_multiply_add(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a * b + c rounded once, in the arguments' type (f32 or f64)."""
    a, b, c = np.broadcast_arrays(np.asarray(a), np.asarray(b), np.asarray(c))
    if a.dtype == np.float32:
        return _fused_multiply_add_f32(a, b, c)
    return _fused_multiply_add_f64(a, b, c)


def _round_to_odd(total: np.ndarray, error: np.ndarray) -> np.ndarray:
    """``total`` (a sum rounded to nearest, ``error`` its rounding error) rounded to odd instead: to the neighbour
    of the exact sum whose last bit is odd when the sum is inexact."""
    inexact = np.isfinite(total) & (error != 0)
    even = (total.view(np.uint64) & np.uint64(1)) == 0
    return np.where(inexact & even, np.nextafter(total, np.where(error > 0, np.inf, -np.inf)), total)


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a + b rounded, and its rounding error exactly (Knuth)."""
    total = a + b
    b_part = total - a
    return total, (a - (total - b_part)) + (b - b_part)


def _two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """a * b rounded, and its rounding error exactly (Dekker, with Veltkamp's splits into 26-bit halves)."""

    def split(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        scaled = x * 134217729.0  # 2^27 + 1
        high = scaled - (scaled - x)
        return high, x - high

    product = a * b
    (a_high, a_low), (b_high, b_low) = split(a), split(b)
    return product, ((a_high * b_high - product) + a_high * b_low + a_low * b_high) + a_low * b_low


# Where the f64 emulation below is exact: no overflow in the splits, no underflow in the product's error.
_SAFE_F64 = (2.0 ** -400, 2.0 ** 400)


def _fused_multiply_add_f64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Boldo and Melquiond's emulation: (h, l) = a * b exactly, (s, t) = c + h exactly, result = s + (t + l)
    with t + l rounded to odd. Arguments outside its safe range (zeros, non-finite, huge or tiny values) and zero
    results (whose sign the emulation does not keep) go to the C library's ``fma``."""
    low, high = _SAFE_F64
    with np.errstate(all="ignore"):
        magnitudes = [np.abs(x) for x in (a, b, c)]
        safe = np.logical_and.reduce([(m >= low) & (m <= high) for m in magnitudes])
        product, product_error = _two_product(a, b)
        total, total_error = _two_sum(c, product)
        tail = _round_to_odd(*_two_sum(total_error, product_error))
        result = np.array(total + tail)  # an array even for scalars, to assign to
    fallback = ~safe | (result == 0)
    if fallback.any():
        result[fallback] = c_function("fma", a[fallback], b[fallback], c[fallback])
    return result


def _fused_multiply_add_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """In f64: the product of two f32 values is exact; the sum is rounded to odd (the neighbour with an odd last
    bit when inexact), which rounds to f32 as the exact sum would."""
    with np.errstate(all="ignore"):
        total, error = _two_sum(a.astype(np.float64) * b.astype(np.float64), c.astype(np.float64))
    with np.errstate(over="ignore"):
        return _round_to_odd(total, error).astype(np.float32)
