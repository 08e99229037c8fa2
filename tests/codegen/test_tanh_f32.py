"""f32 (and f16, bf16) tanh, in the interpreter and in compiled code, is XLA:CPU's approximation bit for bit,
within MAX_ULPS of the correctly rounded tanh: a bound every f32 argument respects and one argument reaches."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import xlapy
from xlapy.interpreter.xla_tanh import CLAMP, IDENTITY_BELOW, MAX_ULPS, ONE_FROM, fused_multiply_add
from xlapy.runtime.ulps import ulp_distance

# The argument where the approximation is furthest from the correctly rounded tanh (found by the slow sweep).
WORST_ARGUMENT = np.float32(3.7372891902923584)


def _tanh_module(element_type: str, count: int) -> xlapy.HloModule:
    return xlapy.parse_hlo(f"HloModule tanh\n\nENTRY main {{\n  x = {element_type}[{count}] parameter(0)\n"
                           f"  ROOT t = {element_type}[{count}] tanh(x)\n}}\n")


def _compiled_tanh(element_type: str, count: int) -> xlapy.Executable:
    return xlapy.compile(_tanh_module(element_type, count))


def _xla_tanh(x: np.ndarray) -> np.ndarray:
    return np.asarray(jax.jit(jnp.tanh)(x))


def _same_bits(actual: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """Per element: the same bits, or NaN on both sides."""
    unsigned = {2: np.uint16, 4: np.uint32}[actual.dtype.itemsize]
    same = actual.view(unsigned) == expected.view(unsigned)
    wide_actual, wide_expected = actual.astype(np.float64), expected.astype(np.float64)
    return same | (np.isnan(wide_actual) & np.isnan(wide_expected))


def _f32_arguments(rng: np.random.Generator) -> np.ndarray:
    """Every magnitude (random bit patterns), the range where tanh is not +-1, and each bound of the
    approximation with its neighbours, of both signs, with the special values."""
    bounds = np.array([IDENTITY_BELOW, CLAMP, ONE_FROM, 9.0, 1.0, np.finfo(np.float32).tiny], dtype=np.float32)
    steps = np.arange(-3, 4, dtype=np.int32)
    around = (bounds.view(np.int32)[:, None] + steps[None, :]).ravel().view(np.float32)
    special = np.array([0.0, np.inf, np.nan, 1e-45, 1e-40, np.finfo(np.float32).max], dtype=np.float32)
    finite_bits = rng.integers(0, 0x7F800000, 200_000, dtype=np.int64).astype(np.uint32).view(np.float32)
    uniform = rng.uniform(0.0, 10.0, 200_000).astype(np.float32)
    magnitudes = np.concatenate([around, special, finite_bits, uniform, [WORST_ARGUMENT]])
    return np.concatenate([magnitudes, -magnitudes])


def test_f32_tanh_is_xla_cpus_bit_for_bit():
    # An odd count: the loop's vector body and its scalar remainder both compute tanh.
    x = _f32_arguments(np.random.default_rng(0))
    x = np.concatenate([x, x[:5]]) if x.size % 2 == 0 else x
    xla = _xla_tanh(x)
    for name, result in [("compiled", _compiled_tanh("f32", x.size)(x)),
                         ("interpreter", xlapy.evaluate(_tanh_module("f32", x.size), x))]:
        result = np.asarray(result)
        same = _same_bits(result, xla)
        assert same.all(), f"{name}: differs from XLA:CPU at {x[~same][:8]}: {result[~same][:8]} vs {xla[~same][:8]}"


@pytest.mark.parametrize("element_type", ["bf16", "f16"])
def test_narrow_float_tanh_is_xla_cpus_on_every_value(element_type: str):
    dtype = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}[element_type]
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)
    xla = _xla_tanh(x)
    for name, result in [("compiled", _compiled_tanh(element_type, x.size)(x)),
                         ("interpreter", xlapy.evaluate(_tanh_module(element_type, x.size), x))]:
        same = _same_bits(np.asarray(result), xla)
        assert same.all(), f"{name}: differs from XLA:CPU at {x[~same][:8]}"


def test_f32_tanh_is_within_its_bound_of_the_exact_value_and_the_bound_is_reached():
    x = _f32_arguments(np.random.default_rng(1))
    exact = np.tanh(x.astype(np.float64)).astype(np.float32)
    distances = ulp_distance(np.asarray(_compiled_tanh("f32", x.size)(x)), exact)
    assert distances.max() == MAX_ULPS
    assert distances[x == WORST_ARGUMENT].max() == MAX_ULPS


def test_the_interpreters_fused_multiply_add_rounds_once():
    # (1 + 2^-23) + 2^-24 (1 - 2^-46): the exact value lies just below the midpoint between 1 + 2^-23 and
    # 1 + 2^-22 and rounds down; its f64 sum is the midpoint itself, which would round (to even) up.
    a = np.array([(1 + 2.0**-23) * 2.0**-12, -(1 + 2.0**-23) * 2.0**-12, 3.0], np.float32)
    b = np.array([(1 - 2.0**-23) * 2.0**-12, (1 - 2.0**-23) * 2.0**-12, 5.0], np.float32)
    c = np.array([1 + 2.0**-23, -(1 + 2.0**-23), 1.0], np.float32)
    assert fused_multiply_add(a, b, c).tolist() == [1 + 2.0**-23, -(1 + 2.0**-23), 16.0]
    twice_rounded = (a.astype(np.float64) * b + c).astype(np.float32)
    assert twice_rounded[:2].tolist() == [1 + 2.0**-22, -(1 + 2.0**-22)]


@pytest.mark.slow
def test_every_f32_tanh_is_xla_cpus_and_within_the_bound():
    chunk = 1 << 25
    compiled_tanh = _compiled_tanh("f32", chunk)
    worst = 0
    for start in range(0, 1 << 32, chunk):
        x = np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32).view(np.float32)
        compiled = np.asarray(compiled_tanh(x))
        same = _same_bits(compiled, _xla_tanh(x))
        assert same.all(), f"differs from XLA:CPU at {x[~same][:8]}"
        finite = np.isfinite(x)
        exact = np.tanh(x[finite].astype(np.float64)).astype(np.float32)
        worst = max(worst, int(ulp_distance(compiled[finite], exact).max()))
    assert worst == MAX_ULPS
