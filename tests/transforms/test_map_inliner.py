"""The map inliner against XLA's MapInliner behaviour (``map_inliner_test.cc``): expected output, and
values equal to the interpreter's before and after, compiled too."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from tools.compare import assert_same
from xlapy.hlo import parse_module, verify
from xlapy.transforms.map_inliner import MapInliner

MODULE = """HloModule m
f {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  {body}
}}
ENTRY e {{
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  ROOT r = {result}[4] map(p, q), dimensions={{0}}, to_apply=f
}}
"""

CASES = {
    # XLA's MapMaxFunction: max(a, b) becomes max(p, q).
    "maximum": ("ROOT m = f32[] maximum(a, b)", "f32", "maximum(%p, %q)"),
    # The parameters in the other order.
    "swapped": ("ROOT s = f32[] subtract(b, a)", "f32", "subtract(%q, %p)"),
    # XLA's MapConstant: a constant becomes its broadcast.
    "constant": ("ROOT c = f32[] constant(2)", "f32", "broadcast(%constant), dimensions={}"),
    # XLA's MapParameter: a computation returning its second parameter is the second operand.
    "parameter": ("ROOT n = f32[] negate(a)", "f32", "parameter(1)"),
    # Attributes come along (a compare keeps its direction).
    "compare": ("ROOT lt = pred[] compare(a, b), direction=LT", "pred", "compare(%p, %q), direction=LT"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_map_of_one_op_becomes_the_op(name: str) -> None:
    body, result, expected = CASES[name]
    text = MODULE.format(body=body, result=result)
    if name == "parameter":  # the template's b, returned as it is
        text = text.replace("b = f32[] parameter(1)\n  ROOT n = f32[] negate(a)", "ROOT b = f32[] parameter(1)")
    module = parse_module(text)
    assert MapInliner().run(module)
    verify(module)
    root_line = next(line for line in module.to_text().splitlines() if "ROOT %" in line and "[4]" in line)
    assert "map(" not in module.to_text() and expected in root_line
    args = [np.array([1.5, -2.0, 0.0, 7.0], np.float32), np.array([3.0, -2.5, -0.0, 7.0], np.float32)]
    want = xlapy.evaluate(parse_module(text), *args)
    assert_same(xlapy.evaluate(module, *args), want, exact_bits=True)
    assert_same(xlapy.compile(parse_module(text))(*args), want, exact_bits=True)


def test_a_map_of_several_ops_is_left_alone() -> None:
    module = parse_module(MODULE.format(body="s = f32[] add(a, b)\n  ROOT m = f32[] multiply(s, a)", result="f32"))
    assert not MapInliner().run(module)
    assert module.entry.root.opcode == "map"


def test_a_map_of_an_op_on_a_constant_is_left_alone() -> None:
    # XLA inlines only ops whose operands are all parameters.
    module = parse_module(MODULE.format(body="c = f32[] constant(1)\n  ROOT m = f32[] add(a, c)", result="f32"))
    assert not MapInliner().run(module)
