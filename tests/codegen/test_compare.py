"""The comparison helpers of the loop-fusion tests on hand-made values, and
the corpus they run on: every module verifies and evaluates."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tools.loop_fusion_compare import (
    NAN_MISMATCH,
    assert_within_ulps,
    max_ulp_difference,
    random_arguments,
    result_element_types,
    ulp_tolerance,
)

CORPUS = sorted((Path(__file__).parent / "data" / "loop_fusions").glob("*.hlo"))
BF16 = ml_dtypes.bfloat16


def f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


def test_equal_floats_are_zero_apart():
    assert max_ulp_difference(f32(1.5, -2.0, 3e38), f32(1.5, -2.0, 3e38), "f32") == 0


def test_adjacent_floats_are_one_apart():
    one = f32(1.0)
    assert max_ulp_difference(np.nextafter(one, f32(2.0)), one, "f32") == 1
    assert max_ulp_difference(np.nextafter(one, f32(0.0)), one, "f32") == 1
    assert max_ulp_difference(f32(1.0, 2.0), f32(1.0, 2.0 + 2 * 2.0**-22), "f32") == 2


def test_distance_is_in_units_of_the_element_type():
    # 1 and the next bf16 (1 + 2^-7) are 1 apart in bf16 but 2^16 apart in f32.
    a = np.array([1.0], BF16)
    b = np.array([1.0 + 2.0**-7], BF16)
    assert max_ulp_difference(a, b, "bf16") == 1
    assert max_ulp_difference(a.astype(np.float32), b.astype(np.float32), "f32") == 1 << 16
    assert max_ulp_difference(np.array([1.0], np.float16), np.array([1.0009765625], np.float16), "f16") == 1
    assert max_ulp_difference(np.array([1.0]), np.array([1.0 + 2.0**-52]), "f64") == 1


def test_signed_zeros_are_equal():
    assert max_ulp_difference(f32(0.0), f32(-0.0), "f32") == 0
    assert max_ulp_difference(np.array([-0.0], BF16), np.array([0.0], BF16), "bf16") == 0


def test_distance_across_zero_counts_both_sides():
    smallest = float(np.finfo(np.float32).smallest_subnormal)
    assert max_ulp_difference(f32(smallest), f32(-smallest), "f32") == 2
    assert max_ulp_difference(f32(smallest), f32(-0.0), "f32") == 1


def test_nans():
    quiet, negative, payload = f32(np.nan), -f32(np.nan), np.array([0x7F800001], np.uint32).view(np.float32)
    assert max_ulp_difference(quiet, negative, "f32") == 0
    assert max_ulp_difference(quiet, payload, "f32") == 0
    assert max_ulp_difference(quiet, f32(1.0), "f32") == NAN_MISMATCH
    assert max_ulp_difference(f32(np.inf), quiet, "f32") == NAN_MISMATCH
    assert max_ulp_difference(np.array([np.nan], BF16), np.array([np.nan], BF16), "bf16") == 0


def test_infinities():
    largest = np.finfo(np.float32).max
    assert max_ulp_difference(f32(np.inf), f32(np.inf), "f32") == 0
    assert max_ulp_difference(f32(np.inf), f32(largest), "f32") == 1
    # -inf to +inf: every finite value and both zeros as one.
    assert max_ulp_difference(f32(-np.inf), f32(np.inf), "f32") == 2 * 0x7F800000
    assert max_ulp_difference(np.array([np.inf], np.float16), np.array([65504.0], np.float16), "f16") == 1


def test_largest_of_many():
    a = f32(1.0, 2.0, 3.0, 4.0)
    b = a.copy()
    b[2] = np.nextafter(np.nextafter(b[2], np.float32(9)), np.float32(9))
    b[0] = np.nextafter(b[0], np.float32(0))
    assert max_ulp_difference(a.reshape(2, 2), b.reshape(2, 2), "f32") == 2


def test_f64_extremes_do_not_overflow():
    largest = np.finfo(np.float64).max
    assert max_ulp_difference(np.array([-largest]), np.array([largest]), "f64") == 2 * 0x7FEFFFFFFFFFFFFF


def test_integers_are_absolute_differences():
    assert max_ulp_difference(np.array([5, -3], np.int32), np.array([5, 4], np.int32), "s32") == 7
    low, high = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    assert max_ulp_difference(np.array([low], np.int64), np.array([high], np.int64), "s64") == 2**64 - 1
    assert max_ulp_difference(np.array([0], np.uint64), np.array([2**64 - 1], np.uint64), "u64") == 2**64 - 1
    assert max_ulp_difference(np.array([200], np.uint8), np.array([3], np.uint8), "u8") == 197
    assert max_ulp_difference(np.array([-128], np.int8), np.array([127], np.int8), "s8") == 255


def test_pred():
    assert max_ulp_difference(np.array([True, False]), np.array([True, False]), "pred") == 0
    assert max_ulp_difference(np.array([True, False]), np.array([True, True]), "pred") == 1


def test_empty_and_scalar_arrays():
    assert max_ulp_difference(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32), "f32") == 0
    assert max_ulp_difference(np.float32(1.0), np.nextafter(np.float32(1.0), np.float32(2)), "f32") == 1


def test_dtype_or_type_name():
    assert max_ulp_difference(f32(1.0), f32(1.0), np.float32) == 0


def test_wrong_dtype_or_shape_is_an_error():
    with pytest.raises(ValueError, match="dtype"):
        max_ulp_difference(np.array([1.0]), f32(1.0), "f32")
    with pytest.raises(ValueError, match="shape"):
        max_ulp_difference(f32(1.0, 2.0), f32(1.0), "f32")


_TUPLE_MODULE = """HloModule pair
fused {
  p0 = f32[3] parameter(0)
  p1 = s32[3] parameter(1)
  n = f32[3] negate(p0)
  e = f32[3] exponential(p0)
  ROOT t = (f32[3], s32[3]) tuple(e, p1)
}
ENTRY main {
  p0 = f32[3] parameter(0)
  p1 = s32[3] parameter(1)
  ROOT f = (f32[3], s32[3]) fusion(p0, p1), kind=kLoop, calls=fused
}
"""


def test_tolerance_from_the_fused_opcodes():
    """Transcendental ops: 0 ulp in f32 (the f64 value rounded once, as the interpreter rounds it), 1 in other
    float types; none: 0."""
    assert ulp_tolerance(xlapy.parse_hlo(_TUPLE_MODULE)) == 0
    assert ulp_tolerance(xlapy.parse_hlo(_TUPLE_MODULE.replace("f32", "f64"))) == 1
    assert ulp_tolerance(xlapy.parse_hlo(_TUPLE_MODULE.replace("f32", "bf16"))) == 1
    assert ulp_tolerance(xlapy.parse_hlo(_TUPLE_MODULE.replace("exponential", "sqrt").replace("f32", "f64"))) == 0


def test_assert_within_ulps():
    module = xlapy.parse_hlo(_TUPLE_MODULE)
    assert result_element_types(module) == ["f32", "s32"]
    expected = (f32(1.0, -0.0, np.nan), np.array([1, 2, 3], np.int32))
    one_off = (f32(np.nextafter(np.float32(1), np.float32(2)), 0.0, np.nan), expected[1])
    assert_within_ulps(one_off, expected, module, 1)
    with pytest.raises(AssertionError, match=r"\[0\] \(e\).*1 of 3 elements differ"):
        assert_within_ulps(one_off, expected, module, 0)
    with pytest.raises(AssertionError, match="wrong sign"):
        assert_within_ulps((f32(1.0, 0.0, np.nan), expected[1]), expected, module, 0)
    with pytest.raises(AssertionError, match=r"\[1\] \(p1\).*got np.int32\(4\)"):
        assert_within_ulps((expected[0], np.array([1, 2, 4], np.int32)), expected, module, 1)
    with pytest.raises(AssertionError, match="dtype"):
        assert_within_ulps((expected[0], expected[1].astype(np.int64)), expected, module, 1)


def test_random_arguments_reach_the_edges():
    module = xlapy.parse_hlo(_TUPLE_MODULE.replace("f32[3]", "f32[64]").replace("s32[3]", "s32[64]"))
    floats, ints = random_arguments(module, 0)
    assert floats.dtype == np.float32 and ints.dtype == np.int32
    assert np.isnan(floats).any() and np.isinf(floats).any()
    assert {np.iinfo(np.int32).min, np.iinfo(np.int32).max, 0, -1} <= set(ints.tolist())
    again = random_arguments(module, 0)
    assert floats.tobytes() == again[0].tobytes() and ints.tobytes() == again[1].tobytes()
    assert floats.tobytes() != random_arguments(module, 1)[0].tobytes()


def test_random_indices_are_mostly_in_range():
    text = (Path(__file__).parent / "data" / "loop_fusions" / "gather_canonical.hlo").read_text()
    _, indices = random_arguments(xlapy.parse_hlo(text), 0)
    # Valid starts are 0..26 (33 - 7) and 0..68 (76 - 8): draws go 2 past on either side.
    assert indices.min() >= -2 and indices.max() <= 68 + 2
    assert np.mean((indices >= 0) & (indices <= 26)) > 0.3


@pytest.mark.parametrize("path", CORPUS, ids=lambda p: p.stem)
def test_corpus_module_verifies_and_evaluates(path: Path):
    """Each module is an entry computation around exactly one kLoop fusion,
    and the interpreter runs it on the tests' arguments."""
    module = xlapy.parse_hlo(path.read_text())
    xlapy.verify(module)
    fusions = [i for i in module.entry.instructions if i.opcode == "fusion"]
    assert len(fusions) == 1 and fusions[0].attr("kind") == "kLoop"
    assert {i.opcode for i in module.entry.instructions} <= {"parameter", "constant", "fusion", "tuple",
                                                             "get-tuple-element", "bitcast"}
    result = xlapy.evaluate(module, *random_arguments(module, 0))
    assert result is not None


def test_cli_compare_of_complex_counts_each_part_in_its_own_ulps():
    # `xlapy run --compare` (xlapy.runtime.ulps): real and imaginary parts apart, in f32/f64 ulps.
    from xlapy.runtime import ulps

    c64 = np.complex64
    assert ulps.max_ulp_difference(np.array([1 + 1j], c64), np.array([1 + 1j], c64)) == 0
    # 1.9 and 1.0 are 0.9 apart: (1.9 - 1) / 2^-23 f32 ulps in [1, 2).
    apart = int((np.float32(1.9) - np.float32(1.0)) / np.float32(2.0**-23))
    assert ulps.max_ulp_difference(np.array([1 + 1.9j], c64), np.array([1 + 1j], c64)) == apart
    assert ulps.max_ulp_difference(np.array([1.9 + 1j], c64), np.array([1 + 1j], c64)) == apart
    one_up = np.nextafter(np.float32(1), np.float32(2))
    assert ulps.max_ulp_difference(np.array([complex(1, one_up)], c64), np.array([1 + 1j], c64)) == 1
    assert ulps.max_ulp_difference(np.array([1 + 1j]), np.array([complex(1, 1 + 2.0**-52)])) == 1
    assert ulps.max_ulp_difference(np.array([complex(-0.0, 0.0)], c64), np.array([complex(0.0, -0.0)], c64)) == 0


def test_cli_compare_of_complex_nans_per_part():
    from xlapy.runtime import ulps

    c64 = np.complex64
    nan_real = np.array([complex(np.nan, 2)], c64)
    assert ulps.max_ulp_difference(nan_real, nan_real.copy()) == 0
    assert ulps.max_ulp_difference(nan_real, np.array([2 + 2j], c64)) == ulps.NAN_MISMATCH
    assert ulps.max_ulp_difference(np.array([complex(1, np.nan)], c64), np.array([complex(np.nan, 1)], c64)) \
        == ulps.NAN_MISMATCH
    # A NaN part that matches leaves the other part's distance.
    assert ulps.max_ulp_difference(np.array([complex(np.nan, one := 1.0)], c64),
                                   np.array([complex(np.nan, np.nextafter(np.float32(one), np.float32(0)))], c64)) == 1
