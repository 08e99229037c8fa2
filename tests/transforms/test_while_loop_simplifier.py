"""While loops of zero or one trips removed, as XLA's ``WhileLoopSimplifier``
does (``xla/service/while_loop_simplifier.cc``; cases after its
``while_loop_simplifier_test.cc``), values kept against the interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from tools.random_hlo import assert_pass_preserves_values
from xlapy.hlo import parse_module
from xlapy.hlo.verifier import verify
from xlapy.transforms.scatter_expander import ScatterExpander
from xlapy.transforms.while_loop_simplifier import WhileLoopSimplifier, trip_count


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
