"""TOTALORDER compares and sorts of the 1-byte float types against XLA:CPU, on
every pair of bit patterns: distinct NaN patterns are distinct, the fnuz types'
single NaN (0x80) sorts below every number, and f8e8m0fnu, which has no sign
bit, orders its bits as unsigned."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from tools.xla_cpu import run_on_xla_cpu
from xlapy.hlo import parse_module
from xlapy.interpreter import evaluate

DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")

# Every 1-byte float type of the interpreter that XLA:CPU compiles, with its width in bits.
BYTE_FLOATS = {
    "f8e4m3fn": (ml_dtypes.float8_e4m3fn, 8),
    "f8e5m2": (ml_dtypes.float8_e5m2, 8),
    "f8e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, 8),
    "f8e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, 8),
    "f8e4m3b11fnuz": (ml_dtypes.float8_e4m3b11fnuz, 8),
    "f8e4m3": (ml_dtypes.float8_e4m3, 8),
    "f8e3m4": (ml_dtypes.float8_e3m4, 8),
    "f8e8m0fnu": (ml_dtypes.float8_e8m0fnu, 8),
    "f4e2m1fn": (ml_dtypes.float4_e2m1fn, 4),
}


def _all_bit_patterns(type_name: str) -> np.ndarray:
    dtype, bits = BYTE_FLOATS[type_name]
    return np.arange(1 << bits, dtype=np.uint8).view(dtype)


def _six_compares(type_name: str, size: int) -> str:
    compares = "\n".join(f"  {d} = pred[{size}] compare(p, q), direction={d}, type=TOTALORDER" for d in DIRECTIONS)
    return (f"HloModule m\nENTRY main {{\n  p = {type_name}[{size}] parameter(0)\n"
            f"  q = {type_name}[{size}] parameter(1)\n{compares}\n"
            f"  ROOT t = ({', '.join([f'pred[{size}]'] * 6)}) tuple({', '.join(DIRECTIONS)})\n}}")


# One type of each encoding in the default run (no infinities, IEEE-like, no negative zero, unsigned, 4-bit), the
# others of the same encodings with the slow tests.
_SLOW_PAIRS = {"f8e4m3b11fnuz", "f8e5m2fnuz", "f8e4m3", "f8e3m4"}


@pytest.mark.parametrize("type_name", [pytest.param(t, marks=pytest.mark.slow) if t in _SLOW_PAIRS else t
                                       for t in BYTE_FLOATS])
def test_every_pair_of_bit_patterns_compares_as_on_xla_cpu(type_name: str) -> None:
    values = _all_bit_patterns(type_name)
    lhs, rhs = np.repeat(values, values.size), np.tile(values, values.size)
    text = _six_compares(type_name, lhs.size)
    expected = run_on_xla_cpu(text, lhs, rhs)
    got = evaluate(parse_module(text), lhs, rhs)
    for direction, want, have in zip(DIRECTIONS, expected, got):
        np.testing.assert_array_equal(have, want, err_msg=f"{type_name} {direction}")
    # A strict total order: each pattern equals only itself.
    np.testing.assert_array_equal(got[0], lhs.view(np.uint8) == rhs.view(np.uint8))


def _sort_module(type_name: str, size: int) -> str:
    return (f"HloModule m\nless {{\n  a = {type_name}[] parameter(0)\n  b = {type_name}[] parameter(1)\n"
            f"  ROOT lt = pred[] compare(a, b), direction=LT, type=TOTALORDER\n}}\n"
            f"ENTRY main {{\n  p = {type_name}[{size}] parameter(0)\n"
            f"  ROOT s = {type_name}[{size}] sort(p), dimensions={{0}}, to_apply=less\n}}")


# XLA:CPU's own sort misorders the smallest f8e5m2fnuz magnitudes (0x01..0x08 and
# their negatives come out shuffled), against its TOTALORDER compare above.
_SORT_XFAIL = pytest.mark.xfail(strict=True, reason="XLA:CPU sort misorders f8e5m2fnuz values of magnitude <= 2^-14")


@pytest.mark.parametrize("type_name", [pytest.param(t, marks=_SORT_XFAIL) if t == "f8e5m2fnuz" else t
                                       for t in BYTE_FLOATS])
def test_sorting_every_bit_pattern_gives_xla_cpus_order(type_name: str) -> None:
    values = np.random.default_rng(0).permutation(_all_bit_patterns(type_name))
    text = _sort_module(type_name, values.size)
    expected = run_on_xla_cpu(text, values)
    got = evaluate(parse_module(text), values)
    # XLA:CPU sorts 1-byte floats in a wider type and returns its NaNs canonical,
    # so only where NaNs land is compared, and the other patterns bit for bit.
    nan = np.isnan(expected.astype(np.float32))
    np.testing.assert_array_equal(np.isnan(got.astype(np.float32)), nan)
    np.testing.assert_array_equal(got.view(np.uint8)[~nan], expected.view(np.uint8)[~nan])
