"""Constant literals read and print exactly as XLA's literal printer writes them."""

import numpy as np
import pytest

from tests.hlo.xla import xla_reprint
from xlapy.errors import XlapyError
from xlapy.hlo.literal import format_literal, parse_literal
from xlapy.shapes import parse_shape

CASES = [
    ("f32[2,3]", "{ {1, 2.5, nan}, {-0, -0.0, inf} }"), ("f32[3]", "{1, 0.1, 1e20}"),
    ("f32[2,2,2]", "{{{1,2},{3,4}},{{5,6},{7,8}}}"), ("f32[2,1,2,2]", "{{{{1,2},{3,4}}},{{{5,6},{7,8}}}}"),
    ("bf16[3]", "{1.5, 0.1, 3.14159}"), ("f16[2]", "{0.1, 65504}"), ("f8e5m2[2]", "{0.1, 3}"),
    ("f8e4m3fn[1]", "{0.1}"), ("f8e8m0fnu[2]", "{0.5, 4}"), ("f4e2m1fn[2]", "{0.5, 6}"),
    ("c64[2]", "{(1,2), (3.5,-4)}"), ("c128[]", "(1, 2)"), ("pred[3]", "{1,0,1}"), ("pred[]", "true"),
    ("s32[2]", "{-5, 2147483647}"), ("u8[2]", "{255, 0}"), ("s4[2]", "{-8, 7}"),
    ("f32[]", "-0.0"), ("f32[]", "-nan"), ("f32[]", "123456789"), ("f32[]", "1e-45"), ("f32[]", "3.4028235e38"),
    ("f64[]", "0.3"), ("f64[]", "1e300"), ("f32[0]", "{}"), ("f32[2,0]", "{ {}, {} }"), ("f32[1,1]", "{{3}}"),
    ("(f32[], s32[2])", "(1.5, {1, 2})"),
]


@pytest.mark.parametrize(("shape", "literal"), CASES)
def test_literal_prints_as_xla(shape, literal):
    text = f"HloModule m\n\nENTRY %e () -> {shape} {{\n  ROOT %c = {shape} constant({literal})\n}}\n"
    xla_line = next(line for line in xla_reprint(text).splitlines() if "constant(" in line)
    expected = xla_line.split("constant(", 1)[1][:-1]
    assert format_literal(parse_literal(literal, parse_shape(shape)), parse_shape(shape)) == expected


def test_literal_values():
    value = parse_literal("{ {1, 2}, {3, 4} }", parse_shape("s32[2,2]"))
    assert value.dtype == np.int32 and value.tolist() == [[1, 2], [3, 4]]
    assert parse_literal("{(1, 2)}", parse_shape("c64[1]")).tolist() == [1 + 2j]


@pytest.mark.parametrize(("shape", "literal"), [
    ("f32[2]", "{1}"), ("f32[]", "{1, 2}"), ("c64[]", "(1, 2"), ("(f32[], f32[])", "(1)"), ("f32[2]", "{1,,2}"),
])
def test_bad_literals(shape, literal):
    with pytest.raises(XlapyError):
        parse_literal(literal, parse_shape(shape))


@pytest.mark.parametrize(("shape", "literal"), [
    ("f32[1,0]", "{ {  } }"), ("f32[0,3]", "{}"), ("f32[2,0,1]", "{ {}, {} }"),
    ("f32[1,1,0,2]", "{ { /*i0=0*/ { /*i1=0*/ } } }"), ("f32[1,1,1,2]", "{ { /*i0=0*/ { /*i1=0*/ { 1, 2 } } } }"),
])
def test_empty_and_labelled_literals_print_as_xla_prints_them(shape, literal):
    assert format_literal(parse_literal(literal, parse_shape(shape)), parse_shape(shape)) == \
        _xla_literal(f"HloModule c\nENTRY m {{\n  ROOT c = {shape} constant({literal})\n}}\n")


def _xla_literal(text: str) -> str:
    line = next(line for line in xla_reprint(text).splitlines() if " constant(" in line)
    return line.split(" constant(", 1)[1].rsplit(")", 1)[0]
