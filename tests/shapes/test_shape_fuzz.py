"""Random edits of shape texts, with the tokens that broke parsers before
(other scripts' digits, 5000-digit numbers, 5000-deep nesting): the parser
either reads the text, and then what it prints reads back to the same shape
and text, or raises an XlapyError; never another exception."""

from __future__ import annotations

from tests.text_edits import check_drawn, edit_budgets, edited_text
from xlapy.errors import XlapyError
from xlapy.shapes import parse_shape

SOURCES = [
    "f32[3,5]{1,0:T(2,2)}", "(f32[10], s32[])", "s32[<=8,?]", "token[]", "bf16[8,128]{1,0:T(8,128)(2,1)}",
    "f32[4,6]{1,0:S(5)SC(1:2,4)M(8)}", "(f32[2]{0}, (pred[], u4[3]{0:E(4)}))", "f32[2,3,4]{0,2,1:T(2,*,4)L(2)}",
    "u8[5]{0:D(C+~)#(u16)*(u32)}", "c64[]", "f8e4m3fn[1,1]{0,1}",
]
NASTY = ["\u0661", "\uff13", "\u0663\u0664", "9" * 5000, "(" * 5000, ")" * 5000, "{" * 5000, "[" * 5000,
         "9223372036854775808", "9223372036854775807", "-1", "-9223372036854775809", "0", "M(-1)", "S(-1)",
         "SC(5:1)", "SC(0:1)", "P(f32[2])", ":", "T(", "*", "<=", "?", ",", "[", "]", "(", ")", "{", "}", "/*", "*/",
         "tuple", "token", "\n", " ", "E(", "L(0)", "D(", "f32", "s4", "e", "\x00", "\u00a0"]


def _check_edited(text: str) -> None:
    try:
        shape = parse_shape(text)
    except XlapyError:
        return
    printed = str(shape)
    again = parse_shape(printed)
    assert again == shape and str(again) == printed


@edit_budgets()
def test_edits_parse_or_raise_xlapy_errors(budget: int) -> None:
    check_drawn(budget, edited_text(SOURCES, NASTY, max_span=6), _check_edited)
