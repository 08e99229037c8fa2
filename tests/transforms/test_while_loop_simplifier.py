"""While loops of zero or one trips removed, as XLA's ``WhileLoopSimplifier``
does (``xla/service/while_loop_simplifier.cc``; cases after its
``while_loop_simplifier_test.cc``), values kept against the interpreter."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tools.random_control_flow import while_loop_texts
from tools.random_hlo import assert_pass_preserves_values
from xlapy.hlo import parse_module
from xlapy.hlo.verifier import verify
from xlapy.transforms.scatter_expander import ScatterExpander
from xlapy.transforms.while_loop_analysis import trip_count
from xlapy.transforms.while_loop_simplifier import WhileLoopSimplifier


def _loop(start: int, limit: int, direction: str = "LT", step: int = 1, body_extra: str = "") -> str:
    return f"""
HloModule m

body {{
  p = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[3] get-tuple-element(p), index=1
  step = s32[] constant({step})
  next = s32[] add(i, step)
  y = f32[3] exponential(x){body_extra}
  ROOT t = (s32[], f32[3]) tuple(next, y)
}}

cond {{
  p = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant({limit})
  ROOT c = pred[] compare(i, n), direction={direction}
}}

ENTRY main {{
  x = f32[3] parameter(0)
  start = s32[] constant({start})
  init = (s32[], f32[3]) tuple(start, x)
  ROOT w = (s32[], f32[3]) while(init), condition=cond, body=body
}}
"""


@pytest.mark.parametrize("start, limit, direction, step, trips", [
    (0, 1, "LT", 1, 1), (0, 0, "LT", 1, 0), (5, 3, "LT", 1, 0), (0, 0, "LE", 1, 1), (0, 10, "LT", 3, 4),
    (2, 9, "LE", 4, 2),
])
def test_trip_counts(start, limit, direction, step, trips):
    module = parse_module(_loop(start, limit, direction, step))
    assert trip_count(module.entry.root) == trips


def test_a_loop_that_never_runs_is_its_initial_value():
    module = parse_module(_loop(0, 0))
    assert WhileLoopSimplifier().run(module)
    verify(module)
    assert module.entry.root.name == "init"


def test_a_loop_of_one_trip_is_its_body_inlined():
    module = assert_pass_preserves_values(WhileLoopSimplifier(), _loop(0, 1))
    assert [i.opcode for i in module.entry.post_order()] == [
        "constant", "parameter", "tuple", "get-tuple-element", "constant", "add", "get-tuple-element",
        "exponential", "tuple"]
    assert not any(i.opcode == "while" for i in module.entry.instructions)


def test_longer_loops_and_loops_with_side_effects_stay():
    assert not WhileLoopSimplifier().run(parse_module(_loop(0, 2)))
    effect = ('\n  e = () custom-call(), custom_call_target="log", custom_call_has_side_effect=true')
    assert not WhileLoopSimplifier().run(parse_module(_loop(0, 1, body_extra=effect)))


def test_an_induction_variable_the_condition_does_not_bound_gives_no_trip_count():
    text = _loop(0, 1).replace("ROOT c = pred[] compare(i, n), direction=LT",
                               "ROOT c = pred[] compare(n, n), direction=LT")
    module = parse_module(text)
    assert trip_count(module.entry.root) is None
    assert not WhileLoopSimplifier().run(module)


def test_an_expanded_scatter_of_one_index_loses_its_loop():
    text = """
HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  operand = f32[5,3] parameter(0)
  indices = s32[1] parameter(1)
  updates = f32[1,3] parameter(2)
  ROOT s = f32[5,3] scatter(operand, indices, updates), to_apply=add, update_window_dims={1},
    inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1
}
"""
    module = parse_module(text)
    ScatterExpander().run(module)
    module = assert_pass_preserves_values(WhileLoopSimplifier(), module, seeds=(0, 1, 2))
    assert {i.opcode for i in module.entry.instructions} >= {"dynamic-slice", "dynamic-update-slice"}
    assert not any(i.opcode == "while" for i in module.entry.instructions)


def test_jax_fori_loops():
    jax = pytest.importorskip("jax")
    from xlapy.frontends.jax import from_jax

    def loops(x):
        once = jax.lax.fori_loop(0, 1, lambda i, v: v * 2 + i, x)
        never = jax.lax.fori_loop(3, 3, lambda i, v: v - 1, x)
        return once, never, jax.lax.fori_loop(0, 3, lambda i, v: v + i, x)

    module = from_jax(loops, np.arange(4, dtype=np.float32))
    assert len([i for i in module.instructions if i.opcode == "while"]) == 2  # jax drops the empty one itself
    rewritten = assert_pass_preserves_values(WhileLoopSimplifier(), module, seeds=(0, 1))
    assert len([i for i in rewritten.instructions if i.opcode == "while"]) == 1


# -- state elements the loop need not carry (cases after XLA's while_loop_simplifier_test.cc) ------------------

def _state_shapes(module) -> list[str]:
    return [re.sub(r"\{[0-9,]*\}", "", str(i.shape)) for i in module.entry.instructions if i.opcode == "while"]


def _simplified(text: str):
    """The module after the simplifier, then DCE and the tuple simplifier (as XLA's tests run them), checked
    against the interpreter."""
    from xlapy.transforms.dce import HloDCE
    from xlapy.transforms.tuple_simplifier import TupleSimplifier

    class Simplify:
        def run(self, module):
            changed = WhileLoopSimplifier().run(module)
            TupleSimplifier().run(module)
            HloDCE().run(module)
            return changed

    return assert_pass_preserves_values(Simplify(), text)


def test_an_unused_element_passed_through_is_dropped_even_when_the_loop_is_the_result():
    # After XLA's RemoveUnusedLoopOperands: element 0 only passes through, 1 counts, 2 bounds the count.
    module = _simplified("""
HloModule m
body {
  loop_var = (s32[], s32[], s32[]) parameter(0)
  g1 = s32[] get-tuple-element(loop_var), index=0
  g2 = s32[] get-tuple-element(loop_var), index=1
  one = s32[] constant(1)
  add = s32[] add(g2, one)
  g3 = s32[] get-tuple-element(loop_var), index=2
  ROOT tuple = (s32[], s32[], s32[]) tuple(g1, add, g3)
}
cond {
  param0 = (s32[], s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(param0), index=1
  n = s32[] get-tuple-element(param0), index=2
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = s32[] parameter(0)
  zero = s32[] constant(0)
  ten = s32[] constant(10)
  y = s32[] parameter(1)
  init = (s32[], s32[], s32[]) tuple(x, zero, ten)
  w = (s32[], s32[], s32[]) while(init), condition=cond, body=body
  g = s32[] get-tuple-element(w), index=1
  ROOT r = (s32[], s32[], s32[]) tuple(x, g, y)
}
""".replace("tuple(x, g, y)", "tuple(x, g, x)"))
    assert _state_shapes(module) == ["(s32[], s32[])"]
    loop = next(i for i in module.entry.instructions if i.opcode == "while")
    body = loop.called_computations[0]
    assert [o.opcode for o in body.root.operands] == ["add", "get-tuple-element"]


def test_an_element_the_body_changes_is_dropped_only_when_nothing_reads_it_after_the_loop():
    # XLA's LoopWithUnusedOutsideLoopButModifiedTupleElementSimplified, and the same loop read whole.
    text = """
HloModule m
body {
  loop_var = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(loop_var), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  d = s32[] get-tuple-element(loop_var), index=1
  dd = s32[] multiply(d, d)
  ROOT tuple = (s32[], s32[]) tuple(next, dd)
}
cond {
  param = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(param), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}
ENTRY e {
  zero = s32[] constant(0)
  x = s32[] parameter(0)
  init = (s32[], s32[]) tuple(zero, x)
  w = (s32[], s32[]) while(init), condition=cond, body=body
  ROOT gte = s32[] get-tuple-element(w), index=0
}
"""
    assert _state_shapes(_simplified(text)) == ["(s32[])"]
    whole = text.replace("  ROOT gte = s32[] get-tuple-element(w), index=0\n", "").replace(
        "  w = (s32[], s32[]) while", "  ROOT w = (s32[], s32[]) while")
    assert not WhileLoopSimplifier().run(parse_module(whole))


def test_an_element_set_to_its_initial_constant_is_not_carried():
    # XLA's RemoveConstantFromLoopCarry: b is {1,1} before and in the loop; c changes from {2,2,2} to {10,..}.
    module = _simplified("""
HloModule m
body {
  param = (s32[1], s32[2], s32[3], s32[]) parameter(0)
  a = s32[1] get-tuple-element(param), index=0
  a1 = s32[1] add(a, a)
  b = s32[2] constant({1, 1})
  c = s32[3] constant({10, 10, 10})
  i = s32[] get-tuple-element(param), index=3
  one = s32[] constant(1)
  next = s32[] add(i, one)
  ROOT tuple = (s32[1], s32[2], s32[3], s32[]) tuple(a1, b, c, next)
}
cond {
  param = (s32[1], s32[2], s32[3], s32[]) parameter(0)
  b = s32[2] get-tuple-element(param), index=1
  c = s32[3] get-tuple-element(param), index=2
  i = s32[] get-tuple-element(param), index=3
  b0 = s32[1] slice(b), slice={[0:1]}
  c0 = s32[1] slice(c), slice={[0:1]}
  s = s32[1] add(b0, c0)
  s0 = s32[] reshape(s)
  limit = s32[] add(s0, i)
  five = s32[] constant(5)
  ROOT lt = pred[] compare(limit, five), direction=LT
}
ENTRY e {
  a = s32[1] parameter(0)
  b = s32[2] constant({1, 1})
  c = s32[3] constant({2, 2, 2})
  zero = s32[] constant(0)
  init = (s32[1], s32[2], s32[3], s32[]) tuple(a, b, c, zero)
  ROOT w = (s32[1], s32[2], s32[3], s32[]) while(init), condition=cond, body=body
}
""")
    assert _state_shapes(module) == ["(s32[1], s32[3], s32[])"]
    assert [o.opcode for o in module.entry.root.operands][1] == "constant"


def test_elements_passing_one_value_through_are_carried_once():
    module = _simplified("""
HloModule m
body {
  p = (s32[], f32[4], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  u = f32[4] get-tuple-element(p), index=1
  v = f32[4] get-tuple-element(p), index=2
  acc = f32[4] get-tuple-element(p), index=3
  uv = f32[4] multiply(u, v)
  sum = f32[4] add(acc, uv)
  ROOT t = (s32[], f32[4], f32[4], f32[4]) tuple(next, u, v, sum)
}
cond {
  p = (s32[], f32[4], f32[4], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
ENTRY e {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  zero = s32[] constant(0)
  init = (s32[], f32[4], f32[4], f32[4]) tuple(zero, x, x, y)
  w = (s32[], f32[4], f32[4], f32[4]) while(init), condition=cond, body=body
  a = f32[4] get-tuple-element(w), index=1
  b = f32[4] get-tuple-element(w), index=2
  s = f32[4] get-tuple-element(w), index=3
  ab = f32[4] subtract(a, b)
  ROOT r = f32[4] add(ab, s)
}
""")
    assert _state_shapes(module) == ["(s32[], f32[4], f32[4])"]


def test_what_the_loop_reads_or_must_keep_stays():
    # XLA's LoopWithElemUsedTwiceNotSimplified, LoopSwappingTupleElementsNotSimplified and
    # LoopWithUnusedButModifiedTupleElementNotSimplified: the loop is the result and every element changes.
    for body_root in ("tuple(g0, g0)", "tuple(g1, g0)"):
        assert not WhileLoopSimplifier().run(parse_module(f"""
HloModule m
body {{ p = (s32[], s32[]) parameter(0)  g0 = s32[] get-tuple-element(p), index=0
        g1 = s32[] get-tuple-element(p), index=1  ROOT t = (s32[], s32[]) {body_root} }}
cond {{ p = (s32[], s32[]) parameter(0)  ROOT c = pred[] constant(true) }}
ENTRY e {{ x = s32[] parameter(0)  y = s32[] parameter(1)  init = (s32[], s32[]) tuple(x, y)
          ROOT w = (s32[], s32[]) while(init), condition=cond, body=body }}
"""))
    # A value the unread element feeds into a side effect keeps it.
    effect = """
HloModule m
body { p = (s32[], f32[2]) parameter(0)  i = s32[] get-tuple-element(p), index=0  one = s32[] constant(1)
       next = s32[] add(i, one)  v = f32[2] get-tuple-element(p), index=1
       o = () custom-call(v), custom_call_target="log", custom_call_has_side_effect=true
       ROOT t = (s32[], f32[2]) tuple(next, v) }
cond { p = (s32[], f32[2]) parameter(0)  i = s32[] get-tuple-element(p), index=0  n = s32[] constant(3)
       ROOT lt = pred[] compare(i, n), direction=LT }
ENTRY e { z = s32[] constant(0)  x = f32[2] parameter(0)  init = (s32[], f32[2]) tuple(z, x)
          w = (s32[], f32[2]) while(init), condition=cond, body=body
          ROOT i = s32[] get-tuple-element(w), index=0 }
"""
    assert not WhileLoopSimplifier().run(parse_module(effect))


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(while_loop_texts())
def test_random_loops_keep_their_values(text: str) -> None:
    assert_pass_preserves_values(WhileLoopSimplifier(), text)
