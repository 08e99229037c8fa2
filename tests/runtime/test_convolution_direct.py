"""The convolution library thunk's direct kernel (``xlapy/codegen/backends/cpu_convolution.py``) against XLA:CPU
through jax and against the interpreter: feature counts that do and do not fill its vectors, line lengths that do
and do not divide its tiles, padding (negative too), strides, window dilation and reversal, feature groups, batch
1, 1-D to 3-D, several dimension orders and layouts, f32 and f64."""

from __future__ import annotations

import jax
import numpy as np
import pytest

import xlapy
from tools.compare import assert_same, assert_within_sum_of_magnitudes
from tools.convolution_paths import with_library_convolutions
from xlapy.codegen.backends.cpu_convolution import DirectConvolution
from xlapy.errors import UnimplementedError
from xlapy.frontends.jax import from_jax
from xlapy.runtime.thunks.convolution import DIRECT_MIN_OUT_FEATURES, ConvolutionThunk


def _methods(executable) -> list[str]:
    return [t.plan.method for t in executable.thunks if isinstance(t, ConvolutionThunk)]


def _check_against_xla(x: np.ndarray, w: np.ndarray, direct: bool = True, **options) -> None:
    """The convolution ``options`` describe, run by the library thunk (the direct kernel when ``direct``),
    within the rounding of its sums of XLA:CPU's result, and the same to the bit when run again."""
    options.setdefault("window_strides", (1,) * (x.ndim - 2))
    options.setdefault("padding", "SAME")

    def f(lhs, rhs):
        return jax.lax.conv_general_dilated(lhs, rhs, **options)

    with jax.enable_x64(x.dtype == np.float64):
        module = from_jax(f, x, w)
        expected = np.asarray(jax.jit(f)(x, w))
        magnitudes = np.asarray(jax.jit(f)(np.abs(x), np.abs(w)))
    executable = with_library_convolutions(xlapy.compile(module))
    assert _methods(executable) == ["direct" if direct else "shifted"]
    spec = options.get("dimension_numbers")
    rhs_spec = spec[1] if spec else "OI" + "".join("DHW"[-(x.ndim - 2):])
    window = np.prod([w.shape[rhs_spec.index(c)] for c in rhs_spec if c not in "OI"])
    in_features = w.shape[rhs_spec.index("I")]
    got = executable(x, w)
    assert_within_sum_of_magnitudes(got, expected, magnitudes, epsilons=window * in_features)
    assert_same(executable(x, w), got, exact_bits=True)


def _normal(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


NHWC = ("NHWC", "HWIO", "NHWC")


def _slow_unless(default: bool, *values):
    return pytest.param(*values, marks=[] if default else [pytest.mark.slow])


# Feature counts below, at and above a vector, in the default run; the others with the slow tests.
@pytest.mark.parametrize("in_features, out_features", [
    _slow_unless(pair in {(3, 5), (16, 16), (17, 15), (64, 128)}, *pair)
    for pair in [(1, 4), (3, 5), (16, 16), (17, 15), (32, 32), (8, 33), (67, 67), (64, 128)]])
def test_feature_counts(in_features, out_features):
    rng = np.random.default_rng(in_features * 100 + out_features)
    x = _normal(rng, (2, 9, 13, in_features))
    w = _normal(rng, (3, 3, in_features, out_features))
    _check_against_xla(x, w, dimension_numbers=NHWC)


# A line of one, lines about a tile and a long line in the default run; the others with the slow tests.
@pytest.mark.parametrize("width", [_slow_unless(width in {1, 11, 12, 13, 64}, width)
                                   for width in [1, 2, 7, 11, 12, 13, 25, 64]])
def test_line_lengths(width):
    rng = np.random.default_rng(width)
    x = _normal(rng, (1, 4, width, 16))
    w = _normal(rng, (3, 3, 16, 32))
    _check_against_xla(x, w, dimension_numbers=NHWC)


@pytest.mark.parametrize("padding", ["SAME", "VALID", ((2, 0), (0, 3)), ((-1, 2), (1, -2)), ((3, 3), (4, 4))])
def test_padding(padding):
    rng = np.random.default_rng(7)
    x = _normal(rng, (2, 8, 10, 8))
    w = _normal(rng, (3, 4, 8, 16))
    _check_against_xla(x, w, padding=padding, dimension_numbers=NHWC)


@pytest.mark.parametrize("strides, dilation", [((2, 3), (1, 1)), ((1, 1), (2, 3)), ((3, 2), (2, 2))])
def test_strides_and_window_dilation(strides, dilation):
    rng = np.random.default_rng(11)
    x = _normal(rng, (2, 12, 17, 8))
    w = _normal(rng, (3, 3, 8, 24))
    _check_against_xla(x, w, window_strides=strides, rhs_dilation=dilation, dimension_numbers=NHWC)


@pytest.mark.parametrize("groups", [2, 4])
def test_feature_groups(groups):
    rng = np.random.default_rng(groups)
    x = _normal(rng, (2, 7, 9, 8 * groups))
    w = _normal(rng, (3, 3, 8, 12 * groups))
    _check_against_xla(x, w, feature_group_count=groups, dimension_numbers=NHWC)


@pytest.mark.parametrize("numbers", [("NCHW", "OIHW", "NCHW"), ("NHWC", "OIHW", "NCHW"), ("CHWN", "IOHW", "HWCN"),
                                     ("NWHC", "WHIO", "NHWC")])
def test_dimension_orders(numbers):
    rng = np.random.default_rng(3)
    shapes = {"N": 2, "C": 12, "H": 6, "W": 11, "I": 12, "O": 20}
    x = _normal(rng, tuple(shapes[c] for c in numbers[0]))
    w = _normal(rng, tuple(shapes[c] if c in "IO" else 3 for c in numbers[1]))
    _check_against_xla(x, w, dimension_numbers=numbers)


def test_one_dimensional():
    rng = np.random.default_rng(1)
    x, w = _normal(rng, (3, 30, 10)), _normal(rng, (5, 10, 18))
    _check_against_xla(x, w, window_strides=(2,), padding=((3, 1),), dimension_numbers=("NWC", "WIO", "NWC"))


def test_three_dimensional():
    rng = np.random.default_rng(2)
    x, w = _normal(rng, (2, 5, 6, 7, 8)), _normal(rng, (3, 2, 3, 8, 16))
    _check_against_xla(x, w, rhs_dilation=(1, 2, 1), dimension_numbers=("NDHWC", "DHWIO", "NDHWC"))


def test_double_precision():
    rng = np.random.default_rng(5)
    x, w = _normal(rng, (2, 9, 10, 12), np.float64), _normal(rng, (3, 3, 12, 11), np.float64)
    _check_against_xla(x, w, padding=((1, 2), (0, 1)), dimension_numbers=NHWC)


def test_the_benchmark_convolution():
    # benchmarks/programs_vs_xla.py's conv2d: 8x64x64x32 by 3x3x32x32, "SAME".
    rng = np.random.default_rng(8)
    x, w = _normal(rng, (8, 64, 64, 32)), (0.1 * _normal(rng, (3, 3, 32, 32))).astype(np.float32)
    _check_against_xla(x, w, dimension_numbers=NHWC)


def test_few_output_features_keep_the_gemms():
    rng = np.random.default_rng(6)
    x = _normal(rng, (2, 8, 8, 16))
    w = _normal(rng, (3, 3, 16, DIRECT_MIN_OUT_FEATURES - 1))
    _check_against_xla(x, w, direct=False, dimension_numbers=NHWC)


def _module(lhs: str, rhs: str, out: str, window: str, labels: str, extra: str = ""):
    return xlapy.parse_hlo(f"""HloModule conv
ENTRY e {{ a = {lhs} parameter(0)  b = {rhs} parameter(1)
          ROOT c = {out} convolution(a, b), window={{{window}}}, dim_labels={labels}{extra} }}""")


# (input, kernel, result, window, dim_labels, extra): non-default layouts of every operand, reversal, negative
# padding, groups. Small whole numbers: every order of summation gives the interpreter's exact sums.
LAYOUTS = [
    ("f32[2,6,9,8]{3,2,1,0}", "f32[3,3,8,16]{3,2,1,0}", "f32[2,6,9,16]{3,2,1,0}", "size=3x3 pad=1_1x1_1",
     "b01f_01io->b01f", ""),
    ("f32[2,6,9,8]{0,3,2,1}", "f32[3,3,8,16]{0,1,3,2}", "f32[2,6,9,16]{1,2,3,0}", "size=3x3 pad=1_1x1_1",
     "b01f_01io->b01f", ""),
    ("f32[2,8,6,9]{3,2,1,0}", "f32[20,4,3,2]{3,2,1,0}", "f32[2,20,5,10]{3,2,1,0}",
     "size=3x2 pad=1_0x0_2 rhs_reversal=1x1", "bf01_oi01->bf01", ", feature_group_count=2"),
    ("f64[9,2,4]{0,1,2}", "f64[4,5,3]{0,2,1}", "f64[5,5,2]{0,2,1}", "size=3 pad=-1_1 rhs_dilate=2",
     "0bf_io0->f0b", ""),
    ("f32[1,4,5,6,8]{4,3,2,1,0}", "f32[2,2,3,8,5]{4,3,2,1,0}", "f32[1,4,2,6,5]{4,3,2,1,0}",
     "size=2x2x3 pad=0_1x0_0x1_1 stride=1x2x1", "b012f_012io->b012f", ""),
]


@pytest.mark.parametrize("form", LAYOUTS)
def test_layouts_match_the_interpreter(form):
    module = _module(*form)
    rng = np.random.default_rng(0)
    a, b = (rng.integers(-4, 5, p.shape.dimensions).astype(p.shape.type.dtype) for p in module.entry.parameters)
    executable = with_library_convolutions(xlapy.compile(module, run_hlo_passes=False))
    assert _methods(executable) == ["direct"]
    assert_same(executable(a, b), xlapy.evaluate(module, a, b), exact_bits=True)


def test_padding_multiplies_the_weights_by_zero():
    # An infinite weight times a padding zero is NaN, as in XLA's zero-padded input: the borders that read the
    # padding with that weight are NaN, the others are not.
    module = _module("f32[1,1,4,4]{3,2,1,0}", "f32[1,3,4,4]{3,2,1,0}", "f32[1,1,4,4]{3,2,1,0}", "size=1x3 pad=0_0x1_1",
                     "b01f_01io->b01f")
    a = np.ones((1, 1, 4, 4), np.float32)
    b = np.ones((1, 3, 4, 4), np.float32)
    b[0, 0, 0, 0] = np.inf
    executable = with_library_convolutions(xlapy.compile(module, run_hlo_passes=False))
    assert _methods(executable) == ["direct"]
    assert_same(executable(a, b), xlapy.evaluate(module, a, b), exact_bits=True)


def test_results_do_not_depend_on_blocks_or_threads():
    conv = DirectConvolution("f32", 3, 2, 7, 19, (5, 14), (5, 14), (3, 3), (1, 1), (1, 1), (1, 1))
    kernel = conv.compile()
    rng = np.random.default_rng(9)
    x = _normal(rng, (3, 5, 14, 14))
    w = _normal(rng, (2, 9, 7, conv.padded_out_features))
    at_once, one_by_one = np.empty((3, 5, 14, 38), np.float32), np.full((3, 5, 14, 38), np.nan, np.float32)
    kernel([x, w, at_once])
    for block in reversed(range(conv.blocks)):
        kernel([x, w, one_by_one], block, block + 1)
    assert_same(one_by_one, at_once, exact_bits=True)


@pytest.mark.parametrize("labels", ["b01f_01io->b01f", "bf01_oi01->bf01"])  # in place; through copies
def test_repeated_calls_take_new_arguments(labels):
    lhs, rhs, out = (("f32[2,5,7,8]", "f32[3,3,8,6]", "f32[2,5,7,6]") if labels.startswith("b01f") else
                     ("f32[2,8,5,7]", "f32[6,8,3,3]", "f32[2,6,5,7]"))
    module = _module(lhs, rhs, out, "size=3x3 pad=1_1x1_1", labels)
    executable = with_library_convolutions(xlapy.compile(module, run_hlo_passes=False))
    assert _methods(executable) == ["direct"]
    rng = np.random.default_rng(12)
    for _ in range(3):
        a, b = (rng.integers(-4, 5, p.shape.dimensions).astype(np.float32) for p in module.entry.parameters)
        assert_same(executable(a, b), xlapy.evaluate(module, a, b), exact_bits=True)


@pytest.mark.parametrize("element, window, out_features", [("f16", (3,), 4), ("f32", (), 4), ("f32", (3,), 0)])
def test_what_the_kernel_does_not_compute_is_refused(element, window, out_features):
    conv = DirectConvolution(element, 1, 1, 2, out_features, (5,) * len(window), (5,) * len(window), window,
                             (1,) * len(window), (1,) * len(window), (1,) * len(window))
    with pytest.raises(UnimplementedError, match="direct convolution"):
        conv.llvm_ir()
