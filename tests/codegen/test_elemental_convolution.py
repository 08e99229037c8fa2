"""Convolutions as generated code (the elemental rule of ``xlapy/codegen/elemental_convolution.py``) against the
reference interpreter and XLA:CPU, and the rule choosing between generated code and the library thunk
(``generated_code_is_faster`` in ``xlapy/runtime/thunks/convolution.py``).

A convolution inside a kLoop fusion is always generated code. Inputs are small whole numbers, so that every
summation order gives the exact sum and results are compared bit for bit (f16 and bf16 results are rounded once,
from the exact f32 sum, in both); integers wrap around; random floats are compared with XLA:CPU within the
rounding any summation order allows.
"""

from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import xlapy
from tools.compare import assert_same, assert_within_sum_of_magnitudes
from tools.convolution_paths import grouped_dilated_convolution
from tools.loop_fusion_corpus import single_fusion
from xlapy.hlo.ir import HloModule
from xlapy.hlo.shape_rules.inference import infer_shape
from xlapy.runtime.thunks.convolution import generated_code_is_faster

pytestmark = pytest.mark.usefixtures("fresh_kernel_cache")


def _result_type(lhs: str, rhs: str, attributes: str, result_element: str | None = None) -> str:
    element = result_element or lhs.split("[")[0]
    probe = xlapy.parse_hlo(f"""HloModule probe
ENTRY e {{ a = {lhs} parameter(0)  b = {rhs} parameter(1)
          ROOT c = {element}[1] convolution(a, b), {attributes} }}""")
    inferred = str(infer_shape(probe.entry.root))
    dims = inferred[inferred.index("["):inferred.index("]") + 1]
    return element + dims


def fused_convolution(lhs: str, rhs: str, attributes: str, result_element: str | None = None) -> HloModule:
    """A module whose one kLoop fusion is the convolution of ``lhs`` and ``rhs`` (shapes) with ``attributes``."""
    result = _result_type(lhs, rhs, attributes, result_element)
    return xlapy.parse_hlo(single_fusion([lhs, rhs], [f"ROOT c = {result} convolution(p0, p1), {attributes}"],
                                         result))


def entry_convolution(lhs: str, rhs: str, attributes: str) -> HloModule:
    """A module whose entry computation is the convolution alone (the thunk emitter chooses its path)."""
    result = _result_type(lhs, rhs, attributes)
    return xlapy.parse_hlo(f"""HloModule conv
ENTRY e {{ a = {lhs} parameter(0)  b = {rhs} parameter(1)
          ROOT c = {result} convolution(a, b), {attributes} }}""")


def _small_integers(module: HloModule, seed: int, low: int = -4, high: int = 5) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    arguments = []
    for parameter in module.entry.parameters:
        dtype = parameter.shape.type.dtype
        values = rng.integers(low, high, parameter.shape.dimensions)
        if np.dtype(dtype).kind == "c":
            values = values + 1j * rng.integers(low, high, parameter.shape.dimensions)
        arguments.append(values.astype(dtype))
    return arguments


def assert_equal_values(got: np.ndarray, expected: np.ndarray) -> None:
    """Equal element types and values, zeros of either sign equal: where the exact sum is zero the generated
    code's accumulator, starting at +0 as XLA's does, gives +0 (XLA:CPU does too), the interpreter may give the
    -0 of a single product."""
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_array_equal(got, expected)


def _check(module: HloModule, seeds: tuple[int, ...] = (0,)) -> None:
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert [t.kind for t in executable.thunks.thunks] == ["kernel"]
    for seed in seeds:
        arguments = _small_integers(module, seed)
        assert_equal_values(executable(*arguments), xlapy.evaluate(module, *arguments))


# (input, kernel, attributes)
FORMS = {
    "nhwc_hwio": ("f32[2,6,5,4]", "f32[3,2,4,3]", "window={size=3x2}, dim_labels=b01f_01io->b01f"),
    "nchw_oihw": ("f32[2,3,6,5]", "f32[4,3,3,2]", "window={size=3x2 pad=1_1x0_1}, dim_labels=bf01_oi01->bf01"),
    "permuted_everywhere": ("f32[6,3,2,5]", "f32[4,2,3,3]",
                            "window={size=2x3 stride=2x1}, dim_labels=0fb1_o01i->f10b"),
    "no_spatial_dimensions": ("f32[3,5]", "f32[5,4]", "window={}, dim_labels=bf_io->bf"),
    "three_spatial_dimensions": ("f32[1,4,5,3,3]", "f32[2,2,2,3,4]",
                                 "window={size=2x2x2 pad=0_1x1_0x0_0 stride=1x2x1}, dim_labels=b01f2_012io->2bf01"),
    "negative_padding_and_dilations": ("f32[2,9,8,4]", "f32[3,3,2,6]",
                                       "window={size=3x3 stride=2x1 pad=1_2x-1_1 lhs_dilate=2x1 rhs_dilate=1x2}, "
                                       "dim_labels=b01f_01io->b01f, feature_group_count=2"),
    "input_dilated_and_cropped": ("f32[1,4,5,2]", "f32[3,3,2,3]",
                                  "window={size=3x3 pad=2_2x-1_3 lhs_dilate=2x3}, dim_labels=b01f_01io->b01f"),
    "reversed_and_kernel_dilated": ("f32[2,8,6]", "f32[5,6,3]",
                                    "window={size=5 pad=4_4 rhs_dilate=2 rhs_reversal=1}, dim_labels=b0f_0io->b0f"),
    "reversed_in_one_dimension": ("f32[1,5,6,2]", "f32[3,2,2,2]",
                                  "window={size=3x2 pad=1_1x0_0 rhs_reversal=0x1}, dim_labels=b01f_01io->b01f"),
    "depthwise": ("f32[2,9,4]", "f32[3,1,8]",
                  "window={size=3 stride=2 pad=0_1 rhs_dilate=2}, dim_labels=b0f_0io->b0f, feature_group_count=4"),
    "batch_groups": ("f32[4,9,6]", "f32[3,6,4]",
                     "window={size=3 pad=1_1 rhs_reversal=1}, dim_labels=b0f_0io->b0f, batch_group_count=2"),
    "batch_groups_strided": ("f32[2,9,6]", "f32[2,3,6]",
                             "window={size=3 stride=2 rhs_dilate=2}, dim_labels=f0b_i0o->b0f, batch_group_count=3"),
    "every_offset_in_the_padding": ("f32[1,3,2]", "f32[2,2,2]",
                                    "window={size=2 pad=5_-3 lhs_dilate=1}, dim_labels=b0f_0io->b0f"),
    # The last output position reads only padding: the map's bounds of the output index, not a constraint.
    "last_position_in_the_padding": ("f32[1,1,1]", "f32[1,1,1]", "window={size=1 pad=0_1}, dim_labels=bf0_io0->bf0"),
    "first_position_in_the_padding": ("f32[2,2,3]", "f32[2,3,1]",
                                      "window={size=2 pad=2_0 rhs_dilate=1}, dim_labels=b0f_0io->b0f"),
    "no_input_features": ("f32[2,4,0]", "f32[3,0,5]", "window={size=3}, dim_labels=b0f_0io->b0f"),
}


@pytest.mark.parametrize("name", sorted(FORMS))
def test_forms_match_the_interpreter(name: str):
    _check(fused_convolution(*FORMS[name]))


# A float, a narrow float, an integer and a complex type in the default run; the others with the slow tests.
@pytest.mark.parametrize("element", ["f32", "bf16", "s8", "c64",
                                     *(pytest.param(t, marks=pytest.mark.slow) for t in ("f16", "s32"))])
def test_element_types(element: str):
    module = fused_convolution(f"{element}[2,5,4,6]", f"{element}[3,2,3,4]",
                               "window={size=3x2 pad=1_1x0_1 stride=1x2}, dim_labels=b01f_01io->b01f, "
                               "feature_group_count=2")
    _check(module)


def test_integers_wrap_around():
    module = fused_convolution("s8[1,6,2]", "s8[3,2,2]", "window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f")
    executable = xlapy.compile(module, run_hlo_passes=False)
    a, b = _small_integers(module, 1, -128, 128)
    assert_equal_values(executable(a, b), xlapy.evaluate(module, a, b))


def test_narrow_floats_sum_in_f32():
    """Each bf16 product is exact in f32 and the sum is rounded once: 256 + 1 + 1 - 256 is 2, where sums rounded
    to bf16 (which cannot hold 257) would give 0."""
    module = fused_convolution("bf16[1,4,1]", "bf16[4,1,1]", "window={size=4}, dim_labels=b0f_0io->b0f")
    x = np.array([256, 1, 1, -256], ml_dtypes.bfloat16).reshape(1, 4, 1)
    w = np.ones((4, 1, 1), ml_dtypes.bfloat16)
    got = xlapy.compile(module, run_hlo_passes=False)(x, w)
    assert got.dtype == ml_dtypes.bfloat16 and float(got.reshape(())) == 2.0


def test_mixed_operand_types():
    module = fused_convolution("s8[2,5,3]", "s8[2,3,4]", "window={size=2}, dim_labels=b0f_0io->b0f",
                               result_element="s32")
    _check(module)


def test_pred_convolution_is_generated_code():
    """The library thunk computes no pred results: a lone pred convolution becomes a kernel (an or of ands)."""
    module = entry_convolution("pred[2,6,3]", "pred[3,3,2]", "window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f")
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert [t.kind for t in executable.thunks.thunks] == ["kernel"]
    rng = np.random.default_rng(3)
    a, b = (rng.random(p.shape.dimensions) < 0.3 for p in module.entry.parameters)
    assert_equal_values(executable(a, b), xlapy.evaluate(module, a, b))


@pytest.mark.parametrize("dtype", [np.float32, ml_dtypes.bfloat16])
def test_generated_convolution_matches_xla_cpu(dtype):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 6, 9, 8)).astype(dtype)
    w = rng.standard_normal((3, 3, 4, 6)).astype(dtype)
    f = grouped_dilated_convolution

    element = "f32" if dtype == np.float32 else "bf16"
    module = fused_convolution(f"{element}[2,6,9,8]", f"{element}[3,3,4,6]",
                               "window={size=3x3 stride=2x1 pad=1_1x0_2 lhs_dilate=1x2 rhs_dilate=2x1}, "
                               "dim_labels=b01f_01io->bf01, feature_group_count=2")
    got = xlapy.compile(module, run_hlo_passes=False)(x, w)
    expected = np.asarray(jax.jit(f)(x, w))
    if dtype == np.float32:
        magnitudes = np.asarray(jax.jit(f)(np.abs(x), np.abs(w)))
        assert_within_sum_of_magnitudes(got, expected, magnitudes, epsilons=3 * 3 * 4)
    else:  # f32 sums rounded to bf16: the neighbouring value at most
        assert_same(got, expected, ulps=1)


@st.composite
def convolutions(draw) -> tuple[str, str, str]:
    """A small random convolution: 0 to 2 spatial dimensions with any size, stride, padding (negative too),
    dilations and reversal, feature or batch groups, and dimension labels in any order."""
    rank = draw(st.integers(0, 2))
    groups = draw(st.integers(1, 3))
    batch_grouped = groups > 1 and draw(st.booleans())
    in_per_group, out_per_group = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    batch = draw(st.integers(1, 2)) * (groups if batch_grouped else 1)
    in_features = in_per_group * (1 if batch_grouped else groups)
    sizes, windows = [], []
    for _ in range(rank):
        size, window = draw(st.integers(1, 6)), draw(st.integers(1, 3))
        stride, base, dilation = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(1, 2))
        low, high = draw(st.integers(-2, 3)), draw(st.integers(-2, 3))
        padded = (size - 1) * base + 1 + low + high
        assume(padded >= (window - 1) * dilation + 1)
        sizes.append((size, window))
        windows.append((window, stride, f"{low}_{high}", base, dilation, int(draw(st.booleans()))))
    spatial = "".join(str(d) for d in range(rank))
    lhs_labels = "".join(draw(st.permutations("bf" + spatial)))
    rhs_labels = "".join(draw(st.permutations("io" + spatial)))
    out_labels = "".join(draw(st.permutations("bf" + spatial)))
    lhs_sizes = {"b": batch, "f": in_features, **{str(d): sizes[d][0] for d in range(rank)}}
    rhs_sizes = {"i": in_per_group, "o": out_per_group * groups, **{str(d): sizes[d][1] for d in range(rank)}}
    lhs = f"f32[{','.join(str(lhs_sizes[c]) for c in lhs_labels)}]"
    rhs = f"f32[{','.join(str(rhs_sizes[c]) for c in rhs_labels)}]"
    window = " ".join(f"{name}={'x'.join(str(w[k]) for w in windows)}" for k, name in
                      enumerate(("size", "stride", "pad", "lhs_dilate", "rhs_dilate", "rhs_reversal"))) if rank else ""
    count = f"batch_group_count={groups}" if batch_grouped else f"feature_group_count={groups}"
    return lhs, rhs, f"window={{{window}}}, dim_labels={lhs_labels}_{rhs_labels}->{out_labels}, {count}"


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(convolutions())
def test_random_convolutions_match_the_interpreter(convolution: tuple[str, str, str]):
    _check(fused_convolution(*convolution))


@pytest.mark.slow
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(convolutions())
def test_many_random_convolutions_match_the_interpreter(convolution: tuple[str, str, str]):
    _check(fused_convolution(*convolution))


# (input, kernel, attributes, the path the rule must choose): figures in docs/runtime.md.
CHOICES = {
    # Thin GEMMs, integers and small convolutions without the library's direct kernel: generated code (1.6x, 7x,
    # 3.8x, 2.7x faster).
    "depthwise": ("f32[8,32,32,64]", "f32[5,5,1,64]", "window={size=5x5 pad=2_2x2_2}, dim_labels=b01f_01io->b01f, "
                  "feature_group_count=64", "kernel"),
    "few_channels": ("f32[8,32,32,4]", "f32[5,5,4,1]", "window={size=5x5 pad=2_2x2_2}, dim_labels=b01f_01io->b01f",
                     "kernel"),
    "small": ("bf16[1,8,8,8]", "bf16[3,3,8,8]", "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
              "kernel"),
    "integers": ("s32[8,32,32,32]", "s32[3,3,32,32]", "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
                 "kernel"),
    # The library's direct kernel, thin or small ones too (3.5x, 1.25x faster); wide channels: the library's direct
    # kernel or BLAS (44x, 1.6x, 9x faster).
    "few_channels_direct": ("f32[8,32,32,4]", "f32[5,5,4,4]", "window={size=5x5 pad=2_2x2_2}, "
                            "dim_labels=b01f_01io->b01f", "library"),
    "small_direct": ("f32[1,8,8,3]", "f32[3,3,3,16]", "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
                     "library"),
    "wide": ("f32[8,32,32,64]", "f32[3,3,64,64]", "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
             "library"),
    "pointwise_wide": ("f32[1,8,8,64]", "f32[1,1,64,64]", "window={size=1x1}, dim_labels=b01f_01io->b01f",
                       "library"),
    "bf16_wide": ("bf16[8,8,8,32]", "bf16[3,3,32,32]", "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
                  "library"),
}


@pytest.mark.parametrize("name", sorted(CHOICES))
def test_the_rule_chooses_the_faster_path(name: str):
    lhs, rhs, attributes, kind = CHOICES[name]
    module = entry_convolution(lhs, rhs, attributes)
    assert generated_code_is_faster(module.entry.root) == (kind == "kernel")


@pytest.mark.parametrize("name", ["small", "pointwise_wide"])
def test_the_chosen_path_runs(name: str):
    lhs, rhs, attributes, kind = CHOICES[name]
    module = entry_convolution(lhs, rhs, attributes)
    executable = xlapy.compile(module, run_hlo_passes=False)
    assert [t.kind for t in executable.thunks.thunks] == [kind]
    arguments = _small_integers(module, 4)
    assert_equal_values(executable(*arguments), xlapy.evaluate(module, *arguments))
