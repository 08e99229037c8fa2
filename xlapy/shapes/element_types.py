"""XLA's primitive types, by their HLO spelling (``f32``, ``bf16``, ``pred``...)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import ml_dtypes
import numpy as np

from xlapy.errors import XlapyError


class TypeKind(Enum):
    PRED = "pred"
    SIGNED = "signed"
    UNSIGNED = "unsigned"
    FLOAT = "float"
    COMPLEX = "complex"
    TOKEN = "token"
    TUPLE = "tuple"
    OPAQUE = "opaque"


@dataclass(frozen=True)
class ElementType:
    """One primitive type: its HLO name, width in bits and numpy dtype."""

    name: str
    bit_width: int
    kind: TypeKind
    dtype: np.dtype | None

    @property
    def is_array_type(self) -> bool:
        """True for types that can be the element type of an array."""
        return self.kind not in (TypeKind.TOKEN, TypeKind.TUPLE, TypeKind.OPAQUE)

    @property
    def is_integral(self) -> bool:
        return self.kind in (TypeKind.SIGNED, TypeKind.UNSIGNED)

    @property
    def is_floating_point(self) -> bool:
        return self.kind is TypeKind.FLOAT

    @property
    def is_complex(self) -> bool:
        return self.kind is TypeKind.COMPLEX

    @property
    def byte_width(self) -> int:
        """Bytes one element takes when not packed (sub-byte types take one)."""
        return (self.bit_width + 7) // 8

    def __str__(self) -> str:
        return self.name


def _entry(name: str, bits: int, kind: TypeKind, dtype: object | None) -> ElementType:
    return ElementType(name, bits, kind, None if dtype is None else np.dtype(dtype))


_S, _U, _F = TypeKind.SIGNED, TypeKind.UNSIGNED, TypeKind.FLOAT

ELEMENT_TYPES: dict[str, ElementType] = {
    t.name: t
    for t in [
        _entry("pred", 8, TypeKind.PRED, np.bool_),
        _entry("s1", 1, _S, ml_dtypes.int1),
        _entry("s2", 2, _S, ml_dtypes.int2),
        _entry("s4", 4, _S, ml_dtypes.int4),
        _entry("s8", 8, _S, np.int8),
        _entry("s16", 16, _S, np.int16),
        _entry("s32", 32, _S, np.int32),
        _entry("s64", 64, _S, np.int64),
        _entry("u1", 1, _U, ml_dtypes.uint1),
        _entry("u2", 2, _U, ml_dtypes.uint2),
        _entry("u4", 4, _U, ml_dtypes.uint4),
        _entry("u8", 8, _U, np.uint8),
        _entry("u16", 16, _U, np.uint16),
        _entry("u32", 32, _U, np.uint32),
        _entry("u64", 64, _U, np.uint64),
        _entry("f16", 16, _F, np.float16),
        _entry("bf16", 16, _F, ml_dtypes.bfloat16),
        _entry("f32", 32, _F, np.float32),
        _entry("f64", 64, _F, np.float64),
        _entry("c64", 64, TypeKind.COMPLEX, np.complex64),
        _entry("c128", 128, TypeKind.COMPLEX, np.complex128),
        _entry("f8e4m3fn", 8, _F, ml_dtypes.float8_e4m3fn),
        _entry("f8e5m2", 8, _F, ml_dtypes.float8_e5m2),
        _entry("f8e4m3fnuz", 8, _F, ml_dtypes.float8_e4m3fnuz),
        _entry("f8e5m2fnuz", 8, _F, ml_dtypes.float8_e5m2fnuz),
        _entry("f8e4m3b11fnuz", 8, _F, ml_dtypes.float8_e4m3b11fnuz),
        _entry("f8e3m4", 8, _F, ml_dtypes.float8_e3m4),
        _entry("f8e4m3", 8, _F, ml_dtypes.float8_e4m3),
        _entry("f8e8m0fnu", 8, _F, ml_dtypes.float8_e8m0fnu),
        _entry("f4e2m1fn", 4, _F, ml_dtypes.float4_e2m1fn),
        _entry("token", 0, TypeKind.TOKEN, None),
        _entry("tuple", 0, TypeKind.TUPLE, None),
        _entry("opaque", 0, TypeKind.OPAQUE, None),
    ]
}

_BY_DTYPE: dict[np.dtype, ElementType] = {
    t.dtype: t for t in ELEMENT_TYPES.values() if t.dtype is not None
}


def element_type(name: str) -> ElementType:
    """The primitive type spelled ``name`` in HLO text."""
    try:
        return ELEMENT_TYPES[name]
    except KeyError:
        raise XlapyError(f"unknown element type '{name}'") from None


def element_type_of_dtype(dtype: np.dtype | type) -> ElementType:
    """The primitive type that holds numpy values of ``dtype``."""
    try:
        return _BY_DTYPE[np.dtype(dtype)]
    except KeyError:
        raise XlapyError(f"no XLA element type for numpy dtype {np.dtype(dtype)}") from None
