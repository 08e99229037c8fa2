"""Random edits of HLO modules, with the tokens that broke parsers before
(other scripts' digits, 5000-digit numbers, 5000-deep nesting): the parser
either reads the text, and then what it prints reads back and prints the same,
or raises an XlapyError; never another exception."""

from __future__ import annotations

from tests.text_edits import (
    check_drawn,
    edit_budgets,
    edited_text,
    refused_or_round_trips,
)
from xlapy.hlo import parse_module
from xlapy.hlo.printer import print_module

SOURCES = [
    """HloModule m, entry_computation_layout={(f32[2,3]{1,0})->(f32[2,3]{1,0}, s32[])}

add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}

ENTRY e {
  p = f32[2,3]{1,0} parameter(0)
  c = f32[] constant(1.5)
  b = f32[2,3]{1,0} broadcast(c), dimensions={}
  a = f32[2,3]{1,0} add(p, b)
  r = f32[2]{0} reduce(a, c), dimensions={1}, to_apply=add
  k = s32[] constant(7)
  sl = f32[1,2]{1,0} slice(a), slice={[0:1], [1:3]}
  ROOT t = (f32[2,3]{1,0}, s32[]) tuple(a, k)
}
""",
    """HloModule w

ENTRY e {
  p = f32[1,4,4,1]{3,2,1,0} parameter(0)
  c = f32[] constant(0)
  k = s4[3]{0} constant({-8, 0, 7})
  z = c64[2]{0} constant({(1, 2), (3.5, -4)})
  q = pred[2,2]{1,0} constant({ {1, 0}, {0, 1} })
  ROOT pad = f32[1,6,6,1]{3,2,1,0} pad(p, c), padding=0_0x1_1x1_1x0_0
}
""",
]
NASTY = ["\u0661", "\uff13", "9" * 5000, "(" * 5000, ")" * 5000, "{" * 5000, "[" * 5000, "9223372036854775808",
         "18446744073709551616", "-1", "1.5", "1e39", "nan(0x1)", "inf", "-nan", "true", "0x10", "u4[2]", "s4[]",
         "(f32[], s32[])", "{...}", ",", "=", "%", "{", "}", "(", ")", "[", "]", "/*", "*/", "\n", "ROOT ",
         "f8e4m3fn", "\u00a0", "\x00", '"', "\\", "_", "x", ":"]


@edit_budgets()
def test_edits_parse_or_raise_xlapy_errors(budget: int) -> None:
    check_drawn(budget, edited_text(SOURCES, NASTY), refused_or_round_trips(parse_module, print_module))
