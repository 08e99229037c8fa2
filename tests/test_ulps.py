"""``xlapy.runtime.ulps`` on every element type, against oracles that do not
read bits: for floats of up to 16 bits, the place of each value in the sorted
list of all the values the type represents (every bit pattern enumerated with
ml_dtypes); for f32 and f64, counted ``np.nextafter`` steps; for integers,
Python's integer arithmetic."""

from __future__ import annotations

import math
import random

import ml_dtypes
import numpy as np
import pytest

from xlapy.runtime.ulps import NAN_DISTANCE, NAN_MISMATCH, error_in_epsilons, max_ulp_difference, ulp_distance
from xlapy.shapes import ELEMENT_TYPES, TypeKind

# xlapy's float types of up to 16 bits, and the 6-bit floats ml_dtypes also has.
NARROW_FLOATS = {name: t.dtype for name, t in ELEMENT_TYPES.items()
                 if t.kind is TypeKind.FLOAT and t.bit_width <= 16}
NARROW_FLOATS.update({"f6e2m3fn": np.dtype(ml_dtypes.float6_e2m3fn), "f6e3m2fn": np.dtype(ml_dtypes.float6_e3m2fn)})
INTEGERS = {name: t.dtype for name, t in ELEMENT_TYPES.items() if t.is_integral}


def every_value(dtype: np.dtype) -> np.ndarray:
    """Every bit pattern of a float type of up to 16 bits, as an array of it."""
    bits = ml_dtypes.finfo(dtype).bits
    return np.arange(1 << bits, dtype=np.uint8 if dtype.itemsize == 1 else np.uint16).view(dtype)


def as_f64(values: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):  # NaN patterns
        return values.astype(np.float64)


def sorted_positions(values: np.ndarray) -> np.ndarray:
    """The index of each value in the ascending list of the distinct non-NaN values (+0 and -0 one value)."""
    wide = as_f64(values)
    return np.searchsorted(np.unique(wide[~np.isnan(wide)]), wide)


@pytest.mark.parametrize("name", sorted(NARROW_FLOATS))
def test_narrow_float_distance_is_the_difference_of_sorted_positions(name: str):
    values = every_value(NARROW_FLOATS[name])
    numbers = values[~np.isnan(as_f64(values))]
    position = sorted_positions(numbers)
    if numbers.size <= 256:  # every pair
        a, b = np.repeat(np.arange(numbers.size), numbers.size), np.tile(np.arange(numbers.size), numbers.size)
    else:
        rng = np.random.default_rng(0)
        a, b = rng.integers(0, numbers.size, (2, 200_000))
        a[:1000] = b[:1000] + rng.integers(-3, 4, 1000).clip(-b[:1000], numbers.size - 1 - b[:1000])  # neighbours
    expected = np.abs(position[a] - position[b]).astype(np.uint64)
    np.testing.assert_array_equal(ulp_distance(numbers[a], numbers[b]), expected)
    assert max_ulp_difference(numbers[a], numbers[b]) == int(expected.max())


@pytest.mark.parametrize("name", sorted(NARROW_FLOATS))
def test_narrow_float_nans(name: str):
    values = every_value(NARROW_FLOATS[name])
    nan = np.isnan(as_f64(values))
    if not nan.any():  # f4e2m1fn and the 6-bit floats have no NaN
        return
    nans, numbers = values[nan], values[~nan]
    np.testing.assert_array_equal(ulp_distance(nans, nans[::-1]), 0)
    one = np.full(nans.shape, 1.0).astype(values.dtype)
    np.testing.assert_array_equal(ulp_distance(nans, one), NAN_DISTANCE)
    assert max_ulp_difference(np.concatenate([numbers, nans[:1]]), np.concatenate([numbers, one[:1]])) == NAN_MISMATCH


def test_the_types_without_a_sign_bit_or_narrower_than_a_byte():
    e8m0, e2m1 = ml_dtypes.float8_e8m0fnu, ml_dtypes.float4_e2m1fn
    assert ulp_distance(np.array(1.0, e8m0), np.array(2.0, e8m0)) == 1
    assert ulp_distance(np.array(-0.5, e2m1), np.array(6.0, e2m1)) == 8
    assert max_ulp_difference(np.array([-6.0, 6.0], e2m1), np.array([6.0, -6.0], e2m1)) == 14


def test_signed_zeros_are_one_value():
    for dtype in (*NARROW_FLOATS.values(), np.float32, np.float64):
        if ml_dtypes.finfo(dtype).min > 0:
            continue
        zero = np.array(0.0, dtype)
        assert ulp_distance(zero, -zero) == 0, dtype


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_wide_float_distance_counts_nextafter_steps(dtype: type):
    """Random starts of every magnitude (zeros, denormals and the largest finite number among them), each moved
    up or down by up to 300 ``nextafter`` steps: the distance is the number of steps taken, crossing zero and
    reaching infinity (where the steps stop) included."""
    rng = np.random.default_rng(1)
    info = np.finfo(dtype)
    starts = np.ldexp(rng.uniform(1, 2, 3000) * rng.choice([-1, 1], 3000),
                      rng.integers(info.minexp - info.nmant, info.maxexp, 3000))
    starts[:8] = [0.0, -0.0, info.smallest_subnormal, -info.smallest_subnormal, info.max, -info.max,
                  info.smallest_normal, -info.smallest_normal]
    starts = starts.astype(dtype)
    steps = rng.integers(0, 301, starts.size)
    target = np.where(rng.random(starts.size) < 0.5, np.inf, -np.inf).astype(dtype)
    moved, taken = starts.copy(), np.zeros(starts.size, np.uint64)
    for step in range(int(steps.max())):
        going = (steps > step) & np.isfinite(moved)
        with np.errstate(over="ignore"):
            moved[going] = np.nextafter(moved[going], target[going])
        taken[going] += 1
    assert np.isinf(moved).any()
    # nextafter passes from -0 to the smallest positive denormal: +0 and -0 are one place.
    np.testing.assert_array_equal(ulp_distance(starts, moved), taken)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_wide_float_extremes(dtype: type):
    """The number of finite floats of either sign is 2^(width-1) - 2^mantissa - 1 (every exponent but the
    all-ones one, times every mantissa, less zero); no distance overflows."""
    info = np.finfo(dtype)
    finite_per_sign = (1 << (info.bits - 1)) - (1 << info.nmant) - 1
    pairs = {(-info.max, info.max): 2 * finite_per_sign, (-np.inf, np.inf): 2 * finite_per_sign + 2,
             (0.0, np.inf): finite_per_sign + 1}
    for (a, b), expected in pairs.items():
        assert max_ulp_difference(np.array([a], dtype), np.array([b], dtype)) == expected


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128], ids=["c64", "c128"])
def test_complex_takes_the_larger_part(dtype: type):
    part = np.float32 if dtype == np.complex64 else np.float64
    one = part(1)
    up = [one, np.nextafter(one, part(2))]
    for _ in range(4):
        up.append(np.nextafter(up[-1], part(2)))
    a = np.array([complex(1, 1), complex(1, 1), complex(np.nan, 1)], dtype)
    b = np.array([complex(up[1], up[3]), complex(up[5], 1), complex(np.nan, 1)], dtype)
    np.testing.assert_array_equal(ulp_distance(a, b), [3, 5, 0])
    assert max_ulp_difference(np.array([complex(1, np.nan)], dtype), np.array([1], dtype)) == NAN_MISMATCH


@pytest.mark.parametrize("name", sorted(INTEGERS))
def test_integers_are_their_difference(name: str):
    dtype = INTEGERS[name]
    bits = ELEMENT_TYPES[name].bit_width
    signed = ELEMENT_TYPES[name].kind is TypeKind.SIGNED
    low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    rng = random.Random(bits)
    values = [v for v in (low, high, 0, low + 1, high - 1) if low <= v <= high]
    values += [rng.randint(low, high) for _ in range(200)]
    a = [rng.choice(values) for _ in range(500)] + [low, high]
    b = [rng.choice(values) for _ in range(500)] + [high, low]
    got = ulp_distance(np.array(a, dtype=object).astype(dtype), np.array(b, dtype=object).astype(dtype))
    assert [int(d) for d in got] == [abs(x - y) for x, y in zip(a, b)]
    assert max_ulp_difference(np.array(a, dtype=object).astype(dtype), np.array(b, dtype=object).astype(dtype)) \
        == high - low


def test_pred_is_zero_or_one():
    a, b = np.array([True, False, True, False]), np.array([True, True, False, False])
    np.testing.assert_array_equal(ulp_distance(a, b), [0, 1, 1, 0])
    assert max_ulp_difference(a, b) == 1 and max_ulp_difference(a, a) == 0


def test_shapes_dtypes_and_empty_arrays():
    assert max_ulp_difference(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32)) == 0
    assert ulp_distance(np.float32(1), np.float32(-1)).shape == ()
    assert ulp_distance(np.ones((2, 3), np.float16), np.zeros((2, 3), np.float16)).shape == (2, 3)
    with pytest.raises(ValueError, match="dtypes differ"):
        ulp_distance(np.zeros(2, np.float32), np.zeros(2, np.float64))
    with pytest.raises(ValueError, match="shapes differ"):
        max_ulp_difference(np.zeros(2, np.float32), np.zeros(3, np.float32))
    # The actual values are read in the expected values' type.
    assert max_ulp_difference(np.array([1.0, 2.0]), np.array([1.0, 2.0], np.float32)) == 0


def test_error_in_epsilons_measures_against_the_largest_magnitude():
    # A sum that cancels to near zero: 2^-30 against 0 is 8e8 ulps apart, but 2^-7 epsilons of f32 at 1.0.
    expected = np.array([1.0, 0.0, -0.5], np.float32)
    actual = np.array([1.0, 2.0 ** -30, -0.5], np.float32)
    assert max_ulp_difference(actual, expected) == 813694976  # (127 - 30) * 2^23 - 0: the positions of 2^-30 and 0
    assert error_in_epsilons(actual, expected) == 2.0 ** -30 / 2.0 ** -23
    assert error_in_epsilons(expected, expected) == 0.0
    # bf16's epsilon is 2^-7: one step at 4.0 is 2 epsilons of 4.0 ... measured against the largest, 8.0.
    bf16 = ml_dtypes.bfloat16
    assert error_in_epsilons(np.array([4.03125, 8.0], bf16), np.array([4.0, 8.0], bf16)) == 2.0 ** -5 / (2.0 ** -7 * 8)
    # Complex numbers: the larger part error against the largest magnitude.
    assert error_in_epsilons(np.array([1 + 1e-7j], np.complex64), np.array([1 + 0j], np.complex64)) == \
        pytest.approx(float(np.float32(1e-7)) / float(np.finfo(np.float32).eps), rel=1e-12)


def test_error_in_epsilons_is_infinite_for_what_no_rounding_explains():
    assert error_in_epsilons(np.array([1, 2], np.int32), np.array([1, 3], np.int32)) == math.inf
    assert error_in_epsilons(np.array([1, 2], np.int32), np.array([1, 2], np.int32)) == 0.0
    assert error_in_epsilons(np.array([np.nan, 1.0]), np.array([0.0, 1.0])) == math.inf
    assert error_in_epsilons(np.array([np.inf, 1.0]), np.array([1e308, 1.0])) == math.inf
    assert error_in_epsilons(np.array([np.nan, np.inf]), np.array([np.nan, np.inf])) == 0.0
    assert error_in_epsilons(np.array([0.0, 1e-300]), np.array([0.0, 0.0])) == math.inf


@pytest.mark.parametrize("position", [0, (1 << 16) - 1, 1 << 16, 200_001])
def test_the_largest_distance_is_found_in_every_piece_of_a_large_array(position: int):
    # max_ulp_difference works through large arrays in pieces: the worst element counts wherever it lies.
    expected = np.linspace(-1, 1, 200_002, dtype=np.float32).reshape(2, 100_001)
    actual = expected.copy()
    actual.reshape(-1)[position] = np.nextafter(np.nextafter(actual.reshape(-1)[position], np.float32(9)),
                                                 np.float32(9))
    assert max_ulp_difference(actual, expected) == 2
    actual.reshape(-1)[position] = np.nan
    assert max_ulp_difference(actual, expected) == NAN_MISMATCH
