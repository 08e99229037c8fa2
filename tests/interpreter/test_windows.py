"""reduce-window and select-and-scatter in the reference interpreter, against
XLA:CPU running the same HLO text, and against JAX for pooling programs."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import xlapy
import xlapy.interpreter  # registers the rules
from tools.compare import assert_same, assert_within_sum_of_magnitudes
from tools.xla_cpu import run_on_xla_cpu
from xlapy.frontends.jax import from_jax
from xlapy.interpreter.evaluator import evaluate

_DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "s32": np.int32}


def _values(rng: np.random.Generator, shape: tuple[int, ...], element_type: str) -> np.ndarray:
    if element_type == "s32":
        return rng.integers(-20, 20, shape).astype(np.int32)
    return rng.standard_normal(shape).astype(_DTYPES[element_type])


def _check(text: str, *args: Any, **tolerance: Any) -> None:
    assert_same(evaluate(xlapy.parse_hlo(text), *args), run_on_xla_cpu(text, *args), **tolerance)



def _dims(shape: tuple[int, ...]) -> str:
    return ",".join(map(str, shape))


_BINARY = """
{name} {{
  a = {T}[] parameter(0)
  b = {T}[] parameter(1)
{body}
}}
"""
_BODIES = {
    "add": "  ROOT r = {T}[] add(a, b)",
    "max": "  ROOT r = {T}[] maximum(a, b)",
    # Order-sensitive: 3*a - b.
    "affine": "  three = {T}[] constant(3)\n  m = {T}[] multiply(a, three)\n  ROOT r = {T}[] subtract(m, b)",
    "ge": "  ROOT r = pred[] compare(a, b), direction=GE",
    "gt": "  ROOT r = pred[] compare(a, b), direction=GT",
    "le": "  ROOT r = pred[] compare(a, b), direction=LE",
}


def _computation(name: str, body: str, element_type: str) -> str:
    return _BINARY.format(name=name, T=element_type, body=_BODIES[body].replace("{T}", element_type))


# -- reduce-window --------------------------------------------------------------

# name: (input shape, output shape, window)
_REDUCE_WINDOWS = {
    "pool": ((6, 8), (3, 4), "size=2x2 stride=2x2"),
    "same_padding": ((5, 6), (5, 6), "size=3x3 pad=1_1x1_1"),
    "base_dilation": ((4, 5), (8, 4), "size=2x3 stride=1x2 pad=2_0x1_3 lhs_dilate=2x1"),
    "window_dilation": ((6, 7), (4, 2), "size=2x2 stride=1x2 rhs_dilate=2x3"),
    "prefix_scan": ((7,), (7,), "size=7 pad=6_0"),
    "negative_padding": ((5, 3), (3, 3), "size=2x1 pad=-1_0x0_0"),
    "rank3_mixed": ((3, 4, 5), (3, 2, 7), "size=1x3x2 stride=1x2x1 pad=0_0x1_0x0_1 lhs_dilate=1x1x2 rhs_dilate=1x1x3"),
    "empty_result": ((2, 3), (0, 3), "size=3x1"),
}


def _reduce_window_text(name: str, element_type: str, body: str) -> str:
    shape, out, window = _REDUCE_WINDOWS[name]
    return (f"HloModule reduce_window\n{_computation('combine', body, element_type)}\nENTRY main {{\n"
            f"  input = {element_type}[{_dims(shape)}] parameter(0)\n"
            f"  init = {element_type}[] parameter(1)\n"
            f"  ROOT reduce_window = {element_type}[{_dims(out)}] reduce-window(input, init), window={{{window}}}, "
            f"to_apply=combine\n}}\n")


_REDUCE_WINDOW_CASES = [(name, "s32", "affine") for name in sorted(_REDUCE_WINDOWS)] + [
    ("pool", "f32", "max"), ("same_padding", "f32", "add"), ("base_dilation", "f32", "add"),
    ("rank3_mixed", "f32", "max"), ("window_dilation", "bf16", "add"), ("prefix_scan", "bf16", "add"),
]


@pytest.mark.parametrize("name, element_type, body", _REDUCE_WINDOW_CASES)
def test_reduce_window(name: str, element_type: str, body: str) -> None:
    rng = np.random.default_rng(len(name))
    shape = _REDUCE_WINDOWS[name][0]
    # A non-identity init: padding and dilation holes must be skipped, not reduced as init.
    init = np.asarray(2, _DTYPES[element_type])
    # Bit for bit in f32 and bf16 too (measured: 0 ulps, 11 seeds).
    _check(_reduce_window_text(name, element_type, body), _values(rng, shape, element_type), init)


_VARIADIC_REDUCE_WINDOW = """HloModule variadic_reduce_window

argmax {
  value_a = f32[] parameter(0)
  index_a = s32[] parameter(1)
  value_b = f32[] parameter(2)
  index_b = s32[] parameter(3)
  greater = pred[] compare(value_b, value_a), direction=GT
  value = f32[] select(greater, value_b, value_a)
  index = s32[] select(greater, index_b, index_a)
  ROOT result = (f32[], s32[]) tuple(value, index)
}

ENTRY main {
  values = f32[7,6] parameter(0)
  indices = s32[7,6] parameter(1)
  init_value = f32[] parameter(2)
  init_index = s32[] parameter(3)
  ROOT reduce_window = (f32[%s], s32[%s]) reduce-window(values, indices, init_value, init_index),
    window={%s}, to_apply=argmax
}
"""


@pytest.mark.parametrize("window, out", [("size=3x2 stride=2x2", "3,3"), ("size=3x2 stride=2x2 pad=1_1x1_0", "4,3")])
def test_variadic_reduce_window(window: str, out: str) -> None:
    rng = np.random.default_rng(3)
    if "pad=" in window:
        values = rng.permutation(42).reshape(7, 6).astype(np.float32)  # no ties: see test_select_and_scatter
    else:
        values = rng.integers(-4, 4, (7, 6)).astype(np.float32)  # ties: the first maximum is kept
    indices = np.arange(42, dtype=np.int32).reshape(7, 6)
    _check(_VARIADIC_REDUCE_WINDOW % (out, out, window), values, indices, np.float32(-np.inf), np.int32(-1),
           exact_bits=True)


def test_pooling_from_jax() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)

    def pools(x):
        window, strides = (1, 3, 2, 1), (1, 2, 1, 1)
        padding = ((0, 0), (1, 1), (0, 1), (0, 0))
        return (jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, window, strides, padding),
                jax.lax.reduce_window(x, 0.0, jax.lax.add, window, strides, padding, window_dilation=(1, 2, 2, 1)),
                jnp.cumsum(x, axis=1), jax.lax.cummax(x, axis=2))

    got, expected = evaluate(from_jax(pools, x), x), jax.jit(pools)(x)
    # Max pool, cumulative sum and cumulative max: bit for bit (measured: 0 ulps, 11 seeds).
    assert_same([got[0], *got[2:]], [expected[0], *expected[2:]])
    # The dilated sum pool adds its window in another order than XLA:CPU (measured: within 1.41 eps of
    # the sum of |terms|, 11 seeds; that is up to 1024 ulps of results near zero).
    assert_within_sum_of_magnitudes(got[1], expected[1], jax.jit(pools)(np.abs(x))[1], epsilons=2)


# -- select-and-scatter ---------------------------------------------------------

# name: (operand shape, source shape, window)
_SELECT_AND_SCATTERS = {
    "pool": ((6, 8), (3, 4), "size=2x2 stride=2x2"),
    "overlapping": ((6, 7), (4, 3), "size=3x3 stride=1x2"),
    "same_padding": ((5, 6), (5, 6), "size=3x3 pad=1_1x1_1"),
    "stride_past_padding": ((5, 5), (3, 2), "size=2x3 stride=2x3 pad=1_0x0_2"),
    "rank3": ((2, 6, 4), (2, 3, 4), "size=1x2x2 stride=1x2x1 pad=0_0x0_0x1_0"),
    "one_dimensional": ((9,), (4,), "size=3 stride=2"),
}


def _select_and_scatter_text(name: str, element_type: str, select: str, scatter: str) -> str:
    shape, source, window = _SELECT_AND_SCATTERS[name]
    return (f"HloModule select_and_scatter\n{_computation('select', select, element_type)}"
            f"{_computation('scatter', scatter, element_type)}\nENTRY main {{\n"
            f"  operand = {element_type}[{_dims(shape)}] parameter(0)\n"
            f"  source = {element_type}[{_dims(source)}] parameter(1)\n"
            f"  init = {element_type}[] parameter(2)\n"
            f"  ROOT select_and_scatter = {element_type}[{_dims(shape)}] select-and-scatter(operand, source, init), "
            f"window={{{window}}}, select=select, scatter=scatter\n}}\n")


_SELECT_AND_SCATTER_CASES = [(name, "ge") for name in sorted(_SELECT_AND_SCATTERS)] + [
    ("pool", "gt"), ("overlapping", "gt"), ("overlapping", "le"), ("stride_past_padding", "le"), ("rank3", "gt"),
    ("one_dimensional", "le"),
]


@pytest.mark.parametrize("name, select", _SELECT_AND_SCATTER_CASES)
def test_select_and_scatter(name: str, select: str) -> None:
    # An order-sensitive scatter checks argument order and the order of overlaps.
    rng = np.random.default_rng(len(name))
    shape, source, window = _SELECT_AND_SCATTERS[name]
    if "pad=" in window:
        # XLA:CPU rewrites select-and-scatter into a variadic reduce-window that,
        # with low padding, visits window elements out of row-major order: so
        # ties would be broken unlike XLA's semantics. Distinct values here.
        operand = (rng.permutation(int(np.prod(shape))) - 10).reshape(shape).astype(np.int32)
    else:
        operand = rng.integers(-3, 3, shape).astype(np.int32)  # many ties: which one is selected matters
    _check(_select_and_scatter_text(name, "s32", select, "affine"), operand, _values(rng, source, "s32"),
           np.int32(1))


@pytest.mark.parametrize("name, element_type", [("overlapping", "f32"), ("same_padding", "bf16")])
def test_select_and_scatter_floats(element_type: str, name: str) -> None:
    rng = np.random.default_rng(6)
    shape, source, _ = _SELECT_AND_SCATTERS[name]
    # Continuous values: no ties (see test_select_and_scatter).
    _check(_select_and_scatter_text(name, element_type, "ge", "add"), _values(rng, shape, element_type),
           _values(rng, source, element_type), np.asarray(0, _DTYPES[element_type]))  # measured: 0 ulps, 11 seeds


def test_max_pool_gradient_from_jax() -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 6, 7, 2)).astype(np.float32)
    g = rng.standard_normal((2, 3, 4, 2)).astype(np.float32)

    def grad(x, g):
        def pool(x):
            return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 3, 2, 1), (1, 2, 2, 1), "SAME")
        return jax.vjp(pool, x)[1](g)[0]

    module = from_jax(grad, x, g)
    assert any(i.opcode == "select-and-scatter" for c in module.computations for i in c.instructions)
    assert_same(evaluate(module, x, g), jax.jit(grad)(x, g))  # measured: 0 ulps, 11 seeds
