"""The convolution library thunk against the interpreter (every dimension-label order, stride, padding,
dilation, reversal and grouping, through each way the thunk finds a window position's rows) and against
XLA:CPU through jax, with its GEMMs and with its direct kernel (``tests/runtime/test_convolution_direct.py`` has
more of the latter). The thunk emitter sends small and thin convolutions to generated code
(``tests/codegen/test_elemental_convolution.py``): these run the library thunk in their place."""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest

import xlapy
from tools.compare import assert_same, assert_within_sum_of_magnitudes
from tools.convolution_paths import grouped_dilated_convolution, with_library_convolutions
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
    # Stride 1: rows shifted in place over the padded grid, grouped, dilated input, cropped, reversed.
    ("f32[2,6,7,4]{3,2,1,0}", "f32[3,3,2,6]{3,2,1,0}", "size=3x3 pad=1_1x1_1", "b01f_01io->b01f",
     ", feature_group_count=2"),
    ("f32[1,4,5,2]{3,2,1,0}", "f32[3,3,2,3]{3,2,1,0}", "size=3x3 pad=2_2x-1_3 lhs_dilate=2x3", "b01f_01io->b01f",
     ""),
    ("f32[2,8,6]{2,1,0}", "f32[5,6,3]{2,1,0}", "size=5 pad=4_4 rhs_dilate=2 rhs_reversal=1", "b0f_0io->b0f", ""),
    # Depthwise (one input feature per group): elementwise products, shifted and gathered.
    ("f32[2,9,4]{2,1,0}", "f32[3,1,8]{2,1,0}", "size=3 pad=1_1", "b0f_0io->b0f", ", feature_group_count=4"),
    ("f32[2,9,4]{2,1,0}", "f32[3,1,8]{2,1,0}", "size=3 stride=2 pad=0_1 rhs_dilate=2", "b0f_0io->b0f",
     ", feature_group_count=4"),
    # Gathered: one GEMM per window position; im2col for few features (a grid much larger than the output,
    # strided batch groups).
    ("f32[2,7,9,8]{3,2,1,0}", "f32[2,3,8,3]{3,2,1,0}", "size=2x3 stride=2x2 pad=0_1x1_1", "b01f_01io->b01f", ""),
    ("f32[2,3,8,8]{3,2,1,0}", "f32[4,3,7,7]{3,2,1,0}", "size=7x7", "bf01_oi01->bf01", ""),
    ("f32[4,9,6]{2,1,0}", "f32[3,6,4]{2,1,0}", "size=3 stride=2 rhs_dilate=2", "b0f_0io->b0f",
     ", batch_group_count=2"),
]


def _module(lhs: str, rhs: str, window: str, labels: str, groups: str, result: str | None = None):
    element = lhs.split("[")[0]
    text = f"""HloModule conv
ENTRY e {{ a = {lhs} parameter(0)  b = {rhs} parameter(1)
          ROOT c = {result or element + "[1]"} convolution(a, b), window={{{window}}}, dim_labels={labels}{groups} }}"""
    module = xlapy.parse_hlo(text)
    if result is None:  # the declared shape is the inferred one
        inferred = str(infer_shape(module.entry.root))
        return _module(lhs, rhs, window, labels, groups, element + inferred[inferred.index("["):])
    return module


def _compile(module, direct=False, **options):
    """``module`` compiled, its convolutions run by the library thunk (with its direct kernel where it takes
    them when ``direct``, else with GEMMs)."""
    return with_library_convolutions(xlapy.compile(module, **options), direct=direct)


def _arguments(module, rng, dtype=None):
    return [rng.integers(-4, 5, p.shape.dimensions).astype(dtype or p.shape.type.dtype)
            for p in module.entry.parameters]


# Each form with GEMMs or with the direct kernel in the default run (in turn), the other way with the slow tests;
# test_the_forms_cover_every_plan compiles every form both ways.
@pytest.mark.parametrize("lhs, rhs, window, labels, groups, direct", [
    pytest.param(*form, direct, marks=[] if direct == (i % 2 == 1) else [pytest.mark.slow])
    for i, form in enumerate(CONVOLUTIONS) for direct in (False, True)])
def test_convolution_forms_match_the_interpreter(lhs, rhs, window, labels, groups, direct):
    module = _module(lhs, rhs, window, labels, groups)
    a, b = _arguments(module, np.random.default_rng(0))
    executable = _compile(module, direct, run_hlo_passes=False)
    assert [t.kind for t in executable.thunks if t.name == "c"] == ["library"]
    # Small whole numbers: every summation order gives the exact sum.
    assert_same(executable(a, b), xlapy.evaluate(module, a, b), exact_bits=True)


@pytest.mark.parametrize("direct", [False, True])
def test_the_forms_cover_every_plan(direct):
    plans = set()
    for form in CONVOLUTIONS:
        executable = _compile(_module(*form), direct, run_hlo_passes=False)
        plans |= {(t.plan.method, t.plan.depthwise) for t in executable.thunks if t.name == "c"}
        plans |= {"im2col" for t in executable.thunks if t.name == "c" and t.plan.im2col}
    gemms = {("shifted", False), ("shifted", True), ("gathered", False), ("gathered", True), "im2col"}
    # Direct: what it does not take (input dilation, batch groups, depthwise, few output features) keeps GEMMs.
    assert plans == (gemms | {("direct", False)} if direct else gemms)


SHIFTED, GATHERED = "size=3x2 pad=1_1x0_1", "size=3x2 stride=2x1"


# Each type through one of the two plans in the default run (the plans in turn), through the other with the slow
# tests.
@pytest.mark.parametrize(("element", "window"), [
    pytest.param(element, window, marks=[] if (i + (window == GATHERED)) % 2 == 0 else [pytest.mark.slow])
    for i, element in enumerate(["f64", "c64", "f16", "bf16", "s32"]) for window in (SHIFTED, GATHERED)])
def test_element_types(element, window):
    module = _module(f"{element}[2,5,4,6]{{3,2,1,0}}", f"{element}[3,2,3,4]{{3,2,1,0}}", window,
                     "b01f_01io->b01f", ", feature_group_count=2")
    a, b = _arguments(module, np.random.default_rng(5))
    assert_same(_compile(module, run_hlo_passes=False)(a, b), xlapy.evaluate(module, a, b), exact_bits=True)


@pytest.mark.parametrize("direct", [False, True])
def test_tiled_result_layout(direct):
    module = _module("f32[2,5,3]{2,1,0}", "f32[3,3,4]{2,1,0}", "size=3 pad=1_1", "b0f_0io->b0f", "",
                     result="f32[2,5,4]{1,2,0:T(2,2)}")
    a, b = _arguments(module, np.random.default_rng(3))
    executable = _compile(module, direct, run_hlo_passes=False)
    assert [t.plan.method == "direct" for t in executable.thunks if t.name == "c"] == [direct]
    assert_same(executable(a, b), xlapy.evaluate(module, a, b), exact_bits=True)


def test_integer_convolution_wraps_around():
    module = _module("s8[1,6,2]{2,1,0}", "s8[3,2,2]{2,1,0}", "size=3 pad=1_1", "b0f_0io->b0f", "")
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (1, 6, 2)).astype(np.int8)
    b = rng.integers(-128, 128, (3, 2, 2)).astype(np.int8)
    assert_same(_compile(module, run_hlo_passes=False)(a, b), xlapy.evaluate(module, a, b), exact_bits=True)


@pytest.mark.parametrize("dtype, ulps", [(np.float32, None), (ml_dtypes.bfloat16, 1)])
def test_convolution_matches_xla_cpu(dtype, ulps):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 6, 9, 8)).astype(dtype)
    w = rng.standard_normal((3, 3, 4, 6)).astype(dtype)
    f = grouped_dilated_convolution

    got = _compile(from_jax(f, x, w))(x, w)
    expected = np.asarray(jax.jit(f)(x, w))
    if ulps is None:
        magnitudes = np.asarray(jax.jit(f)(np.abs(x), np.abs(w)))
        assert_within_sum_of_magnitudes(got, expected, magnitudes, epsilons=3 * 3 * 4)
    else:  # f32 sums rounded to bf16: the neighbouring value at most
        assert_same(got, expected, ulps=ulps)


@pytest.mark.parametrize("direct", [False, True])
@pytest.mark.parametrize("groups", [1, 8])
def test_same_padded_convolution_matches_xla_cpu(groups, direct):
    # Stride 1, "SAME" padding: the shifted rows; 8 groups of one feature: the depthwise products.
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 10, 12, 8)).astype(np.float32)
    w = rng.standard_normal((3, 5, 8 // groups, 16)).astype(np.float32)

    def f(lhs, rhs):
        return jax.lax.conv_general_dilated(lhs, rhs, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                            feature_group_count=groups)

    executable = _compile(from_jax(f, x, w), direct)
    assert [t.plan.method == "direct" for t in executable.thunks if t.kind == "library"] == [direct and groups == 1]
    magnitudes = np.asarray(jax.jit(f)(np.abs(x), np.abs(w)))
    assert_within_sum_of_magnitudes(executable(x, w), np.asarray(jax.jit(f)(x, w)), magnitudes,
                                    epsilons=3 * 5 * 8 // groups)
