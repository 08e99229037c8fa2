"""The dot library thunk: any dimension numbers and layouts, integer wrap-around, narrow floats computed in f32
as XLA:CPU computes them, complex numbers, and the kCustom dot fusions of XLA:CPU's optimised modules."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import xlapy
from tools.compare import assert_same, assert_within_sum_of_magnitudes
from xlapy.frontends.jax import from_jax, optimized_from_jax


def _dot_module(lhs: str, rhs: str, result: str, dims: str):
    return xlapy.parse_hlo(f"""HloModule dot
ENTRY e {{ a = {lhs} parameter(0)  b = {rhs} parameter(1)
          ROOT d = {result} dot(a, b){", " if dims else ""}{dims} }}""")


def _compiled(module):
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert [t.kind for t in executable.thunks if t.name == module.entry.root.name] == ["library"]
    return executable


def _random(shape, dtype, rng):
    if np.dtype(dtype).kind in "iu":
        return rng.integers(-9, 10, shape).astype(dtype)
    values = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        values = values + 1j * rng.standard_normal(shape)
    return values.astype(dtype)


# (lhs, rhs, result, dimension numbers): the canonical form, batch dimensions anywhere, several contracting
# dimensions, matrix-vector, no contraction at all, column-major operands and result.
DOTS = [
    ("f32[2,3,4]{2,1,0}", "f32[2,4,5]{2,1,0}", "f32[2,3,5]{2,1,0}",
     "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}"),
    ("f32[4,2,3]{2,1,0}", "f32[5,4,2]{2,1,0}", "f32[2,3,5]{2,1,0}",
     "lhs_batch_dims={1}, lhs_contracting_dims={0}, rhs_batch_dims={2}, rhs_contracting_dims={1}"),
    ("f32[3,4,6]{2,1,0}", "f32[6,5,4]{2,1,0}", "f32[3,5]{1,0}",
     "lhs_contracting_dims={1,2}, rhs_contracting_dims={2,0}"),
    ("f32[7,9]{1,0}", "f32[9]{0}", "f32[7]{0}", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("f32[3]{0}", "f32[4]{0}", "f32[3,4]{1,0}", ""),
    ("f32[6,8]{0,1}", "f32[8,5]{0,1}", "f32[6,5]{0,1}", "lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
    ("f64[2,5,3]{1,2,0}", "f64[2,5,4]{0,2,1}", "f64[2,3,4]{2,1,0}",
     "lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={1}"),
]


@pytest.mark.parametrize("lhs, rhs, result, dims", DOTS)
def test_dot_dimension_numbers_and_layouts(lhs, rhs, result, dims):
    module = _dot_module(lhs, rhs, result, dims)
    rng = np.random.default_rng(1)
    a, b = (_random(p.shape.dimensions, p.shape.type.dtype, rng) for p in module.entry.parameters)
    got = _compiled(module)(a, b)
    # Any order of summation rounds within the sum of the magnitudes of the terms.
    magnitudes = xlapy.evaluate(module, np.abs(a), np.abs(b))
    contracted = int(np.prod([a.shape[d] for d in module.entry.root.attr("lhs_contracting_dims", ())]))
    assert_within_sum_of_magnitudes(got, xlapy.evaluate(module, a, b), magnitudes, epsilons=contracted)


@pytest.mark.parametrize("element_type, dtype", [("s32", np.int32), ("s8", np.int8), ("u16", np.uint16)])
def test_integer_dot_wraps_around_exactly(element_type, dtype):
    module = _dot_module(f"{element_type}[3,40]{{1,0}}", f"{element_type}[40,2]{{0,1}}", f"{element_type}[3,2]{{1,0}}",
                         "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    info = np.iinfo(dtype)
    rng = np.random.default_rng(2)
    a = rng.integers(info.min, info.max, (3, 40), endpoint=True).astype(dtype)
    b = rng.integers(info.min, info.max, (40, 2), endpoint=True).astype(dtype)
    got = _compiled(module)(a, b)
    wide = a.astype(object) @ b.astype(object)
    expected = np.array([[int(v) % (1 << info.bits) for v in row] for row in wide], np.uint64).astype(dtype)
    assert_same(got, expected, exact_bits=True)
    assert_same(got, np.asarray(jax.jit(lambda x, y: jax.lax.dot(x, y))(a, b)), exact_bits=True)


def test_mixed_precision_dot_widens_the_operands():
    module = _dot_module("s8[4,7]{1,0}", "s8[7,3]{1,0}", "s32[4,3]{1,0}",
                         "lhs_contracting_dims={1}, rhs_contracting_dims={0}")
    rng = np.random.default_rng(3)
    a, b = rng.integers(-128, 128, (4, 7)).astype(np.int8), rng.integers(-128, 128, (7, 3)).astype(np.int8)
    assert_same(_compiled(module)(a, b), a.astype(np.int32) @ b.astype(np.int32), exact_bits=True)


@pytest.mark.parametrize("dtype", [ml_dtypes.bfloat16, np.float16])
def test_narrow_float_dot_is_an_f32_dot_rounded_as_on_xla_cpu(dtype):
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((2, 16, 64)).astype(dtype), rng.standard_normal((2, 64, 8)).astype(dtype)

    def f(x, y):
        return jnp.matmul(x, y)

    got = xlapy.compile(from_jax(f, a, b))(a, b)
    expected = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(dtype)
    # f32 sums in another order may round to the neighbouring narrow value.
    assert_same(got, expected, ulps=1)
    assert_same(got, np.asarray(jax.jit(f)(a, b)), ulps=1)


def test_complex_dot():
    rng = np.random.default_rng(5)
    a, b = _random((5, 6), np.complex64, rng), _random((6, 3), np.complex64, rng)
    got = xlapy.compile(from_jax(jnp.matmul, a, b))(a, b)
    # Each part of a product sums two products of parts, each at most the product of the moduli.
    magnitudes = 2 * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    expected = (a.astype(np.complex128) @ b.astype(np.complex128)).astype(np.complex64)
    assert_within_sum_of_magnitudes(got, expected, magnitudes, epsilons=8)


def test_xla_cpu_dot_fusions_run_as_dots():
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal((3, 8, 16)).astype(np.float32), rng.standard_normal((3, 4, 16)).astype(np.float32)

    def f(a, b):
        return jnp.tanh(jnp.einsum("bmk,bnk->bnm", a, b))

    module = optimized_from_jax(f, x, y)
    assert any(i.opcode == "fusion" and i.attr("kind") == "kCustom" for i in module.entry.instructions)
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert executable.summary.library_calls == 1
    assert_same(executable(x, y), np.asarray(jax.jit(f)(x, y)), ulps=4, atol=2e-6)
