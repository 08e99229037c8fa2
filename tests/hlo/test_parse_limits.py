"""HLO text the parser refuses with a ParseError at the offending line and
column instead of a Python exception: other scripts' digits, integers too
long to convert or past 64 bits in attributes, shapes and literals, nesting
deeper than the parser follows, and literals of shapes too large to hold."""

from __future__ import annotations

import pytest

from xlapy.errors import ParseError
from xlapy.hlo import parse_module

BIG = "9" * 5000


def _module(root: str, parameter: str = "f32[4]") -> str:
    return f"HloModule m\nENTRY e {{\n  p = {parameter} parameter(0)\n  ROOT r = {root}\n}}\n"


@pytest.mark.parametrize(("text", "at", "message"), [
    (_module("f32[4] negate(p)", "f32[\u0664]"), "\u0664", "expected a dimension size"),
    (_module("f32[4] negate(p)", "f32[" + BIG + "]"), BIG, "integer too large"),
    (_module("f32[4] negate(p)", "(" * 5000 + "f32[4]" + ")" * 5000), "(" * 4900 + "f32",
     "nested more than 100 levels"),
    (_module("f32[4] negate(p)", "f32[4611686018427387904]"), "f32[46", "size in bytes does not fit in 64 bits"),
    (_module("f32[4] negate(p)").replace("parameter(0)", "parameter(\u0660)"), "\u0660",
     "expected the parameter number"),
    (_module("f32[4] negate(p)").replace("parameter(0)", "parameter(-1)"), "-1", "integer out of range"),
    (_module("f32[4] reverse(p), dimensions={" + BIG + "}"), BIG, "integer too large"),
    (_module("f32[4] reverse(p), dimensions={9223372036854775808}"), "922", "integer too large"),
    (_module("f32[4] reverse(p), dimensions={\u0660}"), "\u0660", "expected an integer"),
    (_module("f32[2] slice(p), slice={[0:" + BIG + "]}"), BIG, "integer too large"),
    (_module("f32[4] pad(p, p), padding=0_" + BIG), "0_", "integer too large"),
    (_module("f32[4] pad(p, p), padding=0_\u0661"), "0_", "expected padding like"),
    (_module("f32[4] reduce-window(p, p), window={size=" + BIG + "}, to_apply=e"), BIG, "integer too large"),
    (_module("f32[4] constant({" + BIG + ", 1, 2, 3})"), BIG, "integer too large"),
    (_module("s32[4] constant({1, 2, 3, \u0664})"), "\u0664", "cannot read literal"),
    (_module("f32[1000000000000] constant({1, 2})"), "}", "expects 1000000000000 elements"),
    (_module("f32[1000000000000] constant(7)"), "7)", "expects nested array in rank 1"),
], ids=lambda value: value if len(value) < 40 else f"{value[:40]}...")
def test_refused_with_position(text: str, at: str, message: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_module(text)
    line = next(i for i, x in enumerate(text.splitlines(), 1) if at in x)
    assert (info.value.line, info.value.column) == (line, text.splitlines()[line - 1].index(at) + 1)
    assert message in info.value.message


def test_elided_constant_of_a_huge_shape_is_not_materialised() -> None:
    module = parse_module(_module("f32[1000000000000] constant({...})"))
    assert module.entry.root.literal == "{...}"
