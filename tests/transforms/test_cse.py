"""HloCSE against the behaviour of XLA's (``xla/service/hlo_cse.cc`` and
``hlo_cse_test.cc``), and against the interpreter on random and corpus
programs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tests.corpus_cases import corpus_params, verifying_corpus
from tools.hlo_corpus import interpreter_runs
from tools.random_hlo import assert_pass_preserves_values, hlo_texts
from xlapy.hlo import parse_module, verify
from xlapy.transforms.cse import HloCSE


def run(text: str, **options: bool) -> tuple[bool, str]:
    module = parse_module(text)
    changed = HloCSE(**options).run(module)
    verify(module)
    return changed, module.to_text()


def test_equal_constants_merge(tmp_path):
    changed, out = run("""HloModule m
ENTRY e {
  c1 = f32[] constant(42)
  c2 = f32[] constant(42)
  ROOT a = f32[] add(c1, c2)
}""")
    assert changed
    filecheck(out, """
CHECK: %c1 = f32[] constant(42)
CHECK-NEXT: ROOT %a = f32[] add(%c1, %c1)
CHECK-NOT: %c2
""", tmp_path)


@pytest.mark.parametrize("first, second", [("f32[] constant(42)", "f32[] constant(43)"),
                                           ("f32[] constant(0)", "f32[] constant(-0.0)"),
                                           ("f32[] constant(1)", "s32[] constant(1)"),
                                           ("f32[2]{0} constant({1, 2})", "f32[2]{0} constant({2, 1})")])
def test_different_constants_stay(first, second):
    changed, _ = run(f"""HloModule m
ENTRY e {{
  c1 = {first}
  c2 = {second}
  ROOT t = ({first.split()[0]}, {second.split()[0]}) tuple(c1, c2)
}}""")
    assert not changed


@pytest.mark.parametrize("layout_sensitive, merged", [(False, True), (True, False)])
def test_constants_of_other_layouts(layout_sensitive, merged):
    changed, _ = run("""HloModule m
ENTRY e {
  c1 = f32[2,2]{0,1} constant({ {1, 2}, {3, 4} })
  c2 = f32[2,2]{1,0} constant({ {1, 2}, {3, 4} })
  ROOT t = (f32[2,2]{0,1}, f32[2,2]{1,0}) tuple(c1, c2)
}""", is_layout_sensitive=layout_sensitive)
    assert changed == merged


def test_identical_instructions_merge_commutative_operands_either_order(tmp_path):
    changed, out = run("""HloModule m
ENTRY e {
  p0 = f32[4] parameter(0)
  p1 = f32[4] parameter(1)
  a1 = f32[4] add(p0, p1)
  a2 = f32[4] add(p1, p0)
  s1 = f32[4] subtract(p0, p1)
  s2 = f32[4] subtract(p1, p0)
  n1 = f32[4] negate(a1)
  n2 = f32[4] negate(a2)
  ROOT t = (f32[4], f32[4], f32[4], f32[4]) tuple(n1, n2, s1, s2)
}""")
    assert changed
    filecheck(out, """
CHECK: %a1 = f32[4]{0} add(%p0, %p1)
CHECK-NEXT: %n1 = f32[4]{0} negate(%a1)
CHECK-NEXT: %s1 = f32[4]{0} subtract(%p0, %p1)
CHECK-NEXT: %s2 = f32[4]{0} subtract(%p1, %p0)
CHECK-NEXT: ROOT %t = {{.*}} tuple(%n1, %n1, %s1, %s2)
""", tmp_path)


@pytest.mark.parametrize("first, second", [
    ("f32[4] slice(p0), slice={[0:4]}", "f32[4] slice(p0), slice={[1:5]}"),
    ("pred[8] compare(p0, p0), direction=LT", "pred[8] compare(p0, p0), direction=GT"),
    ("f32[4] broadcast(c), dimensions={}", "f32[4] broadcast(d), dimensions={}"),
])
def test_instructions_differing_in_attributes_or_operands_stay(first, second):
    shape = first.split()[0]
    changed, _ = run(f"""HloModule m
ENTRY e {{
  p0 = f32[8] parameter(0)
  c = f32[] parameter(1)
  d = f32[] parameter(2)
  x = {first}
  y = {second}
  ROOT t = ({shape}, {shape}) tuple(x, y)
}}""")
    assert not changed


def test_metadata_does_not_matter_sharding_does():
    changed, out = run("""HloModule m
ENTRY e {
  p0 = f32[4] parameter(0)
  a = f32[4] negate(p0), metadata={op_name="a"}
  b = f32[4] negate(p0), metadata={op_name="b"}
  c = f32[4] exponential(p0), sharding={replicated}
  d = f32[4] exponential(p0), sharding={maximal device=0}
  ROOT t = (f32[4], f32[4], f32[4], f32[4]) tuple(a, b, c, d)
}""")
    assert changed
    assert "%b =" not in out and "tuple(%a, %a, %c, %d)" in out


def test_side_effects_and_control_dependencies_block():
    changed, out = run("""HloModule m
ENTRY e {
  p0 = f32[4] parameter(0)
  r1 = f32[4] custom-call(p0), custom_call_target="foo", custom_call_has_side_effect=true
  r2 = f32[4] custom-call(p0), custom_call_target="foo", custom_call_has_side_effect=true
  k1 = f32[4] custom-call(p0), custom_call_target="foo"
  k2 = f32[4] custom-call(p0), custom_call_target="foo"
  n1 = f32[4] negate(p0)
  n2 = f32[4] negate(p0), control-predecessors={r1}
  ROOT t = (f32[4], f32[4], f32[4], f32[4], f32[4], f32[4]) tuple(r1, r2, k1, k2, n1, n2)
}""")
    assert changed
    assert "%r2 =" in out and "%n2 =" in out and "%k2 =" not in out


def test_rng_is_not_merged():
    changed, _ = run("""HloModule m
ENTRY e {
  lo = f32[] parameter(0)
  hi = f32[] parameter(1)
  a = f32[4] rng(lo, hi), distribution=rng_uniform
  b = f32[4] rng(lo, hi), distribution=rng_uniform
  ROOT t = (f32[4], f32[4]) tuple(a, b)
}""")
    assert not changed


def test_calls_of_equal_computations_merge():
    changed, out = run("""HloModule m
f {
  x = f32[4] parameter(0)
  ROOT y = f32[4] exponential(x)
}
g {
  u = f32[4] parameter(0)
  ROOT v = f32[4] exponential(u)
}
h {
  u = f32[4] parameter(0)
  ROOT v = f32[4] sine(u)
}
ENTRY e {
  p0 = f32[4] parameter(0)
  a = f32[4] call(p0), to_apply=f
  b = f32[4] call(p0), to_apply=g
  c = f32[4] call(p0), to_apply=h
  ROOT t = (f32[4], f32[4], f32[4]) tuple(a, b, c)
}""")
    assert changed
    assert "tuple(%a, %a, %c)" in out


def test_equal_iota_operands_count_as_one():
    # As in XLA's tests: two equal iotas are merged through their users.
    changed, out = run("""HloModule m
ENTRY e {
  i1 = s32[4] iota(), iota_dimension=0
  i2 = s32[4] iota(), iota_dimension=0
  ROOT a = s32[4] add(i1, i2)
}""")
    assert changed
    assert "ROOT %a = s32[4]{0} add(%i1, %i1)" in out and "%i2" not in out


def test_unused_operands_of_the_duplicate_go():
    changed, out = run("""HloModule m
ENTRY e {
  p0 = f32[4] parameter(0)
  n1 = f32[4] negate(p0)
  e1 = f32[4] exponential(n1)
  n2 = f32[4] negate(p0)
  e2 = f32[4] exponential(n2)
  ROOT t = (f32[4], f32[4]) tuple(e1, e2)
}""")
    assert changed
    assert "%n2" not in out and "%e2" not in out and "tuple(%e1, %e1)" in out


def test_partition_and_replica_ids_merge():
    changed, out = run("""HloModule m
ENTRY e {
  a = u32[] partition-id()
  b = u32[] partition-id()
  ROOT t = (u32[], u32[]) tuple(a, b)
}""")
    assert changed and "tuple(%a, %a)" in out


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts())
def test_preserves_values_of_random_programs(text):
    assert_pass_preserves_values(HloCSE(), text)


@pytest.mark.parametrize("name, text", corpus_params(verifying_corpus()))
def test_preserves_values_of_the_corpus(name, text):
    module = parse_module(text)
    if interpreter_runs(module):
        assert_pass_preserves_values(HloCSE(), text, seeds=(0,))
    else:
        HloCSE().run(module)
        verify(module)
