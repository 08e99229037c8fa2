"""Conditionals made to return tuples (XLA's ``ConditionalCanonicalizer``,
``xla/hlo/transforms/simplifiers/conditional_canonicalizer.cc``): the case of
XLA's ``conditional_canonicalizer_test.cc``, and values kept against the
interpreter on random conditionals."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tools.random_control_flow import conditional_texts
from tools.random_hlo import assert_pass_preserves_values
from xlapy.hlo import parse_module, verify
from xlapy.transforms.conditional_canonicalizer import ConditionalCanonicalizer

ARRAY_RESULT = """
HloModule m

on_true {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}

on_false {
  p = f32[4] parameter(0)
  ROOT e = f32[4] exponential(p)
}

ENTRY main {
  a = f32[4] parameter(0)
  sel = pred[] parameter(1)
  ROOT c = f32[4] conditional(sel, a, a), true_computation=on_true, false_computation=on_false
}
"""


def test_an_array_result_becomes_the_element_of_a_tuple(tmp_path: Path) -> None:
    module = parse_module(ARRAY_RESULT)
    assert ConditionalCanonicalizer().run(module)
    verify(module)
    filecheck(module.to_text(), """
CHECK: %on_true.clone ({{.*}}: f32[4]) -> (f32[4]) {
CHECK: %[[N:.*]] = f32[4]{0} negate(
CHECK: ROOT {{.*}} = (f32[4]{0}) tuple(%[[N]])
CHECK: %on_false.clone ({{.*}}: f32[4]) -> (f32[4]) {
CHECK: %[[E:.*]] = f32[4]{0} exponential(
CHECK: ROOT {{.*}} = (f32[4]{0}) tuple(%[[E]])
CHECK: ENTRY
CHECK: %[[C:.*]] = (f32[4]{0}) conditional(%sel, %a, %a), true_computation=%on_true.clone, false_computation=%on_false.c
CHECK: ROOT {{.*}} = f32[4]{0} get-tuple-element(%[[C]]), index=0
""", tmp_path)
    assert [c.name for c in module.computations].count("on_true") == 0  # called no more, removed
    assert_pass_preserves_values(ConditionalCanonicalizer(), ARRAY_RESULT)


def test_tuple_results_and_branches_other_instructions_call_are_kept() -> None:
    tuple_result = ARRAY_RESULT.replace("ROOT n = f32[4] negate(p)",
                                        "n = f32[4] negate(p)\n  ROOT t = (f32[4]) tuple(n)")
    tuple_result = tuple_result.replace("ROOT e = f32[4] exponential(p)",
                                        "e = f32[4] exponential(p)\n  ROOT t = (f32[4]) tuple(e)")
    tuple_result = tuple_result.replace("ROOT c = f32[4] conditional", "ROOT c = (f32[4]) conditional")
    assert not ConditionalCanonicalizer().run(parse_module(tuple_result))
    shared = ARRAY_RESULT.replace("ROOT c = f32[4] conditional(sel, a, a), true_computation=on_true, "
                                  "false_computation=on_false",
                                  "c = f32[4] conditional(sel, a, a), true_computation=on_true, "
                                  "false_computation=on_false\n  d = f32[4] call(c), to_apply=on_true\n"
                                  "  ROOT r = (f32[4], f32[4]) tuple(c, d)")
    module = assert_pass_preserves_values(ConditionalCanonicalizer(), shared)
    call = next(i for i in module.entry.instructions if i.opcode == "call")
    assert call.called_computations[0].name == "on_true" and str(call.called_computations[0].root.shape) == "f32[4]{0}"


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(conditional_texts())
def test_random_conditionals_keep_their_values(text: str) -> None:
    module = assert_pass_preserves_values(ConditionalCanonicalizer(), text)
    assert all(i.shape.is_tuple for i in module.instructions if i.opcode == "conditional")
