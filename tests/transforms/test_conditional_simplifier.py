"""Conditional simplification (XLA's ``ConditionalSimplifier``,
``xla/service/conditional_simplifier.cc``): cases after XLA's
``conditional_simplifier_test.cc``, and values kept against the interpreter on
random conditionals, alone and through the CPU pipeline."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tools.random_control_flow import conditional_texts
from tools.random_hlo import assert_pass_preserves_values
from xlapy.hlo import parse_module, verify
from xlapy.transforms.conditional_simplifier import ConditionalSimplifier
from xlapy.transforms.cpu_pipeline import cpu_hlo_pipeline
from xlapy.transforms.dce import HloDCE


def _module(selector: str, true_body: str = "  ROOT n = f32[4] negate(x)",
            false_body: str = "  ROOT e = f32[4] exponential(x)") -> str:
    return f"""
HloModule m

on_true {{
  p = (f32[4], f32[4]) parameter(0)
  x = f32[4] get-tuple-element(p), index=0
  y = f32[4] get-tuple-element(p), index=1
{true_body}
}}

on_false {{
  p = (f32[4], f32[4]) parameter(0)
  x = f32[4] get-tuple-element(p), index=0
{false_body}
}}

ENTRY main {{
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  {selector}
  t = (f32[4], f32[4]) tuple(a, b)
  ROOT c = f32[4] conditional(sel, t, t), true_computation=on_true, false_computation=on_false
}}
"""


def _simplify(text: str) -> tuple[bool, str]:
    module = parse_module(text)
    changed = ConditionalSimplifier().run(module)
    verify(module)
    HloDCE().run(module)
    return changed, module.to_text()


@pytest.mark.parametrize("selector, kept, dropped", [
    ("sel = pred[] constant(true)", "negate", "exponential"),
    ("sel = pred[] constant(false)", "exponential", "negate"),
])
def test_a_constant_predicate_inlines_its_branch(selector: str, kept: str, dropped: str, tmp_path: Path) -> None:
    text = _module(selector)
    changed, out = _simplify(text)
    assert changed
    filecheck(out, f"""
CHECK-NOT: conditional
CHECK-NOT: {dropped}
CHECK: ENTRY
CHECK: %[[T:t]] = (f32[4]{{0}}, f32[4]{{0}}) tuple(%a, %b)
CHECK: %[[X:.*]] = f32[4]{{0}} get-tuple-element(%[[T]]), index=0
CHECK: ROOT %{{{{.*}}}} = f32[4]{{0}} {kept}(%[[X]])
""", tmp_path)
    assert_pass_preserves_values(ConditionalSimplifier(), text)


@pytest.mark.parametrize("index, branch", [(0, "negate"), (1, "exponential"), (2, "abs"), (7, "abs"), (-1, "abs")])
def test_a_constant_index_inlines_its_branch_and_out_of_range_the_last(index: int, branch: str) -> None:
    text = f"""
HloModule m

b0 {{
  p = f32[4] parameter(0)
  ROOT r = f32[4] negate(p)
}}

b1 {{
  p = f32[4] parameter(0)
  ROOT r = f32[4] exponential(p)
}}

b2 {{
  p = f32[4] parameter(0)
  ROOT r = f32[4] abs(p)
}}

ENTRY main {{
  a = f32[4] parameter(0)
  i = s32[] constant({index})
  ROOT c = f32[4] conditional(i, a, a, a), branch_computations={{b0, b1, b2}}
}}
"""
    changed, out = _simplify(text)
    assert changed
    assert parse_module(out).entry.root.opcode == branch
    assert_pass_preserves_values(ConditionalSimplifier(), text)


def test_one_branch_is_always_inlined() -> None:
    text = """
HloModule m

only {
  p = f32[4] parameter(0)
  ROOT r = f32[4] sine(p)
}

ENTRY main {
  a = f32[4] parameter(0)
  i = s32[] parameter(1)
  ROOT c = f32[4] conditional(i, a), branch_computations={only}
}
"""
    changed, out = _simplify(text)
    assert changed and parse_module(out).entry.root.opcode == "sine"
    assert_pass_preserves_values(ConditionalSimplifier(), text)


def test_cheap_branches_run_both_and_select(tmp_path: Path) -> None:
    text = _module("sel = pred[] parameter(2)")
    changed, out = _simplify(text)
    assert changed
    filecheck(out, """
CHECK-NOT: conditional
CHECK: ENTRY
CHECK-DAG: %[[P:sel]] = pred[] parameter(2)
CHECK-DAG: %[[MASK:.*]] = pred[4]{0} broadcast(%[[P]]), dimensions={}
CHECK-DAG: %[[N:.*]] = f32[4]{0} negate(
CHECK-DAG: %[[E:.*]] = f32[4]{0} exponential(
CHECK: ROOT {{.*}} = f32[4]{0} select(%[[MASK]], %[[N]], %[[E]])
""", tmp_path)
    assert_pass_preserves_values(ConditionalSimplifier(), text, seeds=(0, 1, 2, 3))


def test_expensive_branches_pass_through_branches_and_side_effects_keep_the_conditional() -> None:
    expensive = _module("sel = pred[] parameter(2)", true_body="  ROOT n = f32[4] reverse(x), dimensions={0}")
    assert parse_module(_simplify(expensive)[1]).entry.root.opcode == "conditional"
    passing = _module("sel = pred[] parameter(2)", true_body="  ROOT n = f32[4] get-tuple-element(p), index=1")
    assert parse_module(_simplify(passing)[1]).entry.root.opcode == "conditional"
    effect = _module("sel = pred[] constant(true)", true_body=(
        '  e = () custom-call(), custom_call_target="log", custom_call_has_side_effect=true\n'
        "  ROOT n = f32[4] negate(x)"))
    assert parse_module(_simplify(effect)[1]).entry.root.opcode == "conditional"
    channel = _module("sel = pred[] constant(true)", false_body=(
        "  ROOT e = f32[4] all-reduce(x), channel_id=1, replica_groups={}, to_apply=sum")).replace(
        "ENTRY main", "sum {\n  l = f32[] parameter(0)\n  r = f32[] parameter(1)\n  ROOT s = f32[] add(l, r)\n}\n\n"
        "ENTRY main")
    assert not any(i.opcode == "call" for i in parse_module(_simplify(channel)[1]).entry.instructions)
    assert parse_module(_simplify(channel)[1]).entry.root.opcode == "conditional"


TUPLE_RESULT = """
HloModule m

on_true {
  p = (f32[4], f32[4], f32[4]) parameter(0)
  x = f32[4] get-tuple-element(p), index=0
  y = f32[4] get-tuple-element(p), index=1
  s = f32[4] add(x, y)
  r = f32[4] reverse(s), dimensions={0}
  ROOT t = (f32[4], f32[4], f32[4]) tuple(r, x, r)
}

on_false {
  p = (f32[4], f32[4], f32[4]) parameter(0)
  x = f32[4] get-tuple-element(p), index=0
  m = f32[4] multiply(x, x)
  r = f32[4] reverse(m), dimensions={0}
  ROOT t = (f32[4], f32[4], f32[4]) tuple(r, m, r)
}

ENTRY main {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  c = f32[4] parameter(2)
  sel = pred[] parameter(3)
  o = (f32[4], f32[4], f32[4]) tuple(a, b, c)
  k = (f32[4], f32[4], f32[4]) conditional(sel, o, o), true_computation=on_true, false_computation=on_false
  g0 = f32[4] get-tuple-element(k), index=0
  g2 = f32[4] get-tuple-element(k), index=2
  ROOT out = (f32[4], f32[4]) tuple(g0, g2)
}
"""


def test_duplicate_and_unread_results_and_unread_operands_go(tmp_path: Path) -> None:
    changed, out = _simplify(TUPLE_RESULT)
    assert changed
    filecheck(out, """
CHECK: %on_true.clone{{.*}} (p{{.*}}: (f32[4], f32[4])) -> (f32[4]) {
CHECK: ROOT {{.*}} = (f32[4]{0}) tuple(
CHECK: %on_false.clone{{.*}} (p{{.*}}: (f32[4])) -> (f32[4]) {
CHECK: ROOT {{.*}} = (f32[4]{0}) tuple(
CHECK: ENTRY
CHECK-DAG: %[[OPS:o]] = (f32[4]{0}, f32[4]{0}, f32[4]{0}) tuple(%a, %b, %c)
CHECK-DAG: %[[T0:.*]] = f32[4]{0} get-tuple-element(%[[OPS]]), index=0
CHECK-DAG: %[[T1:.*]] = f32[4]{0} get-tuple-element(%[[OPS]]), index=1
CHECK-DAG: %[[TRUE:.*]] = (f32[4]{0}, f32[4]{0}) tuple(%[[T0]], %[[T1]])
CHECK-DAG: %[[FALSE:.*]] = (f32[4]{0}) tuple(%{{.*}})
CHECK: %[[K:k]] = (f32[4]{0}) conditional(%sel, %[[TRUE]], %[[FALSE]])
CHECK: %g0 = f32[4]{0} get-tuple-element(%[[K]]), index=0
CHECK: %g2 = f32[4]{0} get-tuple-element(%[[K]]), index=0
""", tmp_path)
    assert_pass_preserves_values(ConditionalSimplifier(), TUPLE_RESULT, seeds=(0, 1, 2, 3))


def test_an_unused_conditional_returns_an_empty_tuple() -> None:
    text = TUPLE_RESULT.replace(
        "k = (f32[4], f32[4], f32[4]) conditional(sel, o, o), true_computation=on_true, false_computation=on_false",
        "k = (f32[4], f32[4], f32[4]) conditional(sel, o, o), true_computation=on_true, false_computation=on_false\n"
        "  d = (f32[4], f32[4], f32[4]) conditional(sel, o, o), true_computation=on_true, "
        "false_computation=on_false, control-predecessors={k}")
    module = parse_module(text)
    assert ConditionalSimplifier().run(module)
    verify(module)
    dead = next(i for i in module.entry.instructions if i.name == "d")
    assert str(dead.shape) == "()" and all(str(b.root.shape) == "()" for b in dead.called_computations)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(conditional_texts())
def test_random_conditionals_keep_their_values(text: str) -> None:
    assert_pass_preserves_values(ConditionalSimplifier(), text, seeds=(0, 1, 2))


@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(conditional_texts())
def test_the_cpu_pipeline_keeps_random_conditionals_values(text: str) -> None:
    assert_pass_preserves_values(cpu_hlo_pipeline(), text, seeds=(0, 1))
