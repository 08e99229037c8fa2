"""ZeroSizedHloElimination against the behaviour of XLA's
(``xla/hlo/transforms/simplifiers/zero_sized_hlo_elimination.cc`` and its
tests), and against the interpreter on random and corpus programs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tests.corpus_cases import corpus_params, verifying_corpus
from tools.hlo_corpus import interpreter_runs
from tools.random_hlo import assert_pass_preserves_values, hlo_texts
from xlapy.hlo import parse_module, verify
from xlapy.transforms.zero_sized_hlo_elimination import ZeroSizedHloElimination


def run(text: str) -> tuple[bool, str]:
    module = parse_module(text)
    changed = ZeroSizedHloElimination().run(module)
    verify(module)
    return changed, module.to_text()


def test_zero_element_op_becomes_an_empty_constant(tmp_path):
    changed, out = run("""HloModule m
ENTRY e {
  p = f32[3,0] parameter(0)
  ROOT n = f32[3,0] negate(p), sharding={replicated}
}""")
    assert changed
    filecheck(out, """
CHECK: %p = f32[3,0]{1,0} parameter(0)
CHECK-NEXT: ROOT %constant{{[.0-9]*}} = f32[3,0]{1,0} constant({ {}, {}, {} }), sharding={replicated}
CHECK-NEXT: }
""", tmp_path)


def test_parameter_uses_become_a_constant_and_chains_collapse(tmp_path):
    changed, out = run("""HloModule m
ENTRY e {
  p = f32[0] parameter(0)
  q = f32[2] parameter(1)
  n = f32[0] negate(p)
  x = f32[0] exponential(n)
  ROOT t = (f32[0], f32[2]) tuple(x, q)
}""")
    assert changed
    filecheck(out, """
CHECK: ENTRY
CHECK-DAG: %p = f32[0]{0} parameter(0)
CHECK-DAG: %q = f32[2]{0} parameter(1)
CHECK-DAG: %[[C:constant[.0-9]*]] = f32[0]{0} constant({})
CHECK: ROOT %t = (f32[0]{0}, f32[2]{0}) tuple(%[[C]], %q)
""", tmp_path)
    assert out.count("constant(") == 1 and "negate" not in out and "exponential" not in out


def test_nonzero_tuples_constants_and_dead_parameters_stay():
    changed, _ = run("""HloModule m
ENTRY e {
  p = f32[0] parameter(0)
  c = f32[0] constant({})
  q = f32[2] parameter(1)
  ROOT t = (f32[0], f32[2]) tuple(c, q)
}""")
    assert not changed


def test_side_effects_and_control_dependencies_stay():
    changed, out = run("""HloModule m
ENTRY e {
  p = f32[0] parameter(0)
  s = f32[0] custom-call(p), custom_call_target="foo", custom_call_has_side_effect=true
  n = f32[0] negate(p), control-predecessors={s}
  ROOT t = (f32[0], f32[0]) tuple(s, n)
}""")
    # The parameter's uses move to a constant; the two others stay.
    assert changed
    assert "custom-call(%constant" in out and "negate(%constant" in out


def test_fused_computations_are_left_alone():
    changed, out = run("""HloModule m
fused {
  a = f32[0] parameter(0)
  ROOT n = f32[0] negate(a)
}
ENTRY e {
  p = f32[0] parameter(0)
  ROOT f = f32[0] fusion(p), kind=kLoop, calls=fused
}""")
    assert changed
    assert "ROOT %n = f32[0]{0} negate(%a)" in out
    assert "fusion" not in out.split("ENTRY")[1]


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts(zero_sized=True))
def test_preserves_values_of_random_programs(text):
    assert_pass_preserves_values(ZeroSizedHloElimination(), text)


@pytest.mark.parametrize("name, text", corpus_params(verifying_corpus()))
def test_preserves_values_of_the_corpus(name, text):
    module = parse_module(text)
    if interpreter_runs(module):
        assert_pass_preserves_values(ZeroSizedHloElimination(), text, seeds=(0,))
    else:
        ZeroSizedHloElimination().run(module)
        verify(module)
