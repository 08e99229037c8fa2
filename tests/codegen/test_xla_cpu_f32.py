"""f32 (and f16, bf16) tanh and exp, in the interpreter and in compiled code, are XLA:CPU's approximations bit for
bit (xlapy/interpreter/xla_cpu_math.py), within their stated ulps of the correctly rounded value: bounds every f32
argument respects and one argument reaches. XLA:CPU flushes subnormal results to zero; xlapy does not, so both
sides are compared with subnormals flushed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from xlapy.interpreter import xla_cpu_math as m
from xlapy.runtime.ulps import ulp_distance

TINY = np.finfo(np.float32).tiny


@dataclass(frozen=True)
class Function:
    opcode: str
    xla: Callable
    exact: Callable[[np.ndarray], np.ndarray]  # on f64
    max_ulps: int
    worst_argument: np.float32  # where the bound is reached (found by the slow sweep)
    bounds: tuple[float, ...]  # where the approximation switches: tested with their neighbours
    sweep_up_to: float  # every f32 of [0, sweep_up_to] (both signs for exp) is compared in the slow sweep


TANH = Function("tanh", jnp.tanh, np.tanh, m.TANH_MAX_ULPS, np.float32(3.7372891902923584),
                (m.TANH_IDENTITY_BELOW, m.TANH_CLAMP, m.TANH_ONE_FROM, 9.0, 1.0), m.TANH_ONE_FROM)
EXP = Function("exponential", jnp.exp, np.exp, m.EXP_MAX_ULPS, np.float32(88.72167205810547),
               (*m.EXP_CLAMP, 88.3762626647949, 88.72283935546875, -87.33654475, -103.972084, 0.5, 1.0), 90.0)
FUNCTIONS = {f.opcode: f for f in (TANH, EXP)}


def _module(opcode: str, element_type: str, count: int) -> xlapy.HloModule:
    return xlapy.parse_hlo(f"HloModule m\n\nENTRY main {{\n  x = {element_type}[{count}] parameter(0)\n"
                           f"  ROOT y = {element_type}[{count}] {opcode}(x)\n}}\n")


def _f32_arguments(function: Function, rng: np.random.Generator) -> np.ndarray:
    """Every magnitude (random bit patterns), the range the function is computed on, and each bound of the
    approximation with its neighbours, of both signs, with the special values."""
    bounds = np.abs(np.array(function.bounds, dtype=np.float32))
    steps = np.arange(-3, 4, dtype=np.int32)
    around = (bounds.view(np.int32)[:, None] + steps[None, :]).ravel().view(np.float32)
    special = np.array([0.0, np.inf, np.nan, 1e-45, 1e-40, TINY, np.finfo(np.float32).max], dtype=np.float32)
    finite_bits = rng.integers(0, 0x7F800000, 200_000, dtype=np.int64).astype(np.uint32).view(np.float32)
    uniform = rng.uniform(0.0, function.sweep_up_to, 200_000).astype(np.float32)
    magnitudes = np.concatenate([around, special, finite_bits, uniform, [function.worst_argument]])
    return np.concatenate([magnitudes, -magnitudes])


@pytest.mark.parametrize("opcode", FUNCTIONS)
def test_f32_is_xla_cpus_bit_for_bit(opcode: str):
    function = FUNCTIONS[opcode]
    x = _f32_arguments(function, np.random.default_rng(0))
    x = np.concatenate([x, x[:5]]) if x.size % 2 == 0 else x  # odd: the loop's vector body and its remainder
    module = _module(opcode, "f32", x.size)
    xla = np.asarray(jax.jit(function.xla)(x))
    for name, result in [("compiled", xlapy.compile(module)(x)), ("interpreter", xlapy.evaluate(module, x))]:
        assert_same(result, xla, flush=True, context=name)


@pytest.mark.parametrize("element_type", ["bf16", "f16"])
@pytest.mark.parametrize("opcode", FUNCTIONS)
def test_narrow_floats_are_xla_cpus_on_every_value(opcode: str, element_type: str):
    dtype = {"bf16": ml_dtypes.bfloat16, "f16": np.float16}[element_type]
    x = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)
    module = _module(opcode, element_type, x.size)
    xla = np.asarray(jax.jit(FUNCTIONS[opcode].xla)(x))
    for name, result in [("compiled", xlapy.compile(module)(x)), ("interpreter", xlapy.evaluate(module, x))]:
        assert_same(result, xla, flush=True, context=name)


@pytest.mark.parametrize("opcode", FUNCTIONS)
def test_f32_is_within_its_bound_of_the_exact_value_and_the_bound_is_reached(opcode: str):
    function = FUNCTIONS[opcode]
    x = _f32_arguments(function, np.random.default_rng(1))
    with np.errstate(all="ignore"):
        exact = function.exact(x.astype(np.float64)).astype(np.float32)
    normal = ~(np.abs(exact) < TINY)  # subnormal results: flushed by XLA, not bounded in ulps
    distances = ulp_distance(np.asarray(xlapy.compile(_module(opcode, "f32", x.size))(x))[normal], exact[normal])
    assert distances.max() == function.max_ulps
    assert distances[x[normal] == function.worst_argument].max() == function.max_ulps
    if opcode == "exponential":
        assert distances[x[normal] < m.EXP_ONE_ULP_BELOW].max() == 1


def test_the_interpreters_fused_multiply_add_rounds_once():
    # (1 + 2^-23) + 2^-24 (1 - 2^-46): the exact value lies just below the midpoint between 1 + 2^-23 and
    # 1 + 2^-22 and rounds down; its f64 sum is the midpoint itself, which would round (to even) up.
    a = np.array([(1 + 2.0**-23) * 2.0**-12, -(1 + 2.0**-23) * 2.0**-12, 3.0], np.float32)
    b = np.array([(1 - 2.0**-23) * 2.0**-12, (1 - 2.0**-23) * 2.0**-12, 5.0], np.float32)
    c = np.array([1 + 2.0**-23, -(1 + 2.0**-23), 1.0], np.float32)
    assert m.fused_multiply_add(a, b, c).tolist() == [1 + 2.0**-23, -(1 + 2.0**-23), 16.0]
    twice_rounded = (a.astype(np.float64) * b + c).astype(np.float32)
    assert twice_rounded[:2].tolist() == [1 + 2.0**-22, -(1 + 2.0**-22)]


@pytest.mark.slow
@pytest.mark.parametrize("opcode", FUNCTIONS)
def test_every_f32_is_xla_cpus_and_within_the_bound(opcode: str):
    """Every f32 of the range where the function is not constant: tanh is odd (the sample above checks the
    negative side), exp both sides."""
    function = FUNCTIONS[opcode]
    chunk = 1 << 24
    compiled = xlapy.compile(_module(opcode, "f32", chunk))
    last = int(np.float32(function.sweep_up_to).view(np.uint32))
    signs = (0, 1 << 31) if opcode == "exponential" else (0,)
    worst = 0
    for sign in signs:
        for start in range(0, last + 1, chunk):
            x = (np.arange(start, start + chunk, dtype=np.uint64).astype(np.uint32) | np.uint32(sign)).view(np.float32)
            result = np.asarray(compiled(x))
            assert_same(result, np.asarray(jax.jit(function.xla)(x)), flush=True, context=f"from {start:#x}")
            with np.errstate(all="ignore"):
                exact = function.exact(x.astype(np.float64)).astype(np.float32)
            normal = np.isfinite(exact) & ~(np.abs(exact) < TINY) & np.isfinite(x)
            worst = max(worst, int(ulp_distance(result[normal], exact[normal]).max()))
    assert worst == function.max_ulps
