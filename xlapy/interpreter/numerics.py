"""Element-type arithmetic as XLA defines it: narrow floats computed in f32
and rounded back after every op, integers that wrap, saturating float→int
conversion, and sub-byte integers."""

from __future__ import annotations

import numpy as np

from xlapy.shapes import ELEMENT_TYPES, ElementType, TypeKind, element_type_of_dtype

_F16, _F32, _F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)


def dtype_of(element_type: str) -> np.dtype:
    """The numpy dtype of an HLO element type name."""
    return ELEMENT_TYPES[element_type].dtype


def type_of(value: np.ndarray) -> ElementType:
    return element_type_of_dtype(np.asarray(value).dtype)


def is_narrow_float(dtype: np.dtype) -> bool:
    """bf16, f16 and the fp8/fp4 types: XLA computes them in f32 and rounds back."""
    return dtype.kind == "V" or dtype == np.float16 or (dtype.kind == "f" and dtype.itemsize < 2)


def is_narrow_int(dtype: np.dtype) -> bool:
    """s1..s4 and u1..u4 (ml_dtypes types): computed in 32 bits and wrapped back."""
    return dtype.kind == "V" and _kind(dtype) in (TypeKind.SIGNED, TypeKind.UNSIGNED)


def _kind(dtype: np.dtype) -> TypeKind:
    return element_type_of_dtype(dtype).kind


def widen(value: np.ndarray) -> np.ndarray:
    """``value`` in the type its arithmetic is done in: f32 for narrow floats,
    32-bit integers for sub-byte integers, itself otherwise."""
    value = np.asarray(value)
    dtype = value.dtype
    if dtype.kind in "biufc":
        return value if dtype != np.float16 else value.astype(_F32)
    kind = _kind(dtype)
    if kind is TypeKind.FLOAT:
        return value.astype(_F32)
    if kind is TypeKind.SIGNED:
        return value.astype(np.int32)
    return value.astype(np.uint32)


def narrow(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A result computed in a wider type, rounded (floats) or wrapped (integers)
    to ``dtype``."""
    value = np.asarray(value)
    if value.dtype == dtype:
        return value
    kind = _kind(dtype)
    if kind in (TypeKind.SIGNED, TypeKind.UNSIGNED) and value.dtype.kind in "iub":
        return wrap_integer(value, dtype)
    return value.astype(dtype)


def wrap_integer(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Integer ``value`` reduced modulo 2**bits into ``dtype`` (two's complement)."""
    element = element_type_of_dtype(dtype)
    bits = element.bit_width
    if bits >= 8:
        return value.astype(np.int64 if value.dtype.kind == "i" else np.uint64).astype(dtype)
    as_unsigned = value.astype(np.int64) & ((1 << bits) - 1)
    if element.kind is TypeKind.SIGNED:
        as_unsigned = np.where(as_unsigned >= 1 << (bits - 1), as_unsigned - (1 << bits), as_unsigned)
    return as_unsigned.astype(dtype)


def integer_bounds(dtype: np.dtype) -> tuple[int, int]:
    element = element_type_of_dtype(dtype)
    bits = element.bit_width
    if element.kind is TypeKind.SIGNED:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def convert(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """XLA's ``convert``: floats round to nearest even, float→int truncates
    toward zero and saturates (NaN becomes 0), int→int wraps, anything→pred is
    ``!= 0``."""
    value = np.asarray(value)
    source, target = _kind(value.dtype), _kind(dtype)
    if value.dtype == dtype:
        return value
    if target is TypeKind.PRED:
        return widen(value) != 0
    if target in (TypeKind.SIGNED, TypeKind.UNSIGNED):
        if source is TypeKind.FLOAT:
            return _float_to_int(value, dtype)
        if source is TypeKind.COMPLEX:
            return _float_to_int(np.real(value), dtype)
        return wrap_integer(widen(value), dtype)
    if target is TypeKind.FLOAT and source is TypeKind.COMPLEX:
        value = np.real(value)
    if source is TypeKind.PRED or (is_narrow_int(value.dtype)):
        value = widen(value.astype(np.int32) if source is TypeKind.PRED else value)
    if value.dtype.kind == "V" and dtype.kind == "V":
        value = value.astype(_F32) if element_type_of_dtype(value.dtype).bit_width <= 16 else value
    if dtype == _F16 and value.dtype.kind == "V":
        value = value.astype(_F32)
    result = value.astype(dtype)
    if dtype == _F16 and value.dtype in (_F32, _F64):
        _quiet_f16_nans(value, result)
    return result


def _quiet_f16_nans(value: np.ndarray, result: np.ndarray) -> None:
    """A NaN converted to f16 as XLA:CPU converts it (x86's vcvtps2ph, after f64 → f32 for an f64): its sign, the
    quiet bit and the next 9 bits of its payload. numpy keeps a signaling NaN signaling (and makes a payload that
    truncates to 0 into 1)."""
    nan = np.isnan(value)
    if not nan.any():
        return
    if value.dtype == _F64:
        bits = value.view(np.uint64)[nan]
        sign, payload = (bits >> np.uint64(48)) & np.uint64(0x8000), (bits >> np.uint64(42)) & np.uint64(0x1FF)
    else:
        bits = value.view(np.uint32)[nan]
        sign, payload = (bits >> np.uint32(16)) & np.uint32(0x8000), (bits >> np.uint32(13)) & np.uint32(0x1FF)
    result.view(np.uint16)[nan] = (sign | 0x7E00 | payload).astype(np.uint16)


def _float_to_int(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    low, high = integer_bounds(dtype)
    wide = widen(value).astype(np.float64)
    truncated = np.trunc(np.where(np.isnan(wide), 0.0, wide))
    # Compare in float64 before converting, so the bounds saturate exactly.
    below, above = truncated <= float(low), truncated >= float(high)
    inner = np.where(below | above, 0.0, truncated).astype(np.int64 if low < 0 else np.uint64)
    result = np.where(below, low, np.where(above, high, inner))
    return wrap_integer(np.asarray(result), dtype) if dtype.kind == "V" else np.asarray(result).astype(dtype)
