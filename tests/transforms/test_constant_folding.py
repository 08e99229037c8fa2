"""HloConstantFolding against the behaviour of XLA's
(``xla/hlo/transforms/simplifiers/hlo_constant_folding.cc`` and its tests),
and against the interpreter on random and corpus programs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tests.corpus_cases import corpus_params, verifying_corpus
from tools.hlo_corpus import interpreter_runs
from tools.random_hlo import assert_pass_preserves_values, hlo_texts
from xlapy.hlo import parse_module, verify
from xlapy.transforms.hlo_constant_folding import HloConstantFolding


def run(text: str) -> tuple[bool, str]:
    module = parse_module(text)
    changed = HloConstantFolding().run(module)
    verify(module)
    return changed, module.to_text()


def test_convert_of_a_constant_folds(tmp_path):
    changed, out = run("""HloModule m
ENTRY e {
  c = s64[] constant(42)
  ROOT cv = f32[] convert(c)
}""")
    assert changed
    filecheck(out, """
CHECK: ENTRY %e
CHECK-NEXT: ROOT %constant = f32[] constant(42)
CHECK-NEXT: }
""", tmp_path)


def test_chains_fold_to_one_constant_and_dead_operands_go(tmp_path):
    changed, out = run("""HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  c = f32[2] constant({1.5, -2})
  n = f32[2] negate(c)
  e = f32[2] multiply(n, n)
  ROOT a = f32[2] add(p, e)
}""")
    assert changed
    filecheck(out, """
CHECK: ENTRY %e
CHECK-NEXT: %p = f32[2]{0} parameter(0)
CHECK-NEXT: %[[C:constant[.0-9]*]] = f32[2]{0} constant({2.25, 4})
CHECK-NEXT: ROOT %a = f32[2]{0} add(%p, %[[C]])
CHECK-NEXT: }
""", tmp_path)


def test_operand_may_be_a_broadcast_of_a_constant_or_an_iota(tmp_path):
    changed, out = run("""HloModule m
ENTRY e {
  c = s32[3] constant({10, 20, 30})
  one = s32[] constant(1)
  b = s32[3] broadcast(one), dimensions={}
  i = s32[3] iota(), iota_dimension=0
  s = s32[3] subtract(c, b)
  ROOT t = s32[3] add(s, i)
}""")
    assert changed
    filecheck(out, """
CHECK: ENTRY %e
CHECK-NEXT: ROOT %[[C:constant[.0-9]*]] = s32[3]{0} constant({9, 20, 31})
CHECK-NEXT: }
""", tmp_path)


def test_operands_all_broadcasts_or_iotas_do_not_fold(tmp_path):
    # XLA leaves op(broadcast(c)) to the simplifier, which sinks the broadcast.
    text = """HloModule m
ENTRY e {
  one = f32[] constant(1)
  b = f32[3] broadcast(one), dimensions={}
  i = f32[3] iota(), iota_dimension=0
  ROOT a = f32[3] add(b, i)
}"""
    changed, out = run(text)
    assert not changed
    assert out == parse_module(text).to_text()


def test_broadcast_iota_and_parameters_are_not_folded():
    text = """HloModule m
ENTRY e {
  p = f32[3] parameter(0)
  one = f32[] constant(1)
  b = f32[3] broadcast(one), dimensions={}
  i = s32[3] iota(), iota_dimension=0
  a = f32[3] add(p, b)
  ROOT t = (f32[3], s32[3]) tuple(a, i)
}"""
    changed, out = run(text)
    assert not changed
    assert out == parse_module(text).to_text()


def test_reduce_with_a_constant_input_folds(tmp_path):
    changed, out = run("""HloModule m
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  c = f32[2,3] constant({{1, 2, 3}, {4, 5, 6}})
  z = f32[] constant(0)
  ROOT r = f32[2] reduce(c, z), dimensions={1}, to_apply=sum
}""")
    assert changed
    filecheck(out, """
CHECK: ENTRY %e
CHECK-NEXT: ROOT %constant{{[.0-9]*}} = f32[2]{0} constant({6, 15})
CHECK-NEXT: }
""", tmp_path)


def test_call_of_constants_folds_unless_its_computation_holds_a_broadcast(tmp_path):
    # XLA folds through called computations only when each of their
    # instructions would fold (broadcasts would not).
    changed, out = run("""HloModule m
twice {
  a = f32[2] parameter(0)
  ROOT s = f32[2] add(a, a)
}
spread {
  x = f32[] parameter(0)
  ROOT b = f32[2] broadcast(x), dimensions={}
}
ENTRY e {
  c = f32[2] constant({1, 2})
  k = f32[] constant(3)
  t = f32[2] call(c), to_apply=twice
  u = f32[2] call(k), to_apply=spread
  ROOT r = (f32[2], f32[2]) tuple(t, u)
}""")
    assert changed
    filecheck(out, """
CHECK: ENTRY %e
CHECK: %[[C:constant[.0-9]*]] = f32[2]{0} constant({2, 4})
CHECK: %u = f32[2]{0} call(%k), to_apply=%spread
CHECK: ROOT %r = (f32[2]{0}, f32[2]{0}) tuple(%[[C]], %u)
""", tmp_path)


@pytest.mark.parametrize("instruction", [
    "f32[2] rng(lo, hi), distribution=rng_uniform",
    'f32[2] custom-call(c), custom_call_target="foo", custom_call_has_side_effect=true',
    "f32[2] all-reduce(c), replica_groups={}, to_apply=sum",
    "c64[2] fft(cc), fft_type=FFT, fft_length={2}",
])
def test_rng_side_effects_collectives_and_fft_do_not_fold(instruction):
    shape = instruction.split(" ")[0]
    text = f"""HloModule m
sum {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}
ENTRY e {{
  c = f32[2] constant({{1, 2}})
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  cc = c64[2] constant({{(1, 0), (2, 0)}})
  r = {instruction}
  ROOT t = (f32[2], f32[], f32[], c64[2], {shape}) tuple(c, lo, hi, cc, r)
}}"""
    changed, out = run(text)
    assert not changed
    assert out == parse_module(text).to_text()


def test_instruction_with_control_dependencies_does_not_fold():
    text = """HloModule m
ENTRY e {
  p = f32[] parameter(0)
  c = f32[] constant(1)
  n = f32[] negate(c), control-predecessors={p}
  ROOT a = f32[] add(p, n)
}"""
    changed, out = run(text)
    assert not changed
    assert out == parse_module(text).to_text()


def test_pad_of_a_broadcast_does_not_fold():
    text = """HloModule m
ENTRY e {
  c = f32[] constant(1)
  b = f32[2] broadcast(c), dimensions={}
  z = f32[] constant(0)
  ROOT p = f32[4] pad(b, z), padding=1_1
}"""
    changed, out = run(text)
    assert not changed
    assert out == parse_module(text).to_text()


def test_dead_instructions_are_not_folded():
    text = """HloModule m
ENTRY e {
  p = f32[] parameter(0)
  c = f32[] constant(1)
  n = f32[] negate(c)
  ROOT a = f32[] add(p, p)
}"""
    changed, out = run(text)
    assert not changed
    assert out == parse_module(text).to_text()


def test_tuple_results_fold_into_a_tuple_constant(tmp_path):
    changed, out = run("""HloModule m
swap {
  a = (f32[], s32[]) parameter(0)
  x = f32[] get-tuple-element(a), index=0
  y = s32[] get-tuple-element(a), index=1
  ROOT g = (s32[], f32[]) tuple(y, x)
}
ENTRY e {
  c = f32[] constant(2)
  d = s32[] constant(3)
  t = (f32[], s32[]) tuple(c, d)
  ROOT r = (s32[], f32[]) call(t), to_apply=swap
}""")
    assert changed
    filecheck(out, """
CHECK: ENTRY %e
CHECK-NEXT: ROOT %constant{{[.0-9]*}} = (s32[], f32[]) constant(( 3, 2 ))
CHECK-NEXT: }
""", tmp_path)


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts())
def test_preserves_values_of_random_programs(text: str) -> None:
    assert_pass_preserves_values(HloConstantFolding(), text)


@pytest.mark.parametrize("name, text", corpus_params(verifying_corpus()))
def test_preserves_values_of_the_corpus(name, text):
    module = parse_module(text)
    if interpreter_runs(module):
        assert_pass_preserves_values(HloConstantFolding(), text, seeds=(0,))
    else:
        HloConstantFolding().run(module)
        verify(module)
