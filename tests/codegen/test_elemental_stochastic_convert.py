"""``stochastic-convert`` to float types compiled for the CPU (an elemental rule; the HLO passes decompose only
signed integer results, as XLA does), bit for bit against the reference interpreter, which defines the op: the
magnitude rounded to an integer, up when the random bits are below its fraction scaled to their width, with the
operand's sign, then converted to the result type (to nearest even).

XLA:CPU refuses a float result ("Unsupported stochastic convert"), so the interpreter is the oracle, with a few
values worked out by hand. The inputs are every value of the 8- and 16-bit float types and many f32 and f64 bit
patterns with the special cases: conversions that tie (an odd integer halfway between two values of the result
type), subnormals, values that overflow the result type to inf (or NaN for a type without one), NaN, -0, and
random bits at the threshold and one below it.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from xlapy.errors import UnimplementedError
from xlapy.shapes import ELEMENT_TYPES

# Kernels compiled afresh, not loaded from an earlier code generator's cache (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_TARGETS = {
    "f16": ("bf16", "f8e4m3fn", "f8e5m2"),
    "bf16": ("f16", "f8e4m3fn", "f8e5m2fnuz"),
    "f32": ("bf16", "f16", "f8e4m3fn", "f8e5m2", "f64"),
    "f64": ("f32", "bf16", "f16"),
    "f8e5m2": ("f8e4m3fn", "bf16"),
}


def _dtype(type_name: str) -> np.dtype:
    return np.dtype(ELEMENT_TYPES[type_name].dtype)


def _random_type(source: str) -> str:
    return f"u{_dtype(source).itemsize * 8}"


def _values(source: str) -> np.ndarray:
    dtype = _dtype(source)
    unsigned = _UNSIGNED[dtype.itemsize]
    if dtype.itemsize <= 2:
        return np.arange(1 << (8 * dtype.itemsize), dtype=unsigned).view(dtype)
    rng = np.random.default_rng(3)
    patterns = rng.integers(0, np.iinfo(unsigned).max, 3000, dtype=unsigned, endpoint=True).view(dtype)
    fractional = rng.uniform(-600.0, 600.0, 3000)
    ties = np.array([257.0, 259.0, 513.0, 2049.0, 4097.0, 16777217.0, 2.0 ** 30 + 64.0]) + 0.5
    special = np.array([0.0, -0.0, 0.5, -0.5, 1.5, -2.25, 255.9, 448.0, 464.5, 65504.4, 65519.5, 65520.0,
                        3.3895e38, 3.4e38, 1e-40, -1e-40, 1e-310, 2.0 ** 52 + 0.5, 2.0 ** 53,
                        np.finfo(np.float64).max, np.inf, -np.inf, np.nan, -np.nan])
    with np.errstate(over="ignore"):
        extra = np.concatenate([fractional, ties, -ties, special]).astype(dtype)
    return np.concatenate([patterns, extra])


def _bits_around_thresholds(values: np.ndarray, random_type: str, rng: np.random.Generator) -> np.ndarray:
    """Per value: its threshold (the fraction of its magnitude scaled to the bits' width) or one below it."""
    bits = np.dtype(_UNSIGNED[_dtype(random_type).itemsize]).itemsize * 8
    with np.errstate(invalid="ignore"):
        magnitude = np.abs(values.astype(np.float64))
        scaled = np.floor((magnitude - np.floor(magnitude)) * float(2 ** bits))
    threshold = np.where(np.isfinite(scaled), scaled, 0.0).astype(_UNSIGNED[bits // 8])
    return threshold - rng.integers(0, 2, values.size).astype(threshold.dtype)


def _inputs(source: str) -> tuple[np.ndarray, np.ndarray]:
    """Each value with bits 0, the largest bits, random bits, and bits at or one below its threshold."""
    values = _values(source)
    random_type = _random_type(source)
    unsigned = _UNSIGNED[_dtype(random_type).itemsize]
    rng = np.random.default_rng(11)
    n = values.size
    bits = np.concatenate([np.zeros(n, unsigned), np.full(n, np.iinfo(unsigned).max, unsigned),
                           rng.integers(0, np.iinfo(unsigned).max, n, dtype=unsigned, endpoint=True),
                           _bits_around_thresholds(values, random_type, rng)])
    return np.tile(values, 4), bits


def _module(source: str, targets: tuple[str, ...], n: int) -> str:
    random_type = _random_type(source)
    lines = [f"r{k} = {t}[{n}] stochastic-convert(p, q)" for k, t in enumerate(targets)]
    shapes = ", ".join(f"{t}[{n}]" for t in targets)
    names = ", ".join(f"r{k}" for k in range(len(targets)))
    return (f"HloModule stochastic_convert_{source}\nENTRY e {{\n  p = {source}[{n}] parameter(0)\n"
            f"  q = {random_type}[{n}] parameter(1)\n  " + "\n  ".join(lines) +
            f"\n  ROOT t = ({shapes}) tuple({names})\n}}")


@pytest.mark.parametrize("source", list(_TARGETS))
def test_float_results_match_the_interpreter_bit_for_bit(source: str):
    values, bits = _inputs(source)
    text = _module(source, _TARGETS[source], values.size)
    executable = xlapy.compile(xlapy.parse_hlo(text))  # through the HLO passes: the decomposer leaves them
    assert_same(executable(values, bits), xlapy.evaluate(xlapy.parse_hlo(text), values, bits), exact_bits=True,
                context=f"stochastic-convert of {source}")


def test_values_worked_out_by_hand():
    x = np.array([1.5, 1.5, 1.5, -2.25, -2.25, 257.5, 257.5, 3.4e38, 65520.0, np.nan, -0.0, 1e-40, -0.75, np.inf,
                  -np.inf], np.float32)
    half, quarter = 1 << 31, 1 << 30
    bits = np.array([0, half - 1, half, quarter - 1, quarter, 0, 2 ** 32 - 1, 0, 0, 0, 0, 2 ** 32 - 1, 2 ** 32 - 1,
                     0, 0], np.uint32)
    text = """HloModule m
ENTRY e { p = f32[15] parameter(0)  q = u32[15] parameter(1)  b = bf16[15] stochastic-convert(p, q)
          h = f16[15] stochastic-convert(p, q)  ROOT t = (bf16[15], f16[15]) tuple(b, h) }"""
    to_bf16, to_f16 = xlapy.compile(xlapy.parse_hlo(text))(x, bits)
    inf, nan = np.inf, np.nan
    # 1.5 rounds up below half of 2^32; -2.25 away from zero below a quarter; 257.5 gives 258 (exact in bf16 and
    # f16) or 257 (a tie in bf16: 256); 3.4e38 is past bf16's largest finite value, 65520 past f16's; the
    # fraction of 1e-40 and of -0.75 at the largest bits rounds toward zero (-0.75 to -0).
    expected = [2, 2, 1, -3, -2, 258, 256, inf, 65536, nan, -0.0, 0, -0.0, inf, -inf]
    expected_f16 = [2, 2, 1, -3, -2, 258, 257, inf, inf, nan, -0.0, 0, -0.0, inf, -inf]
    assert_same(to_bf16, np.array(expected, np.float64).astype(ml_dtypes.bfloat16), exact_bits=True)
    assert_same(to_f16, np.array(expected_f16, np.float64).astype(np.float16), exact_bits=True)


def test_fused_with_the_ops_around_it():
    text = """HloModule m
ENTRY e { p = f32[64] parameter(0)  s = f32[64] parameter(1)  q = u32[64] parameter(2)
          m = f32[64] multiply(p, s)  b = bf16[64] stochastic-convert(m, q)  w = f32[64] convert(b)
          ROOT r = f32[64] add(w, p) }"""
    rng = np.random.default_rng(5)
    x, scale = rng.normal(0, 300, 64).astype(np.float32), rng.uniform(0.5, 4, 64).astype(np.float32)
    bits = rng.integers(0, 2 ** 32, 64, dtype=np.uint64).astype(np.uint32)
    executable = xlapy.compile(xlapy.parse_hlo(text))
    assert executable.summary.kernels == 1
    assert_same(executable(x, scale, bits), xlapy.evaluate(xlapy.parse_hlo(text), x, scale, bits), exact_bits=True)


@pytest.mark.parametrize("target", ["s8", "s32", "u8", "u64", "pred"])
def test_integer_results_in_a_given_fusion(target: str):
    # The CPU pipeline decomposes signed results before fusion; a fusion given as it is runs the rule for any type.
    values, bits = _inputs("f32")
    n = values.size
    text = f"""HloModule m
f {{ a = f32[{n}] parameter(0)  u = u32[{n}] parameter(1)  ROOT r = {target}[{n}] stochastic-convert(a, u) }}
ENTRY e {{ p = f32[{n}] parameter(0)  q = u32[{n}] parameter(1)
          ROOT fusion = {target}[{n}] fusion(p, q), kind=kLoop, calls=f }}"""
    module = xlapy.parse_hlo(text)
    assert_same(xlapy.compile(module, run_hlo_passes=False)(values, bits), xlapy.evaluate(module, values, bits),
                exact_bits=True)


def test_random_bits_narrower_than_a_byte_are_refused():
    module = xlapy.parse_hlo("""HloModule m
ENTRY e { p = f4e2m1fn[4] parameter(0)  q = u4[4] parameter(1)  ROOT r = bf16[4] stochastic-convert(p, q) }""")
    with pytest.raises(UnimplementedError, match=r"stochastic-convert \(r\) of f4e2m1fn with u4 random bits"):
        xlapy.compile(module)
