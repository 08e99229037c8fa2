"""Bad input is a ParseError at the line and column of the culprit (or a
VerifyError naming it), never another exception."""

from __future__ import annotations

import pytest

from xlapy.errors import ParseError
from xlapy.frontends.stablehlo import parse_module

HEADER = 'sdy.mesh @mesh = <["a"=2]>\nfunc.func @f(%arg0: tensor<8xf32>, %arg1: tensor<i32>) -> tensor<8xf32> {\n'

# (body lines after HEADER, line, column, message pattern); HEADER is lines 1-2.
CASES = [
    ("  %0 = stablehlo.add %x, %arg0 : tensor<8xf32>\n  return %0 : tensor<8xf32>\n}\n", 3, 22,
     "undefined value '%x'"),
    ("  %0 = stablehlo.add %arg0, %arg1 : tensor<8xf32>\n  return %0 : tensor<8xf32>\n}\n", 3, 29,
     "expects type tensor<8xf32>, but the value has type tensor<i32>"),
    ("  %0 = stablehlo.negate %arg0 : tensor<8xf32>\n  %0 = stablehlo.negate %arg0 : tensor<8xf32>\n"
     "  return %0 : tensor<8xf32>\n}\n", 4, 3, "redefinition of SSA value '%0'"),
    ("  %arg0 = stablehlo.negate %arg0 : tensor<8xf32>\n  return %arg0 : tensor<8xf32>\n}\n", 3, 3,
     "redefinition of SSA value '%arg0'"),
    ("  %0 = sdy.sharding_constraint %arg0 <@other, [{\"a\"}]> : tensor<8xf32>\n  return %0 : tensor<8xf32>\n}\n",
     3, 38, "unknown mesh '@other'"),
    ("  %0 = stablehlo.frobnicate %arg0 : tensor<8xf32>\n  return %0 : tensor<8xf32>\n}\n", 3, 8,
     "unknown op 'stablehlo.frobnicate'"),
    ("  %0 = stablehlo.negate %arg0 : tensor<8xf32>\n}\n", 4, 1, "no terminator"),
    ("  %0:2 = stablehlo.negate %arg0 : tensor<8xf32>\n  return %0#0 : tensor<8xf32>\n}\n", 3, 3,
     "has 1 results, but 2 are named"),
    ("  %0 = stablehlo.negate %arg0 : tensor<8xf32>\n  return %0#1 : tensor<8xf32>\n}\n", 4, 10,
     "has 1 results, there is no #1"),
    ("  return %arg1 : tensor<i32>\n}\n", 2, 11, "returns tensor<i32> as result 0, its type says tensor<8xf32>"),
    ("  %0 = call @g(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n  return %0 : tensor<8xf32>\n}\n", 3, 13,
     "undefined function '@g'"),
    ("  %0 = stablehlo.negate %arg0 {a = \"open} : tensor<8xf32>\n  return %0 : tensor<8xf32>\n}\n", 3, 36,
     "unterminated string"),
    ("  %0 = stablehlo.constant dense<[1.0, 2.0]> : tensor<3xf32>\n  return %arg0 : tensor<8xf32>\n}\n", 3, 33,
     "bad dense literal"),
    ("  %0 = stablehlo.negate %arg0 {a = 1, a = 2} : tensor<8xf32>\n  return %0 : tensor<8xf32>\n}\n", 3, 39,
     "duplicate attribute 'a'"),
    ("  %0 = stablehlo.negate %arg0 {a = 1.5 : i64} : tensor<8xf32>\n  return %0 : tensor<8xf32>\n}\n", 3, 36,
     "floating point value not valid for specified type i64"),
    ("  %0 = stablehlo.compare BIGGER, %arg0, %arg0 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xi1>\n"
     "  return %arg0 : tensor<8xf32>\n}\n", 3, 26, "unknown comparison direction 'BIGGER'"),
    ("  %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>, <@mesh, [{}]>]>} "
     ": tensor<8xf32>\n  return %0 : tensor<8xf32>\n}\n", 3, 8, "1 results but 2 shardings"),
    ("  %0:2 = stablehlo.while(%i = %arg1, %v = %arg0) : tensor<i32>, tensor<8xf32>\n"
     "  cond {\n    stablehlo.return %i, %i : tensor<i32>, tensor<i32>\n  } do {\n"
     "    stablehlo.return %i, %v : tensor<i32>, tensor<8xf32>\n  }\n  return %0#1 : tensor<8xf32>\n}\n", 3, 10,
     "the condition of stablehlo.while returns 2 values, expected 1"),
    ("  %0 = stablehlo.reduce(%arg0 init: %arg1) across dimensions = [0] : "
     "(tensor<8xf32>, tensor<i32>) -> tensor<f32>\n"
     "   reducer(%a: tensor<f32>, %b: tensor<f32>) {\n    stablehlo.return %a, %b : tensor<f32>, tensor<f32>\n  }\n"
     "  return %arg0 : tensor<8xf32>\n}\n", 3, 8, "the reducer body of stablehlo.reduce returns 2 values, expected 1"),
    ('  %0 = "stablehlo.case"(%arg1) ({\n    stablehlo.return %arg0, %arg0 : tensor<8xf32>, tensor<8xf32>\n'
     "  }) : (tensor<i32>) -> tensor<8xf32>\n  return %0 : tensor<8xf32>\n}\n", 3, 8,
     "branch 0 of stablehlo.case returns 2 values, expected 1"),
    ("  %0 = stablehlo.add %arg0, %arg0 : tensor<8xf32>\n  return %0 : tensor<8xf32>\n", 5, 1,
     "expected '}' after the terminator of function '@f'"),
]


@pytest.mark.parametrize(("body", "line", "column", "message"), CASES)
def test_error_position_and_message(body: str, line: int, column: int, message: str) -> None:
    with pytest.raises(ParseError) as error:
        parse_module(HEADER + body, source="input.mlir")
    assert (error.value.line, error.value.column) == (line, column), str(error.value)
    assert message in error.value.message
    assert str(error.value).startswith(f"input.mlir:{line}:{column}: ")


def test_module_level_errors() -> None:
    with pytest.raises(ParseError, match="2:10: mesh '@m' is declared twice"):
        parse_module('sdy.mesh @m = <["a"=2]>\nsdy.mesh @m = <["a"=2]>\n')
    with pytest.raises(ParseError, match="4:11: function '@f' is defined twice"):
        parse_module("func.func @f() {\n  return\n}\nfunc.func @f() {\n  return\n}\n")
    with pytest.raises(ParseError, match=r"expected 'sdy\.mesh' or 'func\.func'"):
        parse_module("module {\n  foo.bar\n}\n")
    with pytest.raises(ParseError, match="unexpected 'x' after the module"):
        parse_module("module {\n}\nx\n")


def test_unknown_mesh_on_an_argument() -> None:
    text = 'func.func @f(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@nowhere, [{}]>}) -> tensor<8xf32> {\n' \
           "  return %arg0 : tensor<8xf32>\n}\n"
    with pytest.raises(ParseError, match="1:14: unknown mesh '@nowhere'"):
        parse_module(text)


def test_call_signature_mismatch() -> None:
    text = ("func.func @f(%arg0: tensor<8xf32>) -> tensor<8xf32> {\n"
            "  %0 = call @g(%arg0) : (tensor<8xf32>) -> tensor<8xf32>\n  return %0 : tensor<8xf32>\n}\n"
            "func.func private @g(%arg0: tensor<4xf32>) -> tensor<8xf32> {\n  %0 = stablehlo.constant dense<0.0> : "
            "tensor<8xf32>\n  return %0 : tensor<8xf32>\n}\n")
    with pytest.raises(ParseError, match=r"2:13: call to '@g' passes \(tensor<8xf32>\), it takes \(tensor<4xf32>\)"):
        parse_module(text)
