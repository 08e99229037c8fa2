"""Constant literals are read as XLA's parser reads them: a value out of its
type's range, a float for an integer type, parentheses for a real type or a
wrongly nested array is an error at the value's line and column (as XLA
reports it), never a wrapped, truncated or rounded-to-infinity value."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tests.hlo.xla import xla_reprint
from xlapy.errors import ParseError, XlapyError
from xlapy.hlo import parse_module
from xlapy.hlo.literal import format_literal, parse_literal
from xlapy.shapes import parse_shape

CASES = [
    ("s4[2]", "{-9, 7}"), ("s4[2]", "{-8, 7}"), ("u4[]", "16"), ("u4[]", "15"), ("s32[]", "1.5"), ("s32[]", "1e3"),
    ("s32[]", "2147483648"), ("s32[]", "-2147483648"), ("s64[]", "9223372036854775807"),
    ("u64[]", "18446744073709551615"),
    ("u64[]", "18446744073709551616"), ("u8[]", "-1"), ("u8[]", "255"), ("s8[]", "-129"), ("pred[]", "2"),
    ("pred[]", "-1"), ("pred[2]", "{1, 0}"), ("pred[]", "false"), ("f16[]", "65504"), ("f16[]", "65519"),
    ("f16[]", "65520"), ("f16[]", "-65520"), ("f16[]", "1e5"), ("f32[]", "1e39"), ("f32[]", "3.5e38"),
    ("f32[]", "3.4028235e38"), ("f8e4m3fn[]", "500"), ("f8e4m3fn[]", "449"), ("f8e4m3fn[]", "nan"),
    ("f8e8m0fnu[]", "-1"), ("f8e8m0fnu[]", "0"), ("f8e8m0fnu[]", "nan"), ("f8e8m0fnu[]", "0.5"),
    ("bf16[]", "1e39"), ("f32[]", "nan(0x1)"), ("f32[]", "-nan(0x7fffff)"), ("f32[]", "nan(0x800000)"),
    ("f16[]", "nan(0x1)"), ("bf16[]", "-nan(0x7f)"), ("f8e5m2[]", "nan(0x1)"), ("f8e4m3fn[]", "nan(0x1)"),
    ("f32[]", "nan(hello)"), ("f64[]", "1e999"), ("f64[]", "-inf"), ("c64[]", "1"), ("f32[]", "(1,2)"),
    ("c64[]", "(1e39, 0)"), ("c64[]", "(1, 2)"), ("f32[2]", "{1, 2, 3}"), ("f32[2]", "{1}"), ("f32[2,2]", "{1,2,3,4}"),
    ("f32[2]", "{{1,2}}"), ("f32[]", "{1}"), ("f32[]", "+1"), ("f32[]", ".5"), ("f32[]", "5."), ("s32[]", "0x10"),
    ("s32[]", "007"), ("f8e4m3fnuz[]", "-0"), ("f32[2,0]", "{ {}, {} }"), ("f32[0,3]", "{}"),
]


def _module(shape: str, literal: str) -> str:
    return f"HloModule m\nENTRY e {{\n  ROOT c = {shape} constant({literal})\n}}\n"


def _xla(shape: str, literal: str) -> tuple[str | None, tuple[int, int] | None]:
    """XLA's printed literal, or None and the line and column of its error."""
    try:
        line = next(x for x in xla_reprint(_module(shape, literal)).splitlines() if "constant(" in x)
    except Exception as e:  # XLA's parse errors come as RuntimeError or ValueError
        where = re.search(r"was parsing (\d+):(\d+): error", str(e))
        return None, (int(where.group(1)), int(where.group(2))) if where else None
    return line.split("constant(", 1)[1][:-1], None


@pytest.mark.parametrize(("shape", "literal"), CASES)
def test_reads_what_xla_reads_and_refuses_what_it_refuses(shape: str, literal: str) -> None:
    expected, where = _xla(shape, literal)
    if expected is not None:
        value = parse_literal(literal, parse_shape(shape))
        assert format_literal(value, parse_shape(shape)) == expected
        return
    with pytest.raises(ParseError) as info:
        parse_module(_module(shape, literal))
    if "out of range" in str(info.value) or "expects an integer" in str(info.value):
        assert (info.value.line, info.value.column) == where


@pytest.mark.parametrize(("shape", "literal", "message"), [
    # XLA turns these into other values (NaN, -0, 6): refused instead.
    ("f8e4m3fn[]", "inf", "has no infinity"), ("f4e2m1fn[]", "nan", "has no NaN"),
    ("f4e2m1fn[]", "inf", "has no infinity"), ("f4e2m1fn[]", "7", "out of range"),
    # XLA aborts on these.
    ("s32[]", "true", "expects a number"), ("f32[]", "false", "expects a number"),
    ("s64[]", "9" * 5000, "integer too large"), ("f64[]", "9" * 5000, "integer too large"),
    ("f64[]", "9" * 5000 + ".5", "out of range"), ("u64[]", "-" + "1" * 30, "out of range"),
], ids=lambda value: value if len(value) < 40 else f"{value[:10]}...")
def test_refused_where_xla_changes_the_value(shape: str, literal: str, message: str) -> None:
    with pytest.raises(XlapyError, match=message):
        parse_literal(literal, parse_shape(shape))


def test_values_at_the_limits() -> None:
    assert parse_literal("{-8, 7}", parse_shape("s4[2]")).tolist() == [-8, 7]
    assert parse_literal("18446744073709551615", parse_shape("u64[]")) == np.uint64(2**64 - 1)
    assert parse_literal("65519", parse_shape("f16[]")) == np.float16(65504)
    bits = parse_literal("-nan(0x7fffff)", parse_shape("f32[]")).view(np.uint32)
    assert int(bits) == 0xFFFFFFFF


def test_deeply_nested_literal_is_refused() -> None:
    with pytest.raises(ParseError, match="expects nested array in rank 0"):
        parse_module(_module("f32[1]", "{" * 5000 + "1" + "}" * 5000))
    deep = "f32[" + ",".join(["1"] * 101) + "]"
    with pytest.raises(ParseError, match="nested more than 100 levels"):
        parse_module(_module(deep, "{" * 101 + "1" + "}" * 101))
