"""The f32 exp of 16-lane vectors in f32 arithmetic (xlapy/codegen/backends/mathlib/exponential_f32.py): its
constants, and its results against numpy's f64 exp rounded once to f32 (the interpreter's oracle), on every f32
with the slow tests."""

from __future__ import annotations

import decimal
import re
from fractions import Fraction

import llvmlite.binding as llvm
import numpy as np
import pytest
from llvmlite import ir

import xlapy
from tests.codegen.math_jit import compiled
from xlapy.codegen.backends.math_library import math_function
from xlapy.codegen.backends.mathlib.exponential import exp_table
from xlapy.codegen.backends.mathlib.exponential_f32 import (
    INV_STEP,
    LANES,
    STEP_1,
    STEP_2,
    STEP_3,
    f32_pairs,
)

AVX512 = "+avx512f" in llvm.get_host_cpu_features().flatten().split(",")


def _significant_bits(value: float) -> int:
    return abs(Fraction(value).numerator).bit_length()  # the odd part of the significand


def _is_f32(value: float) -> bool:
    return float(np.float32(value)) == value


def test_the_reduction_constants():
    context = decimal.Context(prec=50)
    step = context.divide(context.ln(decimal.Decimal(2)), decimal.Decimal(16))
    # n STEP_1 and n STEP_2 exact in f32 for |n| < 4096 (12 + 12 bits)
    assert _significant_bits(STEP_1) <= 12 and _significant_bits(STEP_2) <= 12
    assert all(map(_is_f32, (STEP_1, STEP_2, STEP_3, INV_STEP)))
    total = decimal.Decimal(STEP_1) + decimal.Decimal(STEP_2) + decimal.Decimal(STEP_3)
    assert abs(total - step) < decimal.Decimal("1e-17")
    assert float(np.float32(float(context.divide(1, step)))) == INV_STEP


def test_the_scale_tables():
    high, low = f32_pairs(tuple(exp_table()))
    context = decimal.Context(prec=50)
    for j in range(16):
        exact = context.power(decimal.Decimal(2), context.divide(decimal.Decimal(j), decimal.Decimal(16)))
        assert _is_f32(high[j]) and _is_f32(low[j])
        assert abs(decimal.Decimal(high[j]) + decimal.Decimal(low[j]) - exact) < exact * decimal.Decimal(2.0**-48)


def test_vectors_of_16_lanes_take_the_f32_form():
    module = ir.Module()
    for lanes in (16, 64):
        math_function(module, "exp", ir.VectorType(ir.FloatType(), lanes))
    text = str(module)
    scalings = len(re.findall(r"call <16 x float> @\"?llvm\.x86\.avx512\.mask\.scalef\.ps\.512", text))
    assert scalings == ((1 + 4) if AVX512 else 0)


def _special_and_edge_values() -> np.ndarray:
    edges = [0.0, -0.0, np.inf, -np.inf, np.nan, 88.72283, 88.72284, 89.0, 120.0, -87.33654, -87.33655, -87.33,
             -103.97207, -103.97208, -104.0, -110.0, -200.0, 1e-45, -1e-45, 1e-30, 0.0108, -0.0108, 0.0217, 2.0**-24]
    near = [np.nextafter(np.float32(v), np.float32(d)) for v in edges[5:] for d in (np.inf, -np.inf)]
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF], np.uint32).view(np.float32)
    return np.concatenate([np.array(edges + near, np.float32), nans])


def _arguments() -> np.ndarray:
    rng = np.random.default_rng(7)
    spread = (np.arange(1 << 20, dtype=np.uint64) * 4099 % (1 << 32)).astype(np.uint32).view(np.float32)
    softmax_like = rng.uniform(-20, 0, 1 << 18).astype(np.float32)
    # every lane of some vectors in the subnormal range (the f64 kernel for all of them), single lanes in others
    mixed = rng.uniform(-5, 5, 1 << 12).astype(np.float32)
    mixed[::37] = -95.0
    return np.concatenate([_special_and_edge_values(), spread, softmax_like, mixed,
                           rng.uniform(-104, -87, 1 << 12).astype(np.float32)])


def _reference(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore", invalid="ignore"):
        return np.exp(x.astype(np.float64)).astype(np.float32)


def _differences(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    return (got.view(np.uint32) != expected.view(np.uint32)) & ~(np.isnan(got) & np.isnan(expected))


@pytest.mark.parametrize("lanes", [LANES, 64])
def test_results_are_the_f64_exp_rounded_once(lanes: int):
    x = _arguments()
    got = compiled("exp", np.dtype(np.float32), 1, lanes)(x)
    different = _differences(got, _reference(x))
    assert not different.any(), [(float(a).hex(), float(b).hex()) for a, b in zip(x[different][:5], got[different])]


def test_a_compiled_program_uses_it():
    x = _arguments()
    text = f"HloModule m\nENTRY e {{ p = f32[{x.size}] parameter(0)  ROOT r = f32[{x.size}] exponential(p) }}"
    got = xlapy.compile(xlapy.parse_hlo(text), backend="cpu")(x)
    assert not _differences(got, _reference(x)).any()


@pytest.mark.slow
def test_every_f32():
    """All 2^32 arguments, 2^24 at a time (about a minute)."""
    count = 1 << 24
    text = f"HloModule m\nENTRY e {{ p = f32[{count}] parameter(0)  ROOT r = f32[{count}] exponential(p) }}"
    executable = xlapy.compile(xlapy.parse_hlo(text), backend="cpu")
    base = np.arange(count, dtype=np.uint32)
    for chunk in range(1 << 8):
        x = (base + np.uint32(chunk * count)).view(np.float32)
        different = _differences(executable(x), _reference(x))
        assert not different.any(), [float(v).hex() for v in x[different][:5]]
