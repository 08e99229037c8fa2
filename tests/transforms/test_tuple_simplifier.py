"""TupleSimplifier against the behaviour of XLA's
(``xla/hlo/transforms/simplifiers/tuple_simplifier.cc`` and its tests),
and against the interpreter on random and corpus programs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tests.corpus_cases import corpus_params, verifying_corpus
from tools.hlo_corpus import interpreter_runs
from tools.random_hlo import assert_pass_preserves_values, hlo_texts
from xlapy.frontends.stablehlo import parse_module as parse_stablehlo
from xlapy.hlo import parse_module, verify
from xlapy.transforms.tuple_simplifier import TupleSimplifier


def run(text: str, **options: bool) -> tuple[bool, str]:
    module = parse_module(text)
    changed = TupleSimplifier(**options).run(module)
    verify(module)
    return changed, module.to_text()


def test_element_of_a_tuple_is_the_operand(tmp_path):
    changed, out = run("""HloModule m
ENTRY e {
  p0 = f32[2] parameter(0)
  p1 = s32[3] parameter(1)
  t = (f32[2], s32[3]) tuple(p0, p1)
  ROOT g = s32[3] get-tuple-element(t), index=1
}""")
    assert changed
    filecheck(out, """
CHECK: ENTRY %e
CHECK-NEXT: %p0 = f32[2]{0} parameter(0)
CHECK-NEXT: ROOT %p1 = s32[3]{0} parameter(1)
CHECK-NEXT: }
""", tmp_path)


def test_chain_through_nested_tuples():
    changed, out = run("""HloModule m
ENTRY e {
  p0 = f32[2] parameter(0)
  p1 = f32[3] parameter(1)
  inner = (f32[2], f32[3]) tuple(p0, p1)
  outer = ((f32[2], f32[3]), f32[3]) tuple(inner, p1)
  g0 = (f32[2], f32[3]) get-tuple-element(outer), index=0
  g1 = f32[3] get-tuple-element(g0), index=1
  ROOT n = f32[3] negate(g1)
}""")
    assert changed
    assert "ROOT %n = f32[3]{0} negate(%p1)" in out
    assert "get-tuple-element" not in out and "tuple(" not in out


def test_tuple_of_all_elements_in_order_is_the_source():
    changed, out = run("""HloModule m
ENTRY e {
  p = (f32[2], s32[]) parameter(0)
  a = f32[2] get-tuple-element(p), index=0
  b = s32[] get-tuple-element(p), index=1
  ROOT t = (f32[2], s32[]) tuple(a, b)
}""")
    assert changed
    assert out.split("ENTRY")[1] == (" %e (p: (f32[2], s32[])) -> (f32[2], s32[]) {\n"
                                     "  ROOT %p = (f32[2]{0}, s32[]) parameter(0)\n}\n\n")


@pytest.mark.parametrize("operands", ["b, a", "a, a", "a, c"])
def test_tuple_not_of_all_elements_in_order_stays(operands):
    text = f"""HloModule m
ENTRY e {{
  p = (f32[2], f32[2]) parameter(0)
  q = (f32[2], f32[2]) parameter(1)
  a = f32[2] get-tuple-element(p), index=0
  b = f32[2] get-tuple-element(p), index=1
  c = f32[2] get-tuple-element(q), index=1
  ROOT t = (f32[2], f32[2]) tuple({operands})
}}"""
    changed, out = run(text)
    assert not changed
    assert "ROOT %t" in out


def test_tuple_of_a_prefix_of_the_elements_stays():
    # tuple(gte(x, 0)) has another shape than x: not x.
    changed, _ = run("""HloModule m
ENTRY e {
  p = (f32[2], f32[3]) parameter(0)
  a = f32[2] get-tuple-element(p), index=0
  ROOT t = (f32[2]) tuple(a)
}""")
    assert not changed


def test_element_of_a_non_tuple_stays():
    changed, _ = run("""HloModule m
ENTRY e {
  p = (f32[2], f32[3]) parameter(0)
  ROOT g = f32[3] get-tuple-element(p), index=1
}""")
    assert not changed


def test_different_shardings_block_the_replacement():
    # XLA replaces with preserve_sharding=true: both sharded differently, no change.
    text = """HloModule m
ENTRY e {
  p0 = f32[4] parameter(0), sharding={devices=[2]0,1}
  p1 = f32[4] parameter(1)
  t = (f32[4], f32[4]) tuple(p0, p1)
  ROOT g = f32[4] get-tuple-element(t), index=0, sharding={replicated}
}"""
    changed, out = run(text)
    assert not changed
    assert "ROOT %g" in out


def test_replacement_takes_the_sharding_and_metadata_it_lacks():
    changed, out = run("""HloModule m
ENTRY e {
  p0 = f32[4] parameter(0)
  n = f32[4] negate(p0)
  t = (f32[4]) tuple(n)
  ROOT g = f32[4] get-tuple-element(t), index=0, sharding={replicated}, metadata={op_name="pick"}
}""")
    assert changed
    assert 'ROOT %n = f32[4]{0} negate(%p0), sharding={replicated}, metadata={op_name="pick"}' in out


def test_replacement_of_the_same_opcode_takes_the_name():
    # XLA's ReplaceInstruction keeps the replaced instruction's name when
    # the opcodes match, so the element get-tuple-element becomes %outer.
    changed, out = run("""HloModule m
ENTRY e {
  p = (f32[2], f32[3]) parameter(0)
  inner = f32[3] get-tuple-element(p), index=1
  t = (f32[3]) tuple(inner)
  ROOT outer = f32[3] get-tuple-element(t), index=0
}""")
    assert changed
    assert "ROOT %outer = f32[3]{0} get-tuple-element(%p), index=1" in out
    assert "%inner" not in out


def test_control_dependencies_are_relayed(tmp_path):
    # The replaced gte's control predecessor now precedes its users; its
    # control successor now follows the replacement.
    changed, out = run("""HloModule m
ENTRY e {
  p0 = f32[2] parameter(0)
  p1 = f32[2] parameter(1)
  before = f32[2] exponential(p1)
  t = (f32[2], f32[2]) tuple(p0, p1)
  g = f32[2] get-tuple-element(t), index=0, control-predecessors={before}
  user = f32[2] negate(g)
  after = f32[2] sine(p1), control-predecessors={g}
  ROOT r = (f32[2], f32[2], f32[2]) tuple(before, user, after)
}""")
    assert changed
    filecheck(out, """
CHECK-DAG: %user = f32[2]{0} negate(%p0), control-predecessors={%before}
CHECK-DAG: %after = f32[2]{0} sine(%p1), control-predecessors={%p0}
""", tmp_path)
    assert "get-tuple-element" not in out


def test_exclude_entry_computation():
    text = """HloModule m
ENTRY e {
  p0 = f32[2] parameter(0)
  t = (f32[2]) tuple(p0)
  ROOT g = f32[2] get-tuple-element(t), index=0
}"""
    assert not run(text, exclude_entry_computation=True)[0]
    assert run(text)[0]


def test_simplifies_called_computations():
    changed, out = run("""HloModule m
callee {
  a = f32[2] parameter(0)
  t = (f32[2], f32[2]) tuple(a, a)
  ROOT g = f32[2] get-tuple-element(t), index=1
}
ENTRY e {
  p0 = f32[2] parameter(0)
  ROOT c = f32[2] call(p0), to_apply=callee
}""")
    assert changed
    assert "ROOT %a = f32[2]{0} parameter(0)" in out


def test_mlir_structure_is_kept():
    # A function returning the two results of a two-result op: the root tuple
    # of get-tuple-elements only encodes MLIR structure, and stays.
    module = parse_stablehlo("""
func.func @main(%arg0: tensor<4xf32>, %arg1: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
  %0:2 = "stablehlo.sort"(%arg0, %arg1) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
    %lt = stablehlo.compare LT, %a, %b : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %lt : tensor<i1>
  }) {dimension = 0 : i64} : (tensor<4xf32>, tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>)
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xi32>
}""")
    before = [(i.name, i.opcode) for i in module.instructions]
    assert not TupleSimplifier().run(module)
    assert [(i.name, i.opcode) for i in module.instructions] == before


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts())
def test_preserves_values_of_random_programs(text):
    assert_pass_preserves_values(TupleSimplifier(), text)


@pytest.mark.parametrize("name, text", corpus_params(verifying_corpus()))
def test_preserves_values_of_the_corpus(name, text):
    module = parse_module(text)
    if interpreter_runs(module):
        assert_pass_preserves_values(TupleSimplifier(), text, seeds=(0,))
    else:
        TupleSimplifier().run(module)
        verify(module)
