"""MLIR's syntax pieces: types, attributes printed back exactly as MLIR prints
them (floats, dense literals, strings, dictionaries), and split-input-file."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tools.oracles import require_jax
from xlapy.errors import ParseError
from xlapy.frontends.mlir_syntax import (
    DenseElementsAttr,
    TensorType,
    format_float,
    parse_attribute,
    parse_type,
    shape_of,
    split_input_file,
    type_of,
)
from xlapy.shapes import Shape
from xlapy.syntax import Cursor


def _attr(text: str):
    cursor = Cursor(text)
    attr = parse_attribute(cursor)
    assert cursor.at_end()
    return attr


def _type(text: str):
    cursor = Cursor(text)
    type_ = parse_type(cursor)
    assert cursor.at_end()
    return type_


@pytest.mark.parametrize(("text", "shape"), [
    ("tensor<8x16xf32>", "f32[8,16]"),
    ("tensor<f32>", "f32[]"),
    ("tensor<2x0xi1>", "pred[2,0]"),
    ("tensor<4xui32>", "u32[4]"),
    ("tensor<3xcomplex<f64>>", "c128[3]"),
    ("tensor<2xf8E4M3FN>", "f8e4m3fn[2]"),
    ("tensor<7xbf16>", "bf16[7]"),
    ("tensor<2xi4>", "s4[2]"),
    ("!stablehlo.token", "token[]"),
    ("tuple<tensor<f32>, tensor<2xi64>>", "(f32[], s64[2])"),
    ("tensor<?x4xf32>", "f32[?,4]"),
    ("tensor<?x4xf32, #stablehlo.bounds<8, ?>>", "f32[<=8,4]"),
])
def test_types_and_their_shapes(text: str, shape: str) -> None:
    type_ = _type(text)
    assert str(type_) == text
    assert str(shape_of(type_)) == shape
    assert type_of(shape_of(type_)) == type_


def test_type_spacing_is_canonical() -> None:
    assert str(_type("tuple< tensor<f32> ,tensor<2xi32> >")) == "tuple<tensor<f32>, tensor<2xi32>>"
    assert str(_type("tensor<complex< f32 >>")) == "tensor<complex<f32>>"
    assert str(_type("(tensor<f32>, tensor<f32>) -> (tensor<i1>)")) == "(tensor<f32>, tensor<f32>) -> tensor<i1>"


@pytest.mark.parametrize(("value", "element", "text"), [
    (0.0, "f32", "0.000000e+00"),
    (-0.0, "f32", "-0.000000e+00"),
    (1.0, "f32", "1.000000e+00"),
    (0.044715, "f32", "4.471500e-02"),
    (0.7978845608, "f32", "0.797884583"),
    (22019512.0, "f32", "0x4BA7FEDC"),
    (9.4708097e10, "f32", "9.4708097E+10"),
    (float("nan"), "f32", "0x7FC00000"),
    (float("-inf"), "f32", "0xFF800000"),
    (0.1, "f64", "1.000000e-01"),
    (1.23456789, "f64", "1.2345678899999999"),
    (1e-7, "f64", "9.9999999999999995E-8"),
    (123456789.0, "f64", "0x419D6F3454000000"),
    (2.25, "bf16", "2.250000e+00"),
    (float("inf"), "bf16", "0x7F80"),
    (65504.0, "f16", "6.550400e+04"),
])
def test_floats_print_as_mlir_prints_them(value: float, element: str, text: str) -> None:
    assert format_float(value, element) == text


_FLOAT_TYPES = {"f32": np.float32, "f64": np.float64, "bf16": ml_dtypes.bfloat16, "f16": np.float16}


def _check_float_agrees_with_jaxlib_mlir(element: str, value: float) -> None:
    require_jax()
    from jax._src.interpreters import mlir
    from jax._src.lib.mlir import ir
    with np.errstate(over="ignore"):
        typed = np.asarray(value, dtype=_FLOAT_TYPES[element])
    bits = typed.tobytes().hex().upper()
    text = (f'func.func @f() -> tensor<{element}> {{\n  %0 = stablehlo.constant dense<"0x{bits}"> : tensor<{element}>\n'
            f"  return %0 : tensor<{element}>\n}}")
    with mlir.make_ir_context():
        printed = str(ir.Module.parse(text))
    reference = printed.split("dense<")[1].split("> :")[0]
    assert format_float(typed, element) == reference


# A bounded budget in the default run (each example parses a module with jaxlib), a larger one with the slow tests.
@settings(max_examples=40, deadline=None)
@given(st.sampled_from(sorted(_FLOAT_TYPES)), st.floats(allow_nan=False, width=64))
def test_floats_agree_with_jaxlib_mlir(element: str, value: float) -> None:
    _check_float_agrees_with_jaxlib_mlir(element, value)


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(st.sampled_from(sorted(_FLOAT_TYPES)), st.floats(allow_nan=False, width=64))
def test_floats_agree_with_jaxlib_mlir_many(element: str, value: float) -> None:
    _check_float_agrees_with_jaxlib_mlir(element, value)


@pytest.mark.parametrize(("text", "printed"), [
    ("dense<0> : tensor<i32>", "dense<0> : tensor<i32>"),
    ("dense<[1.0, 2.5]> : tensor<2xf32>", "dense<[1.000000e+00, 2.500000e+00]> : tensor<2xf32>"),
    ("dense<[[1, 1], [1, 1]]> : tensor<2x2xi8>", "dense<1> : tensor<2x2xi8>"),
    ("dense<[true, false]> : tensor<2xi1>", "dense<[true, false]> : tensor<2xi1>"),
    ("dense<(1.0, -2.0)> : tensor<2xcomplex<f32>>", "dense<(1.000000e+00,-2.000000e+00)> : tensor<2xcomplex<f32>>"),
    ("dense<> : tensor<0x3xf32>", "dense<> : tensor<0x3xf32>"),
    ('dense<"0x0000803F"> : tensor<2x3xf32>', "dense<1.000000e+00> : tensor<2x3xf32>"),
    ('dense<"0x0100"> : tensor<2xi1>', "dense<[true, false]> : tensor<2xi1>"),
    ("dense<0xFF800000> : tensor<f32>", "dense<0xFF800000> : tensor<f32>"),
    ("dense<[-1, 255]> : tensor<2xi16>", "dense<[-1, 255]> : tensor<2xi16>"),
    ("dense<[0, 1]> : tensor<2xindex>", "dense<[0, 1]> : tensor<2xindex>"),
])
def test_dense_literals(text: str, printed: str) -> None:
    assert str(_attr(text)) == printed


def test_large_dense_literals_print_as_hex() -> None:
    values = np.arange(101, dtype=np.int32)
    attr = DenseElementsAttr(TensorType((101,), "i32"), values)
    text = str(attr)
    assert text == 'dense<"0x' + values.tobytes().hex().upper() + '"> : tensor<101xi32>'
    assert np.array_equal(_attr(text).array, values)
    small = DenseElementsAttr(TensorType((100,), "i32"), values[:100])
    assert str(small).startswith("dense<[0, 1, 2, ")


def test_dense_literal_errors() -> None:
    with pytest.raises(ParseError, match="unsigned"):
        _attr("dense<-1> : tensor<ui8>")
    with pytest.raises(ParseError, match="floating point"):
        _attr("dense<1> : tensor<f32>")
    with pytest.raises(ParseError, match="shape"):
        _attr("dense<[1, 2, 3]> : tensor<2xi32>")


@pytest.mark.parametrize(("text", "printed"), [
    ("1", "1 : i64"),
    ("7 : i32", "7 : i32"),
    ("true", "true"),
    ("1.5", "1.500000e+00 : f64"),
    ("1.0e-3 : f32", "1.000000e-03 : f32"),
    ('"a\\\\b\\09c\\22\\n"', '"a\\\\b\\09c\\22\\0A"'),
    ("[1, 2]", "[1 : i64, 2 : i64]"),
    ("array<i64: 1, -2>", "array<i64: 1, -2>"),
    ("array<i64>", "array<i64>"),
    ("array<i1: true, false>", "array<i1: true, false>"),
    ("{b = 1 : i32, a, c = \"x\"}", '{a, b = 1 : i32, c = "x"}'),
    ("@f", "@f"),
    ('@"jit zeros"', '@"jit zeros"'),
    ("#stablehlo<precision HIGHEST>", "#stablehlo<precision HIGHEST>"),
    ("#stablehlo.gather<offset_dims = [1], index_vector_dim = 1>",
     "#stablehlo.gather<offset_dims = [1], index_vector_dim = 1>"),
    ("tensor<2xf32>", "tensor<2xf32>"),
    ("unit", "unit"),
    ("#sdy.sharding<@mesh, [{\"a\",?}, {}]>", '#sdy.sharding<@mesh, [{"a", ?}, {}]>'),
    ("#sdy.sharding_per_value<[<@mesh, []>]>", "#sdy.sharding_per_value<[<@mesh, []>]>"),
])
def test_attributes_print_as_mlir_prints_them(text: str, printed: str) -> None:
    assert str(_attr(text)) == printed


def test_dialect_attribute_fields() -> None:
    fields = _attr("#stablehlo.scatter<update_window_dims = [1, 2], index_vector_dim = 1>").fields()
    assert [str(fields["update_window_dims"]), str(fields["index_vector_dim"])] == ["[1, 2]", "1"]


def test_split_input_file_keeps_line_numbers() -> None:
    text = "a\nb\n// -----\nc\n\n// -----\nd\n"
    assert split_input_file(text) == [("a\nb\n", 1), ("c\n\n", 4), ("d\n", 7)]
    assert split_input_file("x") == [("x", 1)]


def test_split_chunks_report_lines_of_the_whole_file() -> None:
    from xlapy.frontends.stablehlo import parse_module

    text = ("func.func @ok() {\n  return\n}\n// -----\nfunc.func @bad() {\n  %0 = stablehlo.add %x, %x : tensor<f32>\n"
            "  return\n}\n")
    (first, line1), (second, line2) = split_input_file(text)
    parse_module(first, first_line=line1)
    with pytest.raises(ParseError) as error:
        parse_module(second, first_line=line2)
    assert (error.value.line, error.value.column) == (6, 22)


def test_shape_of_rejects_index_tensors() -> None:
    with pytest.raises(ValueError):
        shape_of(_type("tensor<2xindex>"))
    assert math.isnan(float(_attr("dense<0x7FC00000> : tensor<f32>").array))
    assert shape_of(_type("tensor<3xf32>")) == Shape.array("f32", (3,))
