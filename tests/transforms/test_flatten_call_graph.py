"""FlattenCallGraph: one control-flow call site per computation, as XLA's
``FlattenCallGraph`` (``xla/hlo/transforms/simplifiers/flatten_call_graph.cc``;
cases after its ``flatten_call_graph_test.cc``), values checked against the
interpreter."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from tests.codegen.filecheck import filecheck
from tests.corpus_cases import verifying_corpus
from tools.hlo_corpus import interpreter_runs
from tools.random_hlo import assert_pass_preserves_values, hlo_texts
from xlapy.hlo import HloModule, parse_module
from xlapy.hlo.verifier import verify
from xlapy.interpreter import evaluate
from xlapy.transforms.flatten_call_graph import FlattenCallGraph

REPO = Path(__file__).parents[2]
CONTROL_FLOW = ("call", "while", "conditional")


def flattened(text: str) -> tuple[bool, HloModule]:
    module = parse_module(text)
    changed = FlattenCallGraph().run(module)
    verify(module)
    return changed, module


def call_sites(module: HloModule) -> tuple[dict[str, int], dict[str, int]]:
    """Per computation name: how many control-flow and embedded call sites name it."""
    control: dict[str, int] = {}
    embedded: dict[str, int] = {}
    for instruction in module.instructions:
        counts = control if instruction.opcode in CONTROL_FLOW else embedded
        for callee in instruction.called_computations:
            counts[callee.name] = counts.get(callee.name, 0) + 1
    return control, embedded


def assert_flat(module: HloModule) -> None:
    control, embedded = call_sites(module)
    assert all(n == 1 for n in control.values()), control
    assert not set(control) & set(embedded), (control, embedded)


def test_a_computation_called_twice_gets_a_copy_for_the_second_call(tmp_path: Path) -> None:
    changed, module = flattened("""HloModule m
inner {
  a = f32[4] parameter(0)
  ROOT n = f32[4] negate(a)
}
outer {
  x = f32[4] parameter(0)
  c = f32[4] call(x), to_apply=inner
  ROOT e = f32[4] exponential(c)
}
ENTRY main {
  p = f32[4] parameter(0)
  first = f32[4] call(p), to_apply=outer
  ROOT second = f32[4] call(first), to_apply=outer
}
""")
    assert changed
    assert_flat(module)
    # The copy calls ``inner`` too: it gets its own copy of it.
    filecheck(module.to_text(), """
CHECK: %inner (a: f32[4]) -> f32[4] {
CHECK: %outer (x: f32[4]) -> f32[4] {
CHECK: call(%x), to_apply=%inner
CHECK: %inner.clone (a.clone: f32[4]) -> f32[4] {
CHECK-NEXT: %a.clone = f32[4]{0} parameter(0)
CHECK-NEXT: ROOT %n.clone = f32[4]{0} negate(%a.clone)
CHECK: %outer.clone (x.clone: f32[4]) -> f32[4] {
CHECK: %c.clone = f32[4]{0} call(%x.clone), to_apply=%inner.clone
CHECK: ENTRY %main
CHECK: %first = f32[4]{0} call(%p), to_apply=%outer
CHECK: ROOT %second = f32[4]{0} call(%first), to_apply=%outer.clone
""", tmp_path)


WHILES = """HloModule m
cond {
  c = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(c), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}
body {
  b = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(b), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  v = f32[2] get-tuple-element(b), index=1
  twice = f32[2] add(v, v)
  ROOT t = (s32[], f32[2]) tuple(next, twice)
}
ENTRY main {
  p = f32[2] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[2]) tuple(zero, p)
  w1 = (s32[], f32[2]) while(init), condition=cond, body=body
  w2 = (s32[], f32[2]) while(w1), condition=cond, body=body
  ROOT r = f32[2] get-tuple-element(w2), index=1
}
"""


def test_whiles_sharing_body_and_condition_get_their_own(tmp_path: Path) -> None:
    changed, module = flattened(WHILES)
    assert changed
    assert_flat(module)
    filecheck(module.to_text(), """
CHECK: ENTRY %main
CHECK: %w1 = {{.*}} while(%init), condition=%cond, body=%body
CHECK: %w2 = {{.*}} while(%w1), condition=%cond.clone, body=%body.clone
""", tmp_path)
    argument = np.array([1.5, -2.0], np.float32)
    np.testing.assert_array_equal(evaluate(module, argument), evaluate(parse_module(WHILES), argument))


def test_conditional_branches_naming_one_computation_get_one_each(tmp_path: Path) -> None:
    text = """HloModule m
branch {
  a = f32[] parameter(0)
  ROOT n = f32[] negate(a)
}
ENTRY main {
  k = s32[] parameter(0)
  p = f32[] parameter(1)
  ROOT c = f32[] conditional(k, p, p), branch_computations={branch, branch}
}
"""
    changed, module = flattened(text)
    assert changed
    assert_flat(module)
    filecheck(module.to_text(), """
CHECK: ROOT %c = f32[] conditional(%k, %p, %p), branch_computations={%branch, %branch.clone}
""", tmp_path)
    for k in (0, 1, 5):
        assert evaluate(module, np.int32(k), np.float32(2)) == evaluate(parse_module(text), np.int32(k), np.float32(2))


REDUCER = """HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY main {
  p = f32[3] parameter(0)
  zero = f32[] constant(0)
  r1 = f32[] reduce(p, zero), dimensions={0}, to_apply=add
  r2 = f32[] reduce(p, r1), dimensions={0}, to_apply=add
  ROOT s = f32[] call(r1, r2), to_apply=add
}
"""


def test_reducers_stay_shared_and_a_computation_called_both_ways_is_copied_for_its_call(tmp_path: Path) -> None:
    changed, module = flattened(REDUCER)
    assert changed
    assert_flat(module)
    # ``add`` is called in both contexts: even its first control-flow call gets a copy.
    filecheck(module.to_text(), """
CHECK: %r1 = f32[] reduce(%p, %zero), dimensions={0}, to_apply=%add
CHECK: %r2 = f32[] reduce(%p, %r1), dimensions={0}, to_apply=%add
CHECK: ROOT %s{{.*}} = f32[] call(%r1, %r2), to_apply=%add.clone
""", tmp_path)
    only_reducers = REDUCER.replace("ROOT s = f32[] call(r1, r2), to_apply=add", "ROOT s = f32[] add(r1, r2)")
    changed, module = flattened(only_reducers)
    assert not changed and module.to_text() == parse_module(only_reducers).to_text()


def test_a_flat_module_is_unchanged_and_flattening_twice_changes_nothing() -> None:
    text = (REPO / "tests/transforms/data/nested_jit_calls.hlo").read_text()
    module = parse_module(text)
    assert FlattenCallGraph().run(module)
    after_once = module.to_text()
    assert not FlattenCallGraph().run(module)
    assert module.to_text() == after_once
    assert_flat(module)


def test_fusions_in_a_copied_computation_own_copies_of_their_fused_computations() -> None:
    text = """HloModule m
fused {
  x = f32[] parameter(0)
  ROOT y = f32[] negate(x)
}
callee {
  a = f32[] parameter(0)
  ROOT f = f32[] fusion(a), kind=kLoop, calls=fused
}
ENTRY main {
  p = f32[] parameter(0)
  c1 = f32[] call(p), to_apply=callee
  ROOT c2 = f32[] call(c1), to_apply=callee
}
"""
    changed, module = flattened(text)
    assert changed
    fusions = [i for i in module.instructions if i.opcode == "fusion"]
    assert len({id(f.fused_computation) for f in fusions}) == 2
    assert all(f.fused_computation.fusion_instruction is f for f in fusions)
    assert evaluate(module, np.float32(3)) == evaluate(parse_module(text), np.float32(3))


def test_nested_jit_calls_from_jax_keep_their_values() -> None:
    text = (REPO / "tests/transforms/data/nested_jit_calls.hlo").read_text()
    assert_flat(assert_pass_preserves_values(FlattenCallGraph(), text))


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(hlo_texts())
def test_flattening_preserves_values_of_random_programs(text: str) -> None:
    assert_flat(assert_pass_preserves_values(FlattenCallGraph(), text))


def _has_control_flow(text: str) -> bool:
    return any(f" {opcode}(" in text for opcode in CONTROL_FLOW)


@pytest.mark.parametrize(("name", "text"), [c for c in verifying_corpus() if _has_control_flow(c[1])], ids=lambda v: v)
def test_flattening_preserves_corpus_modules_with_control_flow(name: str, text: str) -> None:
    if interpreter_runs(parse_module(text)):
        module = assert_pass_preserves_values(FlattenCallGraph(), text, seeds=(0,))
    else:  # an op the interpreter lacks: the structure is still checked
        module = parse_module(text)
        FlattenCallGraph().run(module)
        verify(module)
    assert_flat(module)
