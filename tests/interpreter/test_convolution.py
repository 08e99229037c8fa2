"""convolution in the reference interpreter, against XLA:CPU: programs from
jax.lax.conv_general_dilated in many configurations, and hand-written HLO
for what JAX does not emit (window reversal, empty results)."""

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

_2D = ("NHWC", "HWIO", "NHWC")

# name: (lhs shape, rhs shape, conv_general_dilated keyword arguments)
_CONVS: dict[str, tuple[tuple[int, ...], tuple[int, ...], dict[str, Any]]] = {
    "nhwc_same": ((2, 6, 7, 3), (3, 3, 3, 4), dict(window_strides=(1, 1), padding="SAME", dimension_numbers=_2D)),
    "nchw_strided_padded": ((2, 3, 9, 8), (5, 3, 3, 2),
                            dict(window_strides=(2, 3), padding=((1, 2), (0, 1)),
                                 dimension_numbers=("NCHW", "OIHW", "NCHW"))),
    "negative_padding": ((1, 7, 8, 2), (2, 3, 2, 3),
                         dict(window_strides=(1, 2), padding=((-1, 1), (2, -2)), dimension_numbers=_2D)),
    "lhs_dilation": ((2, 5, 4, 3), (3, 2, 3, 2),
                     dict(window_strides=(1, 1), padding=((1, 1), (2, 0)), lhs_dilation=(2, 3), dimension_numbers=_2D)),
    "rhs_dilation": ((2, 9, 8, 3), (3, 2, 3, 2),
                     dict(window_strides=(2, 1), padding="VALID", rhs_dilation=(2, 3), dimension_numbers=_2D)),
    "all_dilations_strided": ((1, 6, 7, 2), (2, 3, 2, 3),
                              dict(window_strides=(3, 2), padding=((2, 1), (0, 3)), lhs_dilation=(2, 2),
                                   rhs_dilation=(2, 1), dimension_numbers=_2D)),
    "feature_groups": ((2, 5, 5, 6), (3, 3, 3, 4),
                       dict(window_strides=(1, 1), padding="SAME", feature_group_count=2, dimension_numbers=_2D)),
    "depthwise": ((2, 6, 5, 4), (3, 3, 1, 8),
                  dict(window_strides=(1, 1), padding="VALID", feature_group_count=4, dimension_numbers=_2D)),
    "batch_groups": ((4, 6, 5, 3), (3, 2, 3, 6),
                     dict(window_strides=(1, 1), padding="VALID", batch_group_count=2, dimension_numbers=_2D)),
    "batch_groups_three": ((6, 5, 5, 2), (2, 2, 2, 3),
                           dict(window_strides=(2, 1), padding=((1, 0), (0, 1)), batch_group_count=3,
                                dimension_numbers=_2D)),
    "permuted_layouts": ((2, 5, 6, 3), (3, 2, 3, 4),
                         dict(window_strides=(1, 2), padding="SAME", dimension_numbers=("NWHC", "WHIO", "CWNH"))),
    "feature_major_layouts": ((3, 5, 2, 6), (4, 3, 3, 2),
                              dict(window_strides=(1, 1), padding=((0, 1), (1, 1)),
                                   dimension_numbers=("CHNW", "OWIH", "WCHN"))),
    "one_dimensional": ((3, 11, 2), (4, 2, 5),
                        dict(window_strides=(2,), padding=((2, 1),), rhs_dilation=(2,),
                             dimension_numbers=("NWC", "WIO", "NWC"))),
    "three_dimensional": ((1, 4, 5, 4, 2), (2, 3, 2, 2, 3),
                          dict(window_strides=(1, 2, 1), padding=((1, 0), (1, 1), (0, 1)), lhs_dilation=(1, 1, 2),
                               dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))),
    "kernel_larger_than_output": ((2, 8, 8, 3), (7, 6, 3, 2),
                                  dict(window_strides=(1, 1), padding="VALID", dimension_numbers=_2D)),
}

_NAMES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "s32": np.int32, "f16": np.float16, "s8": np.int8,
          "f64": np.float64}
# Float results summed in the result type are checked against the sum of |terms| (see
# assert_within_sum_of_magnitudes): the allowed multiple of eps, by (operand type, result type).
# bf16 and f16 results are summed in f32 and rounded once, as XLA:CPU does: bit for bit (measured: 0 ulps,
# 7 seeds each).
_EPSILONS_OF_SUM = {
    ("f32", "f32"): 3,  # measured: up to 1.88 eps of the sum of |terms| (15 configurations, 7 seeds each)
    ("f64", "f64"): 1,  # measured: up to 0.74 (7 seeds)
    ("bf16", "f32"): 1,  # measured: up to 0.73 (2 configurations, 7 seeds each)
}


def _values(rng: np.random.Generator, shape: tuple[int, ...], element_type: str) -> np.ndarray:
    if element_type in ("s32", "s8"):
        return rng.integers(-8, 8, shape).astype(_NAMES[element_type])
    return rng.standard_normal(shape).astype(_NAMES[element_type])



def _check_jax(name: str, element_type: str, preferred: Any = None, result_type: str | None = None) -> None:
    lhs_shape, rhs_shape, kwargs = _CONVS[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    lhs, rhs = _values(rng, lhs_shape, element_type), _values(rng, rhs_shape, element_type)

    def conv(lhs, rhs):
        return jax.lax.conv_general_dilated(lhs, rhs, preferred_element_type=preferred, **kwargs)

    epsilons = _EPSILONS_OF_SUM.get((element_type, result_type or element_type))
    with jax.enable_x64(element_type == "f64"):
        module = from_jax(conv, lhs, rhs)
        expected = np.asarray(jax.jit(conv)(lhs, rhs))
        magnitudes = np.asarray(jax.jit(conv)(np.abs(lhs), np.abs(rhs))) if epsilons else None
    assert [i.opcode for i in module.entry.instructions] == ["parameter", "parameter", "convolution"]
    if epsilons:
        assert_within_sum_of_magnitudes(evaluate(module, lhs, rhs), expected, magnitudes, epsilons)
    else:
        assert_same(evaluate(module, lhs, rhs), expected)


@pytest.mark.parametrize("name", sorted(_CONVS))
def test_convolution(name: str) -> None:
    _check_jax(name, "f32")


@pytest.mark.parametrize("name", ["nchw_strided_padded", "all_dilations_strided", "depthwise", "batch_groups_three",
                                  "three_dimensional"])
def test_integer_convolution(name: str) -> None:
    _check_jax(name, "s32")


@pytest.mark.parametrize("name, element_type", [
    ("nhwc_same", "bf16"), ("feature_groups", "bf16"), ("batch_groups", "bf16"), ("all_dilations_strided", "f16"),
    ("three_dimensional", "f16"), ("all_dilations_strided", "f64"),
])
def test_convolution_float_types(name: str, element_type: str) -> None:
    _check_jax(name, element_type)


@pytest.mark.parametrize("name", ["nchw_strided_padded", "depthwise"])
def test_convolution_widening_result(name: str) -> None:
    # bf16 operands with an f32 result; s8 operands with an s32 result.
    _check_jax(name, "bf16", preferred=jnp.float32, result_type="f32")
    _check_jax(name, "s8", preferred=jnp.int32, result_type="s32")


def test_integer_convolution_wraps() -> None:
    rng = np.random.default_rng(7)
    lhs = rng.integers(-2**31, 2**31, (1, 6, 6, 3), dtype=np.int64).astype(np.int32)
    rhs = rng.integers(-2**31, 2**31, (3, 3, 3, 2), dtype=np.int64).astype(np.int32)

    def conv(lhs, rhs):
        return jax.lax.conv_general_dilated(lhs, rhs, (1, 1), "SAME", dimension_numbers=_2D)

    assert_same(evaluate(from_jax(conv, lhs, rhs), lhs, rhs), jax.jit(conv)(lhs, rhs))


_HAND_WRITTEN = """HloModule convolution

ENTRY main {
  lhs = f32[2,7,6,3] parameter(0)
  rhs = f32[3,2,3,4] parameter(1)
  ROOT conv = f32[2,%d,%d,4] convolution(lhs, rhs), window={size=3x2 %s}, dim_labels=b01f_01io->b01f
}
"""


@pytest.mark.parametrize("window, out", [
    ("pad=-3_-2x0_0", (0, 5)),
    ("rhs_reversal=1x0", (5, 5)),
    ("pad=1_2x0_1 rhs_reversal=0x1", (8, 6)),
    ("stride=2x1 pad=1_1x-1_0 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=1x1", (3, 9)),
])
def test_hand_written(window: str, out: tuple[int, int]) -> None:
    text = _HAND_WRITTEN % (*out, window)
    rng = np.random.default_rng(8)
    lhs = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    rhs = rng.standard_normal((3, 2, 3, 4)).astype(np.float32)
    # measured: up to 1.68 eps of the sum of |terms| (7 seeds each)
    assert_within_sum_of_magnitudes(evaluate(xlapy.parse_hlo(text), lhs, rhs), run_on_xla_cpu(text, lhs, rhs),
                                     run_on_xla_cpu(text, np.abs(lhs), np.abs(rhs)), _EPSILONS_OF_SUM["f32", "f32"])
