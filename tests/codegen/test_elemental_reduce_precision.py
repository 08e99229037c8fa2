"""reduce-precision compiled for the CPU (a kernel of the loop emitter), bit for bit against the reference
interpreter and XLA:CPU: every f16, bf16 and 8-bit float value, and many f32 and f64 bit patterns (special
values, denormals, the edges of the reduced ranges), each reduced to several (exponent, mantissa) widths.

XLA rounds the mantissa to nearest even, sends exponents past the reduced range to ±inf and those below it
(denormals included) to ±0, and keeps NaN, also with no mantissa bit left (``reducePrecision``,
``xla/mlir_hlo/mhlo/transforms/transformation_helpers.h``, which XLA:CPU runs)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from tools.oracles import NO_JAX

# (exponent bits, mantissa bits): f16's and bf16's widths, narrower ones, one without a mantissa (NaN becomes
# inf), the smallest exponent, and widths at or past the source's.
_WIDTHS = [(5, 10), (8, 7), (5, 2), (3, 0), (1, 1), (4, 3), (10, 40), (11, 52)]

_UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


# Kernels compiled afresh, not loaded from an earlier code generator's cache (tests/conftest.py).
pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def _every_value(dtype) -> np.ndarray:
    width = np.dtype(dtype).itemsize
    return np.arange(1 << (8 * width), dtype=_UNSIGNED[width]).view(dtype)


def _bit_patterns(dtype, count: int) -> np.ndarray:
    """Random bit patterns (every exponent, NaN payloads) with values around the reduced ranges' edges."""
    rng = np.random.default_rng(5)
    uint = _UNSIGNED[np.dtype(dtype).itemsize]
    random = rng.integers(0, np.iinfo(uint).max, count, dtype=uint, endpoint=True).view(dtype)
    # Around the largest and smallest normals of the reduced widths, ties of the mantissa rounding included.
    edges = [np.ldexp(1.0, k) * f for k in (-1022, -149, -126, -25, -24, -14, -6, -2, 0, 7, 8, 15, 16, 127, 128, 1023)
             for f in (1.0, 1.5, 1.75, 1.9990234375, 1 + 2.0 ** -10, 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11)]
    with np.errstate(over="ignore", invalid="ignore"):
        edges = np.array(edges, np.float64).astype(dtype)
        special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan], dtype)
        values = np.concatenate([random, edges, -edges, special])
        return np.concatenate([values, np.nextafter(values, np.array(np.inf, dtype))])


def _module(type_name: str, size: int) -> str:
    results = [f"r{k} = {type_name}[{size}] reduce-precision(p), exponent_bits={e}, mantissa_bits={m}"
               for k, (e, m) in enumerate(_WIDTHS)]
    tuple_shape = ", ".join([f"{type_name}[{size}]"] * len(_WIDTHS))
    names = ", ".join(f"r{k}" for k in range(len(_WIDTHS)))
    body = "\n  ".join(results)
    return f"""HloModule reduce_precision_{type_name}
ENTRY e {{
  p = {type_name}[{size}] parameter(0)
  {body}
  ROOT t = ({tuple_shape}) tuple({names})
}}"""


_INPUTS = {
    "f16": lambda: _every_value(np.float16),
    "bf16": lambda: _every_value(ml_dtypes.bfloat16),
    "f8e4m3fn": lambda: _every_value(ml_dtypes.float8_e4m3fn),
    "f8e5m2": lambda: _every_value(ml_dtypes.float8_e5m2),
    "f32": lambda: _bit_patterns(np.float32, 20000),
    "f64": lambda: _bit_patterns(np.float64, 20000),
}


@pytest.mark.parametrize("type_name", list(_INPUTS))
def test_reduce_precision_matches_the_interpreter_bit_for_bit(type_name: str):
    x = _INPUTS[type_name]()
    text = _module(type_name, x.size)
    module = xlapy.parse_hlo(text)
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert executable.summary.kernels == len(_WIDTHS)
    got = executable(x)
    assert_same(got, xlapy.evaluate(module, x), exact_bits=True, context=f"reduce-precision of {type_name}")


@pytest.mark.skipif(NO_JAX, reason="XLAPY_NO_JAX=1")
@pytest.mark.parametrize("type_name", ["f16", "bf16", "f32", "f64"])
def test_reduce_precision_matches_xla_cpu_bit_for_bit(type_name: str):
    from tools.xla_cpu import run_on_xla_cpu

    x = _INPUTS[type_name]()
    text = _module(type_name, x.size)
    got = xlapy.compile(xlapy.parse_hlo(text), run_hlo_passes=False)(x)
    # XLA:CPU rounds bf16 in f32 and hands back the canonical NaN even where the widths are bf16's own (the
    # interpreter then returns the operand, payload included): bf16 NaNs compare as NaN, everything else bit
    # for bit.
    assert_same(got, tuple(np.asarray(r) for r in run_on_xla_cpu(text, x)), exact_bits=type_name != "bf16",
                context=f"reduce-precision of {type_name}")


def test_reduce_precision_fuses_with_elementwise_ops():
    # jax's reduce_precision inside arithmetic: one loop fusion, the same bits as the interpreter.
    module = xlapy.parse_hlo("""HloModule fused
ENTRY e {
  p = f32[64] parameter(0)
  q = f32[64] parameter(1)
  a = f32[64] multiply(p, q)
  r = f32[64] reduce-precision(a), exponent_bits=5, mantissa_bits=10
  ROOT s = f32[64] add(r, p)
}""")
    x, y = _bit_patterns(np.float32, 32)[:64], np.linspace(-3, 3, 64, dtype=np.float32)
    executable = xlapy.compile(module)
    assert executable.summary.kernels == 1
    assert_same(executable(x, y), xlapy.evaluate(module, x, y), exact_bits=True)
