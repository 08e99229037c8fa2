"""Arguments of entry parameters: converted only when no value changes beyond
rounding, otherwise an XlapyError naming the parameter (xlapy.hlo.arguments)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from xlapy.errors import XlapyError
from xlapy.hlo.arguments import check_argument
from xlapy.shapes import parse_shape


def check(value, shape: str, name: str = "p"):
    return check_argument(value, parse_shape(shape), name)


@pytest.mark.parametrize("value, shape, expected", [
    # Rounding to a narrower float is what XLA's convert does.
    (np.array([1.1, 2.5], np.float64), "f32[2]", np.array([1.1, 2.5], np.float32)),
    (np.array([1.1, 1e10], np.float64), "f16[2]", np.array([1.1, np.inf], np.float16)),
    (np.array([1.1, 3.0], np.float64), "bf16[2]", np.array([1.1, 3.0], ml_dtypes.bfloat16)),
    (np.array([0.3, -2.0]), "f8e4m3fn[2]", np.array([0.3, -2.0], ml_dtypes.float8_e4m3fn)),
    (np.array([3, -4], np.int64), "f32[2]", np.array([3, -4], np.float32)),
    (np.array([3, -4], np.int64), "c64[2]", np.array([3, -4], np.complex64)),
    (np.array([1 + 2j]), "c64[1]", np.array([1 + 2j], np.complex64)),
    # Whole numbers in range for integral and pred parameters.
    (np.array([3.0, -8.0]), "s4[2]", np.array([3, -8], ml_dtypes.int4)),
    (np.array([0.0, 1.0]), "pred[2]", np.array([False, True])),
    (np.array([0, 1], np.int32), "pred[2]", np.array([False, True])),
    (np.array([255, 0], np.int64), "u8[2]", np.array([255, 0], np.uint8)),
    (np.uint64(2**64 - 1), "u64[]", np.array(2**64 - 1, np.uint64)),
    (2**63 - 1, "s64[]", np.array(2**63 - 1, np.int64)),
    # The floats nearest the 64-bit limits that the types still hold.
    (np.array([-2.0**63, 2.0**63 - 1024]), "s64[2]", np.array([-2**63, 2**63 - 1024], np.int64)),
    (np.array([0.0, 2.0**64 - 2048]), "u64[2]", np.array([0, 2**64 - 2048], np.uint64)),
    ([[1, 2], [3, 4]], "s32[2,2]", np.array([[1, 2], [3, 4]], np.int32)),
    (True, "pred[]", np.array(True)),
    # ml_dtypes arrays, for their own type and convertible ones.
    (np.array([1.5, -2], ml_dtypes.bfloat16), "bf16[2]", np.array([1.5, -2], ml_dtypes.bfloat16)),
    (np.array([1.5, -2], ml_dtypes.bfloat16), "f32[2]", np.array([1.5, -2], np.float32)),
    (np.array([1, -2], ml_dtypes.bfloat16), "s32[2]", np.array([1, -2], np.int32)),
    (np.array([7, -8], ml_dtypes.int4), "s32[2]", np.array([7, -8], np.int32)),
    (np.array([7, 0], ml_dtypes.int4), "u4[2]", np.array([7, 0], ml_dtypes.uint4)),
    (np.array([1, 2], ml_dtypes.float8_e4m3fn), "c64[2]", np.array([1, 2], np.complex64)),
])
def test_conversions_that_keep_every_value(value, shape, expected):
    got = check(value, shape)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got.astype(np.complex128), expected.astype(np.complex128))


@pytest.mark.parametrize("value, shape, message", [
    (np.array([1 + 1j, 2]), "f32[2]", "argument for parameter p is complex (complex128), but the parameter is "
                                      "f32[2]: the imaginary part would be lost"),
    (np.array([1 + 0j]), "s32[1]", "is complex (complex128), but the parameter is s32[1]"),
    (np.array([1.5, 2.0]), "s32[2]", "argument for parameter p holds 1.5, which s32 cannot hold"),
    (np.array([np.nan]), "s32[1]", "holds nan, which s32 cannot hold"),
    (np.array([np.inf]), "u8[1]", "holds inf, which u8 cannot hold"),
    (np.array([256.0]), "u8[1]", "holds 256.0, which u8 cannot hold"),
    (np.array([0.5]), "pred[1]", "holds 0.5, which pred cannot hold"),
    (np.array([2, 0]), "pred[2]", "holds 2, which is out of range for pred ([0, 1])"),
    (np.array([1, 300], np.int32), "s8[2]", "holds 300, which is out of range for s8 ([-128, 127])"),
    (np.array([-1], np.int32), "u32[1]", "holds -1, which is out of range for u32"),
    (np.array([8]), "s4[1]", "holds 8, which is out of range for s4 ([-8, 7])"),
    (np.array([-1], ml_dtypes.int4), "u8[1]", "holds -1, which is out of range for u8"),
    (np.uint64(2**64 - 1), "s64[]", "holds 18446744073709551615, which is out of range for s64"),
    (2**70, "s64[]", "argument for parameter p is the integer 1180591620717411303424, which no element type holds"),
    (np.array([1.5], ml_dtypes.bfloat16), "s32[1]", "holds 1.5, which s32 cannot hold"),
    # 2**63 - 1 and 2**64 - 1 are not floats: the bounds must not round up to them.
    (2.0**63, "s64[]", "holds 9.223372036854776e+18, which s64 cannot hold"),
    (np.array([2.0**64]), "u64[1]", "holds 1.8446744073709552e+19, which u64 cannot hold"),
    (np.float32(2.0**31), "s32[]", "holds 2147483648.0, which s32 cannot hold"),
])
def test_conversions_that_would_change_a_value_are_refused(value, shape, message):
    with pytest.raises(XlapyError) as error:
        check(value, shape)
    assert message in str(error.value)


@pytest.mark.parametrize("value, message", [
    (np.array(["a", "b"]), "argument for parameter p must be numeric, got an array of dtype <U1"),
    (np.array([b"a", b"b"]), "must be numeric, got an array of dtype |S1"),
    (np.zeros(2, dtype=object), "must be numeric, got an array of dtype object"),
    (np.zeros(2, dtype=[("a", "f4")]), "must be numeric, got an array of dtype [('a', '<f4')]"),
    (np.zeros(2, dtype="V4"), "must be numeric, got an array of dtype |V4"),
    (np.array(["2020-01-01", "2020-01-02"], dtype="datetime64[D]"), "must be numeric"),
    ("ab", "argument for parameter p must be an array or a number, got a str"),
    (b"ab", "must be an array or a number, got a bytes"),
    ({"a": 1}, "must be an array or a number, got a dict"),
    (None, "must be an array or a number, got a NoneType"),
    ([[1, 2], [3]], "argument for parameter p is not an array"),
    (np.zeros(3), "argument for parameter p has shape (3,), expected f32[2]"),
    (np.zeros((2, 1)), "has shape (2, 1), expected f32[2]"),
    (1.0, "has shape (), expected f32[2]"),
])
def test_what_is_not_an_array_of_the_shape_is_refused(value, message):
    with pytest.raises(XlapyError) as error:
        check(value, "f32[2]")
    assert message in str(error.value)


def test_tuple_arguments_must_have_the_tuple_shape():
    shape = "(f32[], (s32[2], pred[]))"
    got = check((1.5, ([1, 2], True)), shape)
    assert got[0].dtype == np.float32 and got[1][0].dtype == np.int32 and got[1][1].dtype == np.bool_
    with pytest.raises(XlapyError, match=r"argument for parameter p must have 2 elements for \(f32\[\], "
                                         r"\(s32\[2\], pred\[\]\)\), got 1"):
        check((1.5,), shape)
    with pytest.raises(XlapyError, match=r"argument for parameter p must have 2 elements .*, got 3"):
        check((1.5, ([1, 2], True), 3), shape)
    with pytest.raises(XlapyError, match=r"argument for parameter p \(tuple element 1\) must have 2 elements"):
        check((1.5, ([1, 2], True, 1)), shape)
    with pytest.raises(XlapyError, match=r"parameter p \(tuple element 1\) \(tuple element 0\) holds 1.5"):
        check((1.5, ([1.5, 2], True)), shape)
    with pytest.raises(XlapyError, match=r"must be a tuple of 2 values for .*, got an array of shape"):
        check(np.zeros(2), shape)


def test_an_argument_of_the_parameter_type_is_passed_as_it_is():
    value = np.arange(6, dtype=np.int32).reshape(2, 3)
    assert check(value, "s32[2,3]") is value
