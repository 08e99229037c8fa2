import ml_dtypes
import numpy as np
import pytest

from xlapy.errors import XlapyError
from xlapy.shapes import ELEMENT_TYPES, TypeKind, element_type, element_type_of_dtype

# (HLO name, bit width, numpy dtype) as XLA's primitive_util and JAX define them.
EXPECTED = [
    ("pred", 8, np.bool_), ("s1", 1, ml_dtypes.int1), ("s2", 2, ml_dtypes.int2), ("s4", 4, ml_dtypes.int4),
    ("s8", 8, np.int8), ("s16", 16, np.int16), ("s32", 32, np.int32), ("s64", 64, np.int64),
    ("u1", 1, ml_dtypes.uint1), ("u2", 2, ml_dtypes.uint2), ("u4", 4, ml_dtypes.uint4), ("u8", 8, np.uint8),
    ("u16", 16, np.uint16), ("u32", 32, np.uint32), ("u64", 64, np.uint64),
    ("f16", 16, np.float16), ("bf16", 16, ml_dtypes.bfloat16), ("f32", 32, np.float32),
    ("f64", 64, np.float64), ("c64", 64, np.complex64), ("c128", 128, np.complex128),
    ("f8e4m3fn", 8, ml_dtypes.float8_e4m3fn), ("f8e5m2", 8, ml_dtypes.float8_e5m2),
    ("f8e4m3fnuz", 8, ml_dtypes.float8_e4m3fnuz), ("f8e5m2fnuz", 8, ml_dtypes.float8_e5m2fnuz),
    ("f8e4m3b11fnuz", 8, ml_dtypes.float8_e4m3b11fnuz), ("f8e3m4", 8, ml_dtypes.float8_e3m4),
    ("f8e4m3", 8, ml_dtypes.float8_e4m3), ("f8e8m0fnu", 8, ml_dtypes.float8_e8m0fnu),
    ("f4e2m1fn", 4, ml_dtypes.float4_e2m1fn),
]


@pytest.mark.parametrize(("name", "bits", "dtype"), EXPECTED)
def test_array_types(name, bits, dtype):
    t = element_type(name)
    assert t.name == name and str(t) == name
    assert t.bit_width == bits
    assert t.dtype == np.dtype(dtype)
    assert t.is_array_type
    assert element_type_of_dtype(dtype) is t


def test_non_array_types_have_no_dtype():
    for name in ("token", "tuple", "opaque"):
        assert element_type(name).dtype is None
        assert not element_type(name).is_array_type
    assert set(ELEMENT_TYPES) == {name for name, _, _ in EXPECTED} | {"token", "tuple", "opaque"}


def test_kinds_and_byte_widths():
    assert element_type("s4").kind is TypeKind.SIGNED and element_type("s4").byte_width == 1
    assert element_type("u32").kind is TypeKind.UNSIGNED and element_type("u32").is_integral
    assert element_type("bf16").is_floating_point and element_type("c64").is_complex
    assert element_type("pred").kind is TypeKind.PRED and not element_type("pred").is_integral
    assert element_type("c128").byte_width == 16


def test_unknown_names_are_errors():
    with pytest.raises(XlapyError, match="unknown element type 'f33'"):
        element_type("f33")
    with pytest.raises(XlapyError, match="no XLA element type"):
        element_type_of_dtype(np.dtype("U3"))
