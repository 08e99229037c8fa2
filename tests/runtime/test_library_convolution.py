"""The convolution library thunk against the interpreter (every dimension-label order, stride, padding,
dilation, reversal and grouping) and against XLA:CPU through jax."""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest

import xlapy
from tools.compare import assert_same, assert_within_sum_of_magnitudes
from xlapy.frontends.jax import from_jax
from xlapy.hlo.shape_rules.inference import infer_shape

# (input, kernel, window, dim_labels, groups): result shapes are inferred.
CONVOLUTIONS = [
    ("f32[2,3,7,6]{3,2,1,0}", "f32[4,3,3,2]{3,2,1,0}", "size=3x2", "bf01_oi01->bf01", ""),
    ("f32[2,9,8,4]{3,2,1,0}", "f32[3,3,2,6]{3,2,1,0}",
     "size=3x3 stride=2x1 pad=1_2x-1_1 lhs_dilate=2x1 rhs_dilate=1x2", "b01f_01io->b01f", ", feature_group_count=2"),
    ("f32[4,9,6]{2,1,0}", "f32[3,6,4]{2,1,0}", "size=3 pad=1_1 rhs_reversal=1", "b0f_0io->b0f",
     ", batch_group_count=2"),
    ("f32[9,2,4]{0,1,2}", "f32[4,3,3]{0,2,1}", "size=3 stride=3", "0bf_io0->f0b", ""),
    ("f64[1,4,5,3,3]{4,3,2,1,0}", "f64[2,2,2,3,4]{4,3,2,1,0}", "size=2x2x2 pad=0_1x1_0x0_0 stride=1x2x1",
     "b01f2_012io->2bf01", ""),
    ("f32[2,4,0]{2,1,0}", "f32[3,0,5]{2,1,0}", "size=3", "b0f_0io->b0f", ""),
]


def _module(lhs: str, rhs: str, window: str, labels: str, groups: str, result: str | None = None):
    text = f"""HloModule conv
ENTRY e {{ a = {lhs} parameter(0)  b = {rhs} parameter(1)
          ROOT c = {result or "f32[1]"} convolution(a, b), window={{{window}}}, dim_labels={labels}{groups} }}"""
    module = xlapy.parse_hlo(text)
    if result is None:  # the declared shape is the inferred one
        inferred = infer_shape(module.entry.root)
        element = lhs.split("[")[0]
        return _module(lhs, rhs, window, labels, groups, f"{element}{str(inferred)[3:]}")
    return module


def _arguments(module, rng, dtype=None):
    return [rng.integers(-4, 5, p.shape.dimensions).astype(dtype or p.shape.type.dtype)
            for p in module.entry.parameters]


@pytest.mark.parametrize("lhs, rhs, window, labels, groups", CONVOLUTIONS)
def test_convolution_forms_match_the_interpreter(lhs, rhs, window, labels, groups):
    module = _module(lhs, rhs, window, labels, groups)
    a, b = _arguments(module, np.random.default_rng(0))
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert [t.kind for t in executable.thunks if t.name == "c"] == ["library"]
    # Small whole numbers: every summation order gives the exact sum.
    assert_same(executable(a, b), xlapy.evaluate(module, a, b), exact_bits=True)


def test_integer_convolution_wraps_around():
    module = _module("s8[1,6,2]{2,1,0}", "s8[3,2,2]{2,1,0}", "size=3 pad=1_1", "b0f_0io->b0f", "")
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (1, 6, 2)).astype(np.int8)
    b = rng.integers(-128, 128, (3, 2, 2)).astype(np.int8)
    assert_same(xlapy.compile(module, run_hlo_passes=False)(a, b), xlapy.evaluate(module, a, b), exact_bits=True)


@pytest.mark.parametrize("dtype, ulps", [(np.float32, None), (ml_dtypes.bfloat16, 1)])
def test_convolution_matches_xla_cpu(dtype, ulps):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 6, 9, 8)).astype(dtype)
    w = rng.standard_normal((3, 3, 4, 6)).astype(dtype)

    def f(lhs, rhs):
        return jax.lax.conv_general_dilated(lhs, rhs, window_strides=(2, 1), padding=((1, 1), (0, 2)),
                                            lhs_dilation=(1, 2), rhs_dilation=(2, 1),
                                            dimension_numbers=("NHWC", "HWIO", "NCHW"), feature_group_count=2)

    got = xlapy.compile(from_jax(f, x, w))(x, w)
    expected = np.asarray(jax.jit(f)(x, w))
    if ulps is None:
        magnitudes = np.asarray(jax.jit(f)(np.abs(x), np.abs(w)))
        assert_within_sum_of_magnitudes(got, expected, magnitudes, epsilons=3 * 3 * 4)
    else:  # f32 sums rounded to bf16: the neighbouring value at most
        assert_same(got, expected, ulps=ulps)
