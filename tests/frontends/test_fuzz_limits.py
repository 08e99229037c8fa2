"""Random edits of StableHLO modules with the tokens that broke the reader
before (other scripts' digits, 5000-digit numbers, 5000-deep nesting, huge
splats and tensor sizes): the frontend reads the text, and then what it prints
reads back to the same text, or raises an XlapyError; never another
exception, and never an allocation of the size a type claims."""

from __future__ import annotations

import pytest

from tests.frontends.test_fuzz import SOURCES
from tests.text_edits import (
    check_drawn,
    edit_budgets,
    edited_text,
    refused_or_round_trips,
)
from xlapy.errors import ParseError
from xlapy.frontends.stablehlo import parse_module, print_module

NASTY = ["\u0661", "\uff13", "9" * 5000, "0x" + "f" * 5000, "[" * 5000, "(" * 5000, "{" * 5000, "tuple<" * 5000,
         "9223372036854775808", "18446744073709551616", "-9223372036854775809", "100000000000x", "4611686018427387904x",
         "dense<0.0> : tensor<100000000000xf32>", "dense<1000> : tensor<i8>", "#stablehlo.bounds<abc>", "%0:9",
         "#99999999999999999999", "1e999", "\u00a0", "-", "0", "x", "<", ">", "[", "]", "{", "}", "(", ")"]


@edit_budgets()
def test_edits_parse_or_raise_xlapy_errors(budget: int) -> None:
    check_drawn(budget, edited_text(SOURCES, NASTY, max_edits=2), refused_or_round_trips(parse_module, print_module))


def _module(body: str, argument: str = "tensor<2xf32>") -> str:
    return (f"func.func @main(%arg0: {argument}) -> tensor<2xf32> {{\n{body}\n"
            "  %0 = stablehlo.add %arg0, %arg0 : tensor<2xf32>\n  return %0 : tensor<2xf32>\n}\n")


@pytest.mark.parametrize(("text", "line", "column", "message"), [
    (_module("  %c = stablehlo.constant dense<0.0> : tensor<100000000000xf32>"), 2, 33,
     "a splat of 100000000000 elements takes 400000000000 bytes"),
    (_module("  %c = stablehlo.constant dense<\"0x00000000\"> : tensor<1000000000000xf32>"), 2, 33, "a splat of"),
    (_module("", "tensor<9223372036854775808xf32>"), 1, 31, "integer too large"),
    (_module("", "tensor<4611686018427387904xf32>"), 1, 24, "size in bytes does not fit in 64 bits"),
    (_module("", "tensor<\u0661xf32>"), 1, 31, "expected a type"),
    (_module("", "tensor<?xf32, #stablehlo.bounds<abc>>"), 1, 17, "bounds <abc> are not sizes"),
    (_module("  %c = stablehlo.constant dense<" + "9" * 5000 + "> : tensor<i32>"), 2, 33, "integer too large"),
    (_module("  %c = stablehlo.constant dense<1000> : tensor<i8>"), 2, 33,
     "integer constant 1000 out of range for i8 [-128, 255]"),
    (_module("  %c = stablehlo.constant dense<-129> : tensor<i8>"), 2, 33, "out of range for i8"),
    (_module("  %c = stablehlo.constant dense<256> : tensor<ui8>"), 2, 33, "out of range for ui8 [0, 255]"),
    (_module("  %c = stablehlo.constant {x = " + "9" * 5000 + " : i64} dense<1.0> : tensor<f32>"), 2, 32,
     "integer too large"),
    (_module("  %c = stablehlo.constant {x = 300 : i8} dense<1.0> : tensor<f32>"), 2, 32, "out of range for i8"),
    (_module("  %c = stablehlo.constant {x = " + "[" * 5000 + "]" * 5000 + "} dense<1.0> : tensor<f32>"), 2, 132,
     "attributes nested more than 100 levels deep"),
    (_module("  %c = stablehlo.constant dense<" + "[" * 5000 + "1" + "]" * 5000 + "> : tensor<i32>"), 2, 133,
     "dense literals nested more than 100 levels deep"),
    (_module("", "tuple<" * 5000 + ">" * 5000), 1, 629, "types nested more than 100 levels deep"),
], ids=lambda value: value if not isinstance(value, str) or len(value) < 40 else None)
def test_refused_with_position(text: str, line: int, column: int, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_module(text)
    assert (info.value.line, info.value.column) == (line, column)
    assert message in info.value.message


def test_in_range_values_read_as_mlir_reads_them() -> None:
    # A signless i8 reads 255 as -1 (two's complement), as MLIR does.
    module = parse_module(_module("  %c = stablehlo.constant dense<[255, -128, 127]> : tensor<3xi8>"))
    constant = next(i for i in module.entry.instructions if i.opcode == "constant")
    assert constant.literal.tolist() == [-1, -128, 127]
